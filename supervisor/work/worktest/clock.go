package worktest

import (
	"time"

	"shellagent/supervisor/work"
)

// Start is where a new Host's clock stands.
var Start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// A Clock is a session's clock that moves only when the test moves it.
// Its timers are called by Advance or by Timer.Fire, on the test's
// goroutine, which stands for the session's actor: never on a goroutine
// of their own. Its zero value stands at the zero time.
type Clock struct {
	now time.Time
	// Timers are those of every After, in the order they were armed,
	// fired and stopped ones too.
	Timers []*Timer
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { return c.now }

// Set sets the clock to t, firing nothing: a test's starting point.
func (c *Clock) Set(t time.Time) { c.now = t }

// After arms a timer that calls f once d has passed on the clock, unless
// it is stopped first (work.Host's After).
func (c *Clock) After(d time.Duration, f func()) *Timer {
	t := &Timer{D: d, At: c.now.Add(d), f: f}
	c.Timers = append(c.Timers, t)
	return t
}

// Advance moves the clock d forward and calls every timer due by then,
// the earliest first (in the order they were armed when due at once),
// with the clock at its due time while it runs; a timer armed meanwhile
// is called too if it is due by then. The clock ends d after where it
// stood.
func (c *Clock) Advance(d time.Duration) {
	end := c.now.Add(d)
	for {
		var next *Timer
		for _, t := range c.Timers {
			if t.pending() && !t.At.After(end) && (next == nil || t.At.Before(next.At)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		c.now = next.At
		next.Fire()
	}
	c.now = end
}

// A Timer is an armed Clock.After (a work.Timer).
type Timer struct {
	D  time.Duration // as After was given it
	At time.Time     // when it is due
	// Stopped: Stop prevented its call. Fired: it was called.
	Stopped, Fired bool
	f              func()
}

var _ work.Timer = (*Timer)(nil)

func (t *Timer) pending() bool { return !t.Stopped && !t.Fired }

// Stop prevents the call if it has not begun, and reports whether it
// did.
func (t *Timer) Stop() bool {
	if !t.pending() {
		return false
	}
	t.Stopped = true
	return true
}

// Fire calls the timer's function now, as if it were due, without moving
// the clock; a timer that was stopped or called already is not called.
func (t *Timer) Fire() {
	if t.pending() {
		t.Fired = true
		t.f()
	}
}
