package stack

import (
	"fmt"
	"time"
)

// QuickRun is how long a run must last for its end not to count toward
// max_restarts: a run that ends sooner after its start is a quick failure.
const QuickRun = 10 * time.Second

// MaxBackoff is the most the delay before a restart grows to by doubling
// (a backoff set above it is used as it is, not doubled).
const MaxBackoff = 30 * time.Second

// Policy is a service's restart rule: its restart, max_restarts and
// backoff keys.
type Policy struct {
	Restart     Restart
	MaxRestarts int
	Backoff     time.Duration
}

// Run is one run of a service as its Restarter sees it: when it started
// and ended, by the supervisor's clock, and how it ended.
type Run struct {
	Start, End time.Time
	Exit       Exit
}

// Exit is how a run ended: an exit code, or the signal that killed it,
// or why it did not start.
type Exit struct {
	Code   int
	Signal string // such as "SIGSEGV"; "" if the process exited
	// NotStarted, if set, says why the run's command did not start, in
	// words that say so: "its command could not start (…)", "port 80 is
	// in use …; its command was not run".
	NotStarted string
}

// Failed reports whether the exit is a failure for on-failure: a non-zero
// code, a signal, or a command that did not start.
func (e Exit) Failed() bool { return e.Code != 0 || e.Signal != "" || e.NotStarted != "" }

func (e Exit) String() string {
	switch {
	case e.NotStarted != "":
		return e.NotStarted
	case e.Signal != "":
		return "killed by " + e.Signal
	}
	return fmt.Sprintf("exit %d", e.Code)
}

// Decision is what a Restarter decides after a run.
type Decision struct {
	// Restart is whether the service runs again, After from the run's end.
	Restart bool
	After   time.Duration
	// Attempt counts the restarts in a row after quick runs, this one
	// included (1 for the first); a restart after a long run is 0; when
	// it gives up, the restarts it made.
	Attempt int
	// GaveUp is set when the service keeps failing quickly and is not
	// restarted again (its tool call then fails), as opposed to not
	// restarted because the policy never restarts after this exit.
	GaveUp bool
	// Reason says why, for the notice: "exit 1, restart 2 of 5 in 2s",
	// "exit 0 and restart = on-failure", "gave up after 5 restarts …".
	Reason string
}

// Restarter follows the restart policy of one service across its runs: a
// small state machine fed each run as it ends. Its clock is the caller's:
// it reads no time but the Run's. Its zero value is not usable; it is
// owned by one goroutine (the service's).
type Restarter struct {
	policy   Policy
	quick    int           // restarts in a row after quick runs
	delay    time.Duration // the next restart's delay
	restarts int           // every restart decided, for /status
}

// NewRestarter returns the Restarter of a service's first run.
func NewRestarter(p Policy) *Restarter {
	return &Restarter{policy: p, delay: p.Backoff}
}

// Restarts is the number of restarts decided so far, for /status.
func (r *Restarter) Restarts() int { return r.restarts }

// Counters are what a Restarter has counted: its state, besides its
// Policy, as an upgrade in place hands it to the next image.
type Counters struct {
	Quick    int           // restarts in a row after quick runs
	Delay    time.Duration // the next restart's delay
	Restarts int           // every restart decided
}

// Counters returns what r has counted, for ResumeRestarter.
func (r *Restarter) Counters() Counters {
	return Counters{Quick: r.quick, Delay: r.delay, Restarts: r.restarts}
}

// ResumeRestarter returns the Restarter of p that goes on from c, what
// an earlier one had counted (Restarter.Counters).
func ResumeRestarter(p Policy, c Counters) *Restarter {
	r := NewRestarter(p)
	r.quick, r.restarts = c.Quick, c.Restarts
	if c.Delay > 0 {
		r.delay = c.Delay
	}
	return r
}

// Next decides what follows run: nothing under restart = no, or after a
// clean exit under on-failure; else a restart after the current delay,
// which then doubles up to MaxBackoff. A run that lasted QuickRun or more
// resets the count and the delay; after max_restarts restarts in a row
// that each followed a quick run, one more quick run gives up.
func (r *Restarter) Next(run Run) Decision {
	switch {
	case r.policy.Restart == RestartAlways:
	case r.policy.Restart == RestartOnFailure && run.Exit.Failed():
	case r.policy.Restart == RestartOnFailure:
		return Decision{Reason: run.Exit.String() + " and restart = on-failure"}
	default:
		return Decision{Reason: run.Exit.String() + " and restart = no"}
	}
	if run.End.Sub(run.Start) >= QuickRun {
		r.quick = 0
		r.delay = r.policy.Backoff
	} else if r.quick >= r.policy.MaxRestarts {
		return Decision{
			GaveUp:  true,
			Attempt: r.quick,
			Reason: fmt.Sprintf("%s; gave up after %d restarts in a row, each run under %v",
				run.Exit, r.quick, QuickRun),
		}
	} else {
		r.quick++
	}
	d := Decision{Restart: true, After: r.delay, Attempt: r.quick}
	if d.Attempt > 0 {
		d.Reason = fmt.Sprintf("%s; restart %d of %d in %v", run.Exit, d.Attempt, r.policy.MaxRestarts, d.After)
	} else {
		d.Reason = fmt.Sprintf("%s after %v; restart in %v", run.Exit, run.End.Sub(run.Start).Round(time.Second), d.After)
	}
	r.restarts++
	r.delay = r.nextDelay()
	return d
}

// nextDelay doubles the delay up to MaxBackoff, or keeps a backoff set
// above it.
func (r *Restarter) nextDelay() time.Duration {
	limit := max(MaxBackoff, r.policy.Backoff)
	if r.delay > limit/2 {
		return limit
	}
	return 2 * r.delay
}
