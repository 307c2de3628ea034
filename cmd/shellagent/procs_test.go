package main

import (
	"os"
	"runtime"
	"testing"
)

func TestShareCPUs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		env        string
		before     int
		wantAfter  int
		wantReason string
	}{
		{"", 1, 1, "at least one"},
		{"", 2, 1, "half of two"},
		{"", 8, 4, "half of eight"},
		{"", 7, 3, "half of seven, rounded down"},
		{"2", 2, 2, "$GOMAXPROCS is kept"},
	} {
		t.Setenv("GOMAXPROCS", tc.env)
		runtime.GOMAXPROCS(tc.before)
		shareCPUs()
		if got := runtime.GOMAXPROCS(0); got != tc.wantAfter {
			t.Errorf("GOMAXPROCS=%q, %d before: %d after, want %d (%s)", tc.env, tc.before, got, tc.wantAfter, tc.wantReason)
		}
	}
}

// startProcs is the test binary's GOMAXPROCS before any test changed it:
// the default, or $GOMAXPROCS, as the binary it runs starts with.
var startProcs = runtime.GOMAXPROCS(0)

// sharedProcs is how many processors a shellagent started by the tests
// runs Go code on (shareCPUs).
func sharedProcs() int {
	if os.Getenv("GOMAXPROCS") != "" {
		return startProcs
	}
	return max(1, startProcs/2)
}
