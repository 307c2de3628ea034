package backoff

import (
	"testing"
	"time"
)

// A run's waits double from First to Max, each try before its wait is
// not due, and a success ends the run and says how many failures it had.
func TestRun(t *testing.T) {
	var r Run
	now := time.Unix(0, 0)
	if !r.Due(now) || r.Failing() {
		t.Fatal("a run without failures is not due at once")
	}
	waits := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, want := range waits {
		if first := r.Failed(now); first != (i == 0) {
			t.Errorf("failure %d: first = %v", i+1, first)
		}
		if r.Due(now.Add(want - time.Millisecond)) {
			t.Errorf("failure %d: due before its wait %v", i+1, want)
		}
		if !r.Due(now.Add(want)) {
			t.Errorf("failure %d: not due after its wait %v", i+1, want)
		}
		now = now.Add(want)
	}
	if n := r.Worked(); n != len(waits) || r.Failing() || !r.Due(now) {
		t.Errorf("Worked = %d, Failing %v; want %d, a run ended", n, r.Failing(), len(waits))
	}
	if n := r.Worked(); n != 0 {
		t.Errorf("Worked without a run = %d, want 0", n)
	}
}
