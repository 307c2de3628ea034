package supervisor

import (
	"time"

	"shellagent/supervisor/work"
)

// A clock is where the timed rules of a session read the time and arm
// their timers: a job's firings (/after, /every), the foreground timeout
// and a detached session's expiry (Config.DetachedTTL). The real one is
// package time; tests give Config.clock one they move by hand, so that
// a rule about an hour is checked without waiting for it.
type clock interface {
	Now() time.Time
	// AfterFunc calls f on a goroutine of its own once d has passed, as
	// time.AfterFunc does, unless the timer it returns is stopped first:
	// the kind of timer a kind of work arms (work.Host's After).
	AfterFunc(d time.Duration, f func()) work.Timer
}

// realClock is package time.
type realClock struct{}

func (realClock) Now() time.Time                                 { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) work.Timer { return time.AfterFunc(d, f) }
