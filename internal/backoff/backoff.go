// Package backoff is the schedule on which shellagent tries again what
// fails again and again, such as a write to a full disk: not before a
// second after the first failure, then twice the last wait after each
// next one, at most 30 s, until a try works. So a full disk costs a
// flooding session one try each 30 s, not one each batch, and one log
// line as the run of failures starts and one as it ends.
package backoff

import "time"

// The waits of a Run: First after its first failure, twice the last
// after each next one, at most Max.
const (
	First = time.Second
	Max   = 30 * time.Second
)

// A Run is a run of failures of one thing. Its zero value has none: the
// thing may be tried at once. A Run is not safe for concurrent use: its
// owner's goroutine tries the thing.
type Run struct {
	failures int
	wait     time.Duration // the last wait
	next     time.Time     // not tried before
}

// Due reports whether the thing may be tried at now.
func (r *Run) Due(now time.Time) bool { return r.failures == 0 || !now.Before(r.next) }

// Failed notes a failure at now, and reports whether it starts the run
// (the one to log).
func (r *Run) Failed(now time.Time) (first bool) {
	r.failures++
	r.wait = min(max(2*r.wait, First), Max)
	r.next = now.Add(r.wait)
	return r.failures == 1
}

// Worked ends the run, and returns how many failures it had (0: there
// was no run to log the end of).
func (r *Run) Worked() int {
	n := r.failures
	*r = Run{}
	return n
}

// Failing reports whether a run of failures is under way.
func (r *Run) Failing() bool { return r.failures > 0 }
