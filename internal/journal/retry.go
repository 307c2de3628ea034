package journal

import (
	"log/slog"
	"time"

	"shellagent/internal/backoff"
)

// A retry is a run of failures of one thing the writer does to a file
// (writing it, compacting it), on a disk that is full or failing: tried
// again on package backoff's schedule, its run logged once as it starts
// and once as it ends.
type retry struct{ backoff.Run }

// fail notes a failure of what (the verb of the log line) on session
// id's file at now, logged once a run.
func (r *retry) fail(log *slog.Logger, id, what string, now time.Time, err error) {
	if r.Failed(now) {
		log.Warn("history: cannot "+what+" a session file; tried again after 1 s, then less often (at most each 30 s) until it works",
			"session", id, "err", err)
	}
}

// ok ends a run of failures of what on session id's file, logged if
// there was one.
func (r *retry) ok(log *slog.Logger, id, what string) {
	if n := r.Worked(); n > 0 {
		log.Info("history: "+what+" a session file works again", "session", id, "failures", n)
	}
}
