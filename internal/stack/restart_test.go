package stack

import (
	"strings"
	"testing"
	"time"
)

// clock hands out run times: each run starts when the last restart's
// delay has passed and lasts as long as the test says.
type clock struct{ now time.Time }

func (c *clock) run(lasted time.Duration, exit Exit) Run {
	r := Run{Start: c.now, End: c.now.Add(lasted), Exit: exit}
	c.now = r.End
	return r
}

// runs plays a service whose every run lasts lasted and ends with exit,
// as the supervisor would, and returns how many times it ran and the
// decisions after each run (the last one is not a restart), stopping at
// limit runs.
func runs(p Policy, lasted time.Duration, exit Exit, limit int) (int, []Decision) {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	r := NewRestarter(p)
	var ds []Decision
	for n := 1; ; n++ {
		d := r.Next(c.run(lasted, exit))
		ds = append(ds, d)
		if !d.Restart || n == limit {
			return n, ds
		}
		c.now = c.now.Add(d.After)
	}
}

func TestRestarterCounts(t *testing.T) {
	t.Parallel()
	fail := Exit{Code: 1}
	for _, tc := range []struct {
		name   string
		policy Policy
		lasted time.Duration
		exit   Exit
		runs   int // 0: still restarting after 50 runs
		gaveUp bool
	}{
		{"max_restarts=2, quick failures: one run and two restarts", Policy{RestartOnFailure, 2, time.Second}, time.Second, fail, 3, true},
		{"max_restarts=5 by default", Policy{RestartOnFailure, DefaultMaxRestarts, time.Second}, 9 * time.Second, fail, 6, true},
		{"max_restarts=0 never restarts a quick failure", Policy{RestartAlways, 0, time.Second}, time.Second, fail, 1, true},
		{"a signal is a failure", Policy{RestartOnFailure, 2, 0}, 0, Exit{Signal: "SIGSEGV"}, 3, true},
		{"a run that could not start is a failure", Policy{RestartOnFailure, 2, 0}, 0, Exit{NotStarted: "fork: EAGAIN"}, 3, true},
		{"on-failure, a clean exit ends it", Policy{RestartOnFailure, 2, time.Second}, time.Second, Exit{}, 1, false},
		{"always, a clean exit restarts", Policy{RestartAlways, 2, time.Second}, time.Second, Exit{}, 3, true},
		{"no never restarts", Policy{RestartNo, 5, time.Second}, time.Second, fail, 1, false},
		{"runs of 10s are not quick", Policy{RestartOnFailure, 2, time.Second}, QuickRun, fail, 0, false},
	} {
		n, ds := runs(tc.policy, tc.lasted, tc.exit, 50)
		last := ds[len(ds)-1]
		if tc.runs == 0 {
			if n != 50 || !last.Restart {
				t.Errorf("%s: stopped after %d runs (%s), want it restarting still", tc.name, n, last.Reason)
			}
			continue
		}
		if n != tc.runs || last.Restart || last.GaveUp != tc.gaveUp {
			t.Errorf("%s: %d runs, last %+v; want %d runs, gave up %v", tc.name, n, last, tc.runs, tc.gaveUp)
		}
		for i, d := range ds[:len(ds)-1] {
			if d.Attempt != i+1 {
				t.Errorf("%s: restart %d has Attempt %d", tc.name, i+1, d.Attempt)
			}
		}
	}
}

