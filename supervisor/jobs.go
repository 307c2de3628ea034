package supervisor

import (
	"fmt"
	"time"

	"shellagent/acp"
)

// A job is a scheduled wakeup (/after) or a recurring job (/every): a tool
// call that stays pending and listed, with no process of its own. Its
// state is its tool call's: callScheduled until a wakeup fires or the job
// is cancelled, then callDone. When it fires, its command runs as new
// foreground work, a turn of its own (RFD "Tool call statuses for
// background work": statuses never go back to pending; the firing is not
// the tool call running).
type job struct {
	call    *toolCall
	line    string
	every   time.Duration // 0 for a one-shot wakeup
	delay   time.Duration
	created time.Time
	next    time.Time
	timer   *time.Timer
	skipped *turn // the run during which a firing was skipped and said so
}

func (j *job) name() string {
	if j.every > 0 {
		return "every " + j.every.String()
	}
	return "after " + j.delay.String()
}

// schedule serves /after and /every: the tool call is announced pending and
// cancellable, then listed.
func (st *state) schedule(in input) {
	j := &job{line: in.line, delay: in.delay, created: time.Now()}
	if in.kind == everyWork {
		j.every = in.delay
	}
	c := st.newCall(callScheduled, "other", j.name()+": "+in.line)
	c.job, j.call = j, c
	c.input = map[string]string{"command": in.line, "cwd": st.s.cwd, "schedule": j.name()}
	st.out.send(c.update())
	st.list.addCall(c)
	j.arm(st.s, in.delay)
}

// arm makes the job fire in s after d.
func (j *job) arm(s *Session, d time.Duration) {
	j.next = time.Now().Add(d)
	j.timer = time.AfterFunc(d, func() { s.fire(j) })
}

// fire runs the job's command as new foreground work. A wakeup completes
// first and leaves the list in the same state_update that reports the new
// work running (or queued behind the current foreground work). A recurring
// job whose previous run still holds or waits for the foreground skips
// this firing, and says so once per such run.
func (s *Session) fire(j *job) {
	s.do(func(st *state) {
		if j.call.state != callScheduled || st.life != sessionOpen {
			return
		}
		if j.every > 0 {
			j.arm(s, j.every)
			if run := st.turns.runOf(j); run != nil {
				if j.skipped != run {
					j.skipped = run
					st.out.agentMessage(fmt.Sprintf("%s (%s): skipped this run; the previous run is still going. Runs are skipped silently until it ends.", j.call.title, j.call.id))
				}
				return
			}
		} else {
			st.work.finish(j.call, acp.StatusCompleted)
			st.out.send(j.call.update())
			st.list.removeCall(j.call)
		}
		t := &turn{in: input{kind: runCommand, line: j.line}, job: j}
		if st.turns.busy() || st.turns.waiting() {
			st.turns.hold(t)
			return
		}
		st.start(t)
	})
}

// cancelJob ends a job: no more firings, including one waiting in the
// queue; cancelled, then unlisted.
func (st *state) cancelJob(j *job) {
	if j.call.state != callScheduled {
		return
	}
	j.timer.Stop()
	st.turns.drop(func(t *turn) bool { return t.job == j })
	st.work.finish(j.call, acp.StatusCancelled)
	st.out.send(j.call.update())
	st.list.removeCall(j.call)
}
