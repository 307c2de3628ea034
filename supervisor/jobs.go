package supervisor

import (
	"fmt"
	"slices"
	"time"

	"shellagent/protocol"
)

// A job is a scheduled wakeup (/after) or a recurring job (/every): a tool
// call that stays pending and listed, with no process of its own. When it
// fires, its command runs as new foreground work (RFD "Tool call statuses
// for background work": statuses never go back to pending; the firing is
// not the tool call running).
type job struct {
	call    *toolCall
	line    string
	every   time.Duration // 0 for a one-shot wakeup
	delay   time.Duration
	created time.Time
	next    time.Time
	timer   *time.Timer
	queued  bool // a firing waits in the session's queue
}

func (j *job) name() string {
	if j.every > 0 {
		return "every " + j.every.String()
	}
	return "after " + j.delay.String()
}

// schedule serves /after and /every: the tool call is announced pending and
// cancellable, then listed.
func (s *Session) schedule(in input) {
	j := &job{line: in.line, delay: in.delay, created: time.Now()}
	if in.kind == everyWork {
		j.every = in.delay
	}
	c := &toolCall{
		id: s.newID("call"), kind: "other", status: protocol.StatusPending, cancel: true, job: j,
		title: j.name() + ": " + in.line,
		input: map[string]string{"command": in.line, "cwd": s.cwd, "schedule": j.name()},
	}
	j.call = c
	s.calls[c.id] = c
	s.emit(c.update())
	s.listCall(c)
	s.arm(j, in.delay)
}

func (s *Session) arm(j *job, d time.Duration) {
	j.next = time.Now().Add(d)
	j.timer = time.AfterFunc(d, func() { s.fire(j) })
}

// fire runs the job's command as new foreground work. A wakeup completes
// first and leaves the list in the same snapshot that reports the new work
// running (or queued behind the current foreground work).
func (s *Session) fire(j *job) {
	s.mu.Lock()
	defer s.unlock()
	if j.call.final() || s.closing {
		return
	}
	if j.every > 0 {
		s.arm(j, j.every)
		if (s.fg != nil && s.fg.job == j) || (s.waiting != nil && s.waiting.job == j) || j.queued {
			s.agentMessage(fmt.Sprintf("%s (%s): skipped this run; the previous run is still going.", j.call.title, j.call.id))
			return
		}
	} else {
		j.call.status, j.call.cancel = protocol.StatusCompleted, false
		s.emit(j.call.update())
		s.unlistCall(j.call)
	}
	t := &turn{in: input{kind: runCommand, line: j.line}, job: j}
	if s.busy() || len(s.queue) > 0 {
		j.queued = true
		s.queue = append(s.queue, t)
		return
	}
	s.start(t)
}

// cancelJob ends a job: no more firings, including one waiting in the
// queue; cancelled, then unlisted.
func (s *Session) cancelJob(j *job) {
	if j.call.final() {
		return
	}
	j.timer.Stop()
	s.queue = slices.DeleteFunc(s.queue, func(t *turn) bool { return t.job == j })
	j.queued = false
	j.call.status, j.call.cancel = protocol.StatusCancelled, false
	s.emit(j.call.update())
	s.unlistCall(j.call)
}
