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
	call     *toolCall
	line     string
	schedule string        // "after 5m0s", "every 30s"
	every    time.Duration // 0 for a one-shot wakeup
	created  time.Time
	next     time.Time
	timer    timer
	skipped  *turn // the run during which a firing was skipped and said so
}

// schedule serves /after and /every (every): line is to run after delay,
// or every delay. The tool call is announced pending and cancellable,
// then listed. It returns the tool call.
func (st *state) schedule(line string, delay time.Duration, every bool) *toolCall {
	in := input{line: line, delay: delay}
	j := &job{line: in.line, schedule: "after " + in.delay.String(), created: st.s.sv.cfg.clock.Now()}
	if every {
		j.every, j.schedule = in.delay, "every "+in.delay.String()
	}
	c := st.newCall(callScheduled, "other", j.schedule+": "+in.line)
	c.task, j.call = j, c
	c.input = map[string]string{"command": in.line, "cwd": st.s.cwd, "schedule": j.schedule}
	st.out.send(c.update())
	st.list.addCall(c)
	j.arm(st.s, in.delay)
	return c
}

// owns reports whether t is a firing of j.
func (j *job) owns(t *turn) bool { return t.origin == j }

// listing implements task.
func (j *job) listing(now time.Time) string {
	return fmt.Sprintf("%s  %s  %s  age %s  %s, next run in %s", j.call.id, j.schedule, j.line, age(now.Sub(j.created)), j.call.status(), age(j.next.Sub(now)))
}

// cancellable implements task: a job is cancelled until it ends.
func (j *job) cancellable() bool { return true }

// cancel implements task: no more firings, and a firing that waits for
// the foreground is dropped.
func (j *job) cancel(st *state) {
	st.turns.drop(j.owns)
	j.end(st)
}

// close implements task.
func (j *job) close(st *state) { j.end(st) }

// arm makes the job fire in s after d.
func (j *job) arm(s *Session, d time.Duration) {
	c := s.sv.cfg.clock
	j.next = c.Now().Add(d)
	j.timer = c.AfterFunc(d, func() { s.do(j.fire) })
}

// fire runs a firing of the job as new foreground work: at once, or held
// behind the current foreground work; unless the job says it is not due
// (fired).
func (j *job) fire(st *state) {
	if st.life != sessionOpen || !j.fired(st, st.turns.runOf(j.owns)) {
		return
	}
	st.startOrHold(&turn{in: input{cmd: shellLine, line: j.line}, origin: j})
}

// fired serves a firing of j and reports whether its command runs now,
// as new foreground work (fire). A wakeup completes first and
// leaves the list in the same state_update that reports the new work
// running (or queued behind the current foreground work). A recurring job
// whose previous run (run) still holds or waits for the foreground skips
// this firing, and says so once per such run. A job that has ended does
// not run.
func (j *job) fired(st *state, run *turn) bool {
	if j.call.state != callScheduled {
		return false
	}
	if j.every == 0 {
		endCall(st, j.call, acp.StatusCompleted)
		return true
	}
	j.arm(st.s, j.every)
	if run == nil {
		return true
	}
	if j.skipped != run {
		j.skipped = run
		st.out.agentMessage(fmt.Sprintf("%s (%s): skipped this run; the previous run is still going. Runs are skipped silently until it ends.", j.call.title, j.call.id))
	}
	return false
}

// end ends a job: no more firings; cancelled, then unlisted. A firing of
// it that waits for the foreground is the caller's to drop.
func (j *job) end(st *state) {
	if j.call.state != callScheduled {
		return
	}
	j.timer.Stop()
	endCall(st, j.call, acp.StatusCancelled)
}

// frozenJob is a scheduled job as an upgrade in place hands it over
// (freeze.go): the new image arms it for the same next run.
type frozenJob struct {
	Line, Schedule string
	Every          time.Duration
	Created, Next  time.Time
}

// handOver implements task.
func (j *job) handOver() *frozenTask {
	return &frozenTask{Job: &frozenJob{Line: j.line, Schedule: j.schedule, Every: j.every, Created: j.created, Next: j.next}}
}

// thawJob makes f the task of tool call c again, in the new image of an
// upgrade in place, armed for its next run (at once if that has passed).
func thawJob(st *state, c *toolCall, f *frozenJob) {
	j := &job{call: c, line: f.Line, schedule: f.Schedule, every: f.Every, created: f.Created}
	c.task = j
	if c.state == callScheduled {
		j.arm(st.s, max(0, f.Next.Sub(st.s.sv.cfg.clock.Now())))
	}
}
