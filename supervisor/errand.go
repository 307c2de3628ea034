package supervisor

// An errand is slow work that an event needs and that must not run under
// the session's mutex: launching a command (a fork and exec, a cgroup, and
// in subreaper mode the containment's fork lock, which a reap pass holds
// while it scans /proc), /ps's scan of each terminal's processes, and a
// watch's walk of the tree it watches (/watch, /resume).
//
// The event sends the work out (errands.send) and returns. Session.do runs
// the work on a goroutine of its own and then, under the mutex again, the
// rest of the event: what send was told to do with the result, then what
// the event does after it (errands.then). The session is away meanwhile:
// every other entry waits its turn in a queue and runs after the event is
// complete, in the order it came. So no one sees an event half done, and
// no one is held up either: do queues an entry instead of blocking on it.
type errand struct {
	work func()   // runs outside the mutex, and touches no state
	then []func() // the rest of the event, in order, once work is done
}

// errands is the errand that the current event has sent out, if any. It is
// part of the session's state.
type errands struct{ out *errand }

// send sends work out; back runs once it is done, then whatever the event
// does after it (see then). Work sent while another errand is out goes out
// once that one is back and what followed it has run.
func (e *errands) send(work, back func()) {
	if e.out != nil {
		e.then(func() { e.send(work, back) })
		return
	}
	e.out = &errand{work: work, then: []func(){back}}
}

// then runs f now, or, if an errand is out, once it is back. What an event
// does after something that may send an errand out goes through then, so
// that it happens after the errand's result, as it would without one.
func (e *errands) then(f func()) {
	if e.out == nil {
		f()
		return
	}
	e.out.then = append(e.out.then, f)
}

// take returns the errand that is out, if any, for Session.do to run.
func (e *errands) take() *errand {
	out := e.out
	e.out = nil
	return out
}

// back continues the event of done, whose work is done: the rest of the
// event runs, until a part of it sends another errand out; what remains
// then waits for that one.
func (e *errands) back(done *errand) {
	for i, f := range done.then {
		f()
		if e.out != nil {
			e.out.then = append(e.out.then, done.then[i+1:]...)
			return
		}
	}
}
