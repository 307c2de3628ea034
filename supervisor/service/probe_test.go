package service

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"shellagent/protocol/acptest"
)

// TestExecProbeLeavesNothing: once a try of an exec: probe is over,
// whatever its outcome, nothing it started runs on. Before, only a try
// cut short by its timeout had its process group killed: the background
// "sleep 300" of a try that exited outlived the try, and the service,
// re-parented outside the service's containment.
func TestExecProbeLeavesNothing(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("needs /proc to find the probe's processes:", err)
	}
	t.Parallel()
	for i, tc := range []struct {
		name, line string
		answer     time.Duration // the try is cut short after 5*answer
		stop       time.Duration // the probe's context ends then, as when the service stops; 0: never
		ok         bool
	}{
		{"exits 0", "sleep 300 & exit 0", time.Second, 0, true},
		{"exits 3", "sleep 300 & exit 3", time.Second, 0, false},
		{"a subshell's child", "(sleep 300 &); exit 0", time.Second, 0, true},
		{"timed out", "sleep 300 & sleep 200", 100 * time.Millisecond, 0, false},
		{"stopped", "sleep 300 & sleep 200", time.Second, 200 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			marker := fmt.Sprintf("SHELLAGENT_PROBE_TEST=%d.%d.%d", os.Getpid(), time.Now().UnixNano(), i)
			t.Cleanup(func() { killMarked(marker) })
			ctx := context.Background()
			if tc.stop > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.stop)
				defer cancel()
			}
			probe := ExecProbe("/bin/sh", tc.line, t.TempDir(), append(os.Environ(), marker), tc.answer)
			if said, err := probe(ctx); (err == nil) != tc.ok {
				t.Errorf("probe: %q, %v; want ok %v", said, err, tc.ok)
			}
			if left := awaitUnmarked(marker, 10*time.Second); len(left) > 0 {
				t.Errorf("after the try, processes %v of the probe still run", left)
			}
		})
	}
}

// awaitUnmarked waits up to d for no process to hold entry, in three
// looks in a row 50ms apart (a process in the middle of an exec reads
// with no environment for a moment), and returns those that still do.
func awaitUnmarked(entry string, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for none := 0; ; time.Sleep(50 * time.Millisecond) {
		left := acptest.ProcessesWith(entry)
		if none = none + 1; len(left) > 0 {
			none = 0
		}
		if none == 3 || time.Now().After(deadline) {
			return left
		}
	}
}

// killMarked kills what a failed test left.
func killMarked(entry string) {
	for _, pid := range acptest.ProcessesWith(entry) {
		syscall.Kill(pid, syscall.SIGKILL) // Best effort: it may have gone.
	}
}
