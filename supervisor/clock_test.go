package supervisor

import (
	"sync"
	"time"

	"shellagent/supervisor/work"
)

// fakeClock is a clock a test moves by hand (advance): a timer's call is
// made by advance, on the test's goroutine, once its time has come.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c  *fakeClock
	at time.Time
	f  func()
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) work.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// advance moves the clock d on and makes the calls of the timers whose
// time has come, earliest first.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
		} else {
			due = append(due, t)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// armed returns how many timers wait for their time.
func (c *fakeClock) armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// untilNext returns how long until the earliest armed timer is due.
func (c *fakeClock) untilNext() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := time.Duration(-1)
	for _, t := range c.timers {
		if d := t.at.Sub(c.now); next < 0 || d < next {
			next = d
		}
	}
	return next
}
