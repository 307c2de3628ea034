package journal

import (
	"log/slog"
	"time"
)

// The waits of a retry: a second after the first failure, twice the
// last after each next one, at most retryMax.
const (
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// A retry is a run of failures of one thing the writer does to a file
// (writing it, compacting it), on a disk that is full or failing: after
// each failure the thing is not tried again before its wait, which
// doubles with each failure up to retryMax; a success ends the run. So a
// full disk costs a flooding session one try each 30 s, not one each
// batch.
type retry struct {
	failures int           // of the current run
	wait     time.Duration // the last wait
	next     time.Time     // not tried before
}

// due reports whether the thing may be tried at now.
func (r *retry) due(now time.Time) bool { return r.failures == 0 || !now.Before(r.next) }

// failed notes a failure at now, and reports whether it starts a run.
func (r *retry) failed(now time.Time) bool {
	r.failures++
	r.wait = min(max(2*r.wait, retryFirst), retryMax)
	r.next = now.Add(r.wait)
	return r.failures == 1
}

// worked ends the run, and returns how many failures it had.
func (r *retry) worked() int {
	n := r.failures
	*r = retry{}
	return n
}

// fail notes a failure of what (the verb of the log line) on session
// id's file at now, logged once a run.
func (r *retry) fail(log *slog.Logger, id, what string, now time.Time, err error) {
	if r.failed(now) {
		log.Warn("history: cannot "+what+" a session file; tried again after 1 s, then less often (at most each 30 s) until it works",
			"session", id, "err", err)
	}
}

// ok ends a run of failures of what on session id's file, logged if
// there was one.
func (r *retry) ok(log *slog.Logger, id, what string) {
	if n := r.worked(); n > 0 {
		log.Info("history: "+what+" a session file works again", "session", id, "failures", n)
	}
}
