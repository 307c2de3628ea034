package contain

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The ending's rule, look by look: what counts as left is what a look
// that began after the deadline still finds from the look before it,
// live and not on its way out; past a second timeout, whatever is found.
func TestEnding(t *testing.T) {
	const timeout = 2 * time.Second
	a, b := proc{pid: 10, start: 1}, proc{pid: 11, start: 1}
	doomed := a
	doomed.sigPending = 1 << (unix.SIGKILL - 1)
	exiting := a
	exiting.exiting = true
	reused := proc{pid: 10, start: 2} // a's pid, another process
	type look struct {
		at    time.Duration // when the look began, from the start
		found []proc
		left  int
	}
	tests := []struct {
		name  string
		looks []look
	}{
		{"found before the deadline", []look{{0, []proc{a}, 0}, {time.Second, []proc{a}, 0}}},
		{"a look that took the whole timeout killed it a moment ago", []look{{0, []proc{a}, 0}, {timeout + time.Millisecond, []proc{doomed}, 0}}},
		{"the first look began late", []look{{timeout, []proc{a}, 0}}},
		{"found again, live and not doomed", []look{{time.Second, []proc{a, b}, 0}, {timeout, []proc{a, b}, 2}}},
		{"doomed: on its way out", []look{{time.Second, []proc{a}, 0}, {timeout, []proc{doomed}, 0}}},
		{"exiting: on its way out", []look{{time.Second, []proc{a}, 0}, {timeout, []proc{exiting}, 0}}},
		{"new since the look before", []look{{time.Second, []proc{a}, 0}, {timeout, []proc{b, reused}, 0}}},
		{"past the second timeout", []look{{time.Second, []proc{a}, 0}, {2 * timeout, []proc{doomed, b}, 2}}},
	}
	for _, tt := range tests {
		e := newEnding(timeout, nil)
		start := e.deadline.Add(-timeout)
		for i, l := range tt.looks {
			if got := e.left(start.Add(l.at), l.found); len(got) != l.left {
				t.Errorf("%s: look %d at %v: %d left, want %d", tt.name, i, l.at, len(got), l.left)
			}
		}
	}
}

// An ending counts each process its looks found once, however many looks
// found it; a pid reused by another process counts again.
func TestEndingCount(t *testing.T) {
	a, b := proc{pid: 10, start: 1}, proc{pid: 11, start: 1}
	reused := proc{pid: 10, start: 2}
	e := newEnding(time.Hour, nil)
	start := e.start
	for i, found := range [][]proc{{a}, {a, b}, {b, reused}, nil} {
		e.left(start.Add(time.Duration(i)*time.Millisecond), found)
	}
	if got := e.count(); got != 3 {
		t.Errorf("count after looks finding a; a, b; b, a's pid reused; nothing = %d, want 3", got)
	}
}

// An ending gives up at once on a look that finds only processes an
// earlier ending of the same containment gave up on with their SIGKILL
// pending, still pending; anything else found waits as before.
func TestEndingGivesUpAtOnceOnWhatItGaveUpBefore(t *testing.T) {
	const timeout = 2 * time.Second
	a, b := proc{pid: 10, start: 1}, proc{pid: 11, start: 1}
	doomed := a
	doomed.sigPending = 1 << (unix.SIGKILL - 1)
	past := &givenUp{}
	first := newEnding(timeout, past)
	if got := first.left(first.start.Add(2*timeout), []proc{doomed}); len(got) != 1 {
		t.Fatalf("past the second timeout: %d left, want 1", len(got))
	}
	tests := []struct {
		name  string
		found []proc
		left  int
	}{
		{"only what was given up on, still doomed", []proc{doomed}, 1},
		{"and another", []proc{doomed, b}, 0},
		{"the same process, its SIGKILL no longer pending", []proc{a}, 0},
		{"nothing", nil, 0},
	}
	for _, tt := range tests {
		e := newEnding(timeout, past)
		if got := e.left(e.start, tt.found); len(got) != tt.left {
			t.Errorf("%s: %d left at the first look, want %d", tt.name, len(got), tt.left)
		}
	}
	if e := newEnding(timeout, nil); len(e.left(e.start, []proc{doomed})) != 0 {
		t.Error("an ending without a past gave up at its first look")
	}
}