// TestRestarterBackoff: the delay doubles from backoff to 30s; a long
// run resets it and the count, so that max_restarts quick failures may
// follow again.
func TestRestarterBackoff(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	r := NewRestarter(Policy{RestartAlways, 7, time.Second})
	quick := func() Decision {
		d := r.Next(c.run(time.Second, Exit{Code: 2}))
		c.now = c.now.Add(d.After)
		return d
	}
	var delays []time.Duration
	for range 7 {
		delays = append(delays, quick().After)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		if delays[i] != want[i]*time.Second {
			t.Fatalf("delays %v, want %v seconds", delays, want)
		}
	}
	if d := quick(); d.Restart || !d.GaveUp || !strings.Contains(d.Reason, "gave up after 7 restarts") {
		t.Fatalf("eighth quick failure: %+v, want to give up after 7", d)
	}

	// A fresh service: five quick failures, then a run of a minute, then
	// the count starts again from nothing.
	r = NewRestarter(Policy{RestartAlways, 5, time.Second})
	for range 5 {
		quick()
	}
	long := r.Next(c.run(time.Minute, Exit{Code: 1}))
	if !long.Restart || long.After != time.Second || long.Attempt != 0 {
		t.Fatalf("after a long run: %+v, want a restart in 1s (the backoff again), attempt 0", long)
	}
	c.now = c.now.Add(long.After)
	for i := 1; i <= 5; i++ {
		if d := quick(); !d.Restart || d.Attempt != i {
			t.Fatalf("quick failure %d after the long run: %+v, want restart %d", i, d, i)
		}
	}
	if d := quick(); !d.GaveUp {
		t.Fatalf("sixth quick failure after the long run: %+v, want to give up", d)
	}
	if r.Restarts() != 5+1+5 {
		t.Errorf("Restarts() = %d, want 11 (every restart, across the reset)", r.Restarts())
	}
}

func TestRestarterBackoffLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		backoff time.Duration
		want    []time.Duration
	}{
		{0, []time.Duration{0, 0, 0}},
		{20 * time.Second, []time.Duration{20 * time.Second, 30 * time.Second, 30 * time.Second}},
		{time.Minute, []time.Duration{time.Minute, time.Minute, time.Minute}},
		{1<<63 - 1, []time.Duration{1<<63 - 1, 1<<63 - 1, 1<<63 - 1}},
	} {
		_, ds := runs(Policy{RestartAlways, 10, tc.backoff}, time.Millisecond, Exit{}, 3)
		for i, w := range tc.want {
			if ds[i].After != w {
				t.Errorf("backoff %v: delay %d is %v, want %v", tc.backoff, i+1, ds[i].After, w)
			}
		}
	}
}

// TestRestarterResumes: a Restarter resumed from another's Counters (an
// upgrade in place) decides as the other would have: the same count of
// quick restarts, the same delay, the same total.
func TestRestarterResumes(t *testing.T) {
	t.Parallel()
	p := Policy{RestartOnFailure, 3, time.Second}
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	a := NewRestarter(p)
	for range 2 {
		a.Next(c.run(time.Second, Exit{Code: 1}))
	}
	b := ResumeRestarter(p, a.Counters())
	for i := range 3 {
		run := c.run(time.Second, Exit{Code: 1})
		da, db := a.Next(run), b.Next(run)
		if da != db {
			t.Fatalf("run %d after the resume: resumed %+v, original %+v", i+1, db, da)
		}
	}
	if b.Restarts() != 3 || !strings.Contains(b.Next(c.run(time.Second, Exit{Code: 1})).Reason, "gave up") {
		t.Errorf("resumed: %d restarts, want 3 and then to give up", b.Restarts())
	}
}

// TestExitText: how a run ended, as the reasons of a Decision say it.
func TestExitText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		exit   Exit
		want   string
		failed bool
	}{
		{Exit{}, "exit 0", false},
		{Exit{Code: 3}, "exit 3", true},
		{Exit{Signal: "SIGSEGV"}, "killed by SIGSEGV", true},
		{Exit{NotStarted: "its command could not start (chdir /gone: no such file or directory)"}, "its command could not start (chdir /gone: no such file or directory)", true},
	} {
		if got := tc.exit.String(); got != tc.want || tc.exit.Failed() != tc.failed {
			t.Errorf("%+v: %q, failed %v; want %q, failed %v", tc.exit, got, tc.exit.Failed(), tc.want, tc.failed)
		}
	}
	_, ds := runs(Policy{RestartAlways, 1, 0}, 0, Exit{NotStarted: "its command could not start (fork: EAGAIN)"}, 50)
	if got := ds[len(ds)-1].Reason; !strings.HasPrefix(got, "its command could not start (fork: EAGAIN); gave up after 1 restarts") {
		t.Errorf("the give-up says %q, want it to say the run could not start", got)
	}
}
