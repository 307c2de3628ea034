package ptyio

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// TestProbeLeavesNothing: once a probe is over, whatever its outcome,
// nothing it started runs on, however it detached. Before probes ran in
// the containment (when a service's exec: ready condition ran through
// os/exec, in a process group of its own), a process that left that
// group ran on after the try, the service and the agent: setsid, a
// daemon's double fork.
func TestProbeLeavesNothing(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name, line string
		stop       time.Duration // ctx ends then; 0: never
		status     int           // the ProbeExit's exit status; 0: none
		signal     syscall.Signal
		output     string // the ProbeExit's Output
	}{
		{name: "exits 0", line: "sleep 300 & exit 0"},
		{name: "exits 3", line: "echo out; sleep 300 & echo err >&2; exit 3", status: 3, output: "out\nerr\n"},
		{name: "prints much", line: "yes | head -c 100000; echo; echo last; exit 4", status: 4, output: "y\ny\n\nlast\n"},
		{name: "a subshell's child", line: "(sleep 300 &); exit 0"},
		{name: "setsid", line: "setsid sleep 300 & exit 0"},
		{name: "a daemon's double fork", line: "(setsid sh -c 'sleep 300 & exit 0' &); sleep 0.1; exit 0"},
		{name: "killed", line: "sleep 300 & kill -9 $$", signal: syscall.SIGKILL},
		{name: "cut short", line: "setsid sleep 300 & sleep 200", stop: 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mark := fmt.Sprintf("SHELLAGENT_PROBE_TEST=%d.%d.%d", os.Getpid(), time.Now().UnixNano(), i)
			t.Cleanup(func() { killMarked(mark) })
			ctx := context.Background()
			if tc.stop > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.stop)
				defer cancel()
			}
			start := time.Now()
			err := launcher.Probe(ctx, Command{Shell: "/bin/sh", Line: tc.line, Dir: t.TempDir(), Env: append(os.Environ(), marker, mark)})
			var exit *ProbeExit
			switch {
			case tc.stop > 0:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("probe cut short: %v, want the context's deadline", err)
				}
				if took, bound := time.Since(start), testloop.Bound(5*time.Second); took > bound {
					t.Errorf("probe cut short after %s took %s (bound %s)", tc.stop, took, bound)
				}
			case tc.status == 0 && tc.signal == 0:
				if err != nil {
					t.Errorf("probe: %v, want nil", err)
				}
			case !errors.As(err, &exit):
				t.Errorf("probe: %v, want a ProbeExit", err)
			case tc.signal != 0 && (!exit.Status.Signaled() || exit.Status.Signal() != tc.signal):
				t.Errorf("probe: %v, want killed by %v", err, tc.signal)
			case tc.status != 0 && (!exit.Status.Exited() || exit.Status.ExitStatus() != tc.status):
				t.Errorf("probe: %v, want exit status %d", err, tc.status)
			case len(exit.Output) > 4<<10 || !strings.HasSuffix(string(exit.Output), tc.output):
				t.Errorf("probe printed %d bytes ending %q, want at most 4 KiB ending %q", len(exit.Output), exit.Output[max(0, len(exit.Output)-20):], tc.output)
			}
			if left := awaitUnmarked(mark, testloop.Bound(10*time.Second)); len(left) > 0 {
				t.Errorf("after the probe, processes %v of it still run", left)
			}
		})
	}
}

// TestProbeCannotStart: a probe whose directory is gone fails as a
// launch does, naming the step, and starts nothing.
func TestProbeCannotStart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "gone")
	err := launcher.Probe(context.Background(), Command{Shell: "/bin/sh", Line: "true", Dir: dir, Env: append(os.Environ(), marker)})
	var se *StartError
	var pe *fs.PathError
	if !errors.As(err, &se) || !errors.As(err, &pe) || pe.Op != "chdir" {
		t.Errorf("probe in a missing directory: %v, want a StartError of chdir", err)
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
