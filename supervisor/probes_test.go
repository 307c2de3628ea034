package supervisor

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shellagent/internal/sessiontest"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// Freeze ends the tries of ready probes in flight (work.Config's Probe, a
// service's exec: condition; here two) and returns only once nothing
// they started runs (a process of a session of its own included), through the
// real launcher and containment; a try asked for meanwhile does not
// start. Its thaw, as after an exec that failed, runs the ended tries again
// from their start and lets the waiting one run: each returns as it would
// have without the upgrade.
// Before, Freeze left the try running: its processes ran on into the
// new image.
func TestFreezeEndsTheProbesInFlight(t *testing.T) {
	h := newHarness(t, Config{})
	dir := t.TempDir()
	mark := "PROBEMARK=" + rand.Text()
	gate, starts := filepath.Join(dir, "gate"), filepath.Join(dir, "starts")
	line := "export " + mark + "; echo >> starts; setsid sleep 1000 </dev/null >/dev/null 2>&1 & while [ ! -e gate ]; do sleep 0.05; done"
	ctx, cancel := context.WithTimeout(context.Background(), testloop.Wait)
	defer cancel()
	first := make(chan error, 2) // two tries in flight at once
	for range 2 {
		go func() { first <- h.sup.probes.probe(ctx, line, dir, h.sup.env) }()
	}
	sessiontest.Poll(t, "the tries' processes", func() bool { return len(acptest.ProcessesWith(mark)) >= 4 })

	_, _, thaw, err := h.sup.Freeze(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if left := acptest.ProcessesWith(mark); len(left) > 0 {
		t.Errorf("after Freeze, processes %v of the try in flight still run", left)
	}
	second := make(chan error, 1)
	go func() { second <- h.sup.probes.probe(ctx, "echo >> starts", dir, h.sup.env) }()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-first:
		t.Fatalf("the try ended by Freeze returned %v before the thaw; want it tried again after it", err)
	default:
	}
	if b, _ := os.ReadFile(starts); strings.Count(string(b), "\n") != 2 {
		t.Errorf("before the thaw the tries started %d times, want twice: none during the freeze", strings.Count(string(b), "\n"))
	}
	thaw()
	for _, c := range []chan error{first, first, second} {
		select {
		case err := <-c:
			if err != nil {
				t.Errorf("a try after the thaw: %v, want it to exit 0", err)
			}
		case <-time.After(testloop.Wait):
			t.Fatal("a try did not return after the thaw")
		}
	}
	b, _ := os.ReadFile(starts)
	if n := strings.Count(string(b), "\n"); n != 5 {
		t.Errorf("the tries started %d times, want 5: the two ended by Freeze twice each, the one asked for during it once", n)
	}
	if left := acptest.ProcessesWith(mark); len(left) > 0 {
		t.Errorf("after the tries, processes %v still run", left)
	}
}
