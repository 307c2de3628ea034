package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"shellagent/internal/testloop"
)

// A build with -tags tracefile writes an execution trace of the agent to
// $SHELLAGENT_TRACE.PID, complete once the agent has ended (with
// SHELLAGENT_LONG=1, go tool trace parses it); the build users run writes
// none.
func TestTraceFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "shellagent-trace")
	if err := goBuild(exe, "-tags", "tracefile"); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(dir, "agent.trace")
	for _, bin := range []string{exe, plainBinary} {
		// An agent whose stdin ends at once: it serves, then shuts down.
		cmd := exec.Command(bin, "--shell", "/bin/sh")
		cmd.Env = append(os.Environ(), "SHELLAGENT_TRACE="+prefix)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", filepath.Base(bin), err, out)
		}
		name := fmt.Sprintf("%s.%d", prefix, cmd.Process.Pid)
		_, err := os.Stat(name)
		if bin == plainBinary {
			if !os.IsNotExist(err) {
				t.Errorf("the build without the tag: stat %s: %v, want no such file", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		// The trace's string table, which names main.main, is written
		// when the trace stops: a file the agent did not finish lacks it.
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b, []byte("main.main")) {
			t.Errorf("%s (%d bytes): want a trace's header and, as a finished trace has, main.main", name, len(b))
		}
		if !testloop.Enabled() {
			continue // go tool trace is built on first use: 35 s on a cold cache
		}
		out, err := exec.Command("go", "tool", "trace", "-d=parsed", name).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "main.main") {
			t.Errorf("go tool trace -d=parsed %s: %v; want a whole trace that shows main.main:\n%.2000s", name, err, out)
		}
	}
}
