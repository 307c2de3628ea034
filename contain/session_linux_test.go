package contain

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/internal/testloop"
)

// readPid waits for a pid written to file.
func readPid(t *testing.T, file string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(file)
		if pid, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil && strings.HasSuffix(string(b), "\n") {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", file)
		}
	}
}

// killStray kills a process that no containment holds, and waits until
// it is gone (init reaps it).
func killStray(t *testing.T, pid int) {
	t.Helper()
	unix.Kill(pid, unix.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); running(pid) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// waitWatching waits until g's watch waits for a member's exit: it looks
// again only once that member has exited.
func waitWatching(t *testing.T, g *markerGroup) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		g.mu.Lock()
		waiting := g.waiting != nil
		g.mu.Unlock()
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the group's watch never waits")
		}
	}
}

// What Session mode holds and what escapes it (docs/containment.md, "The modes,
// and what escapes each"): nothing is re-parented to the agent, so a process that
// leaves the terminal's session is held by its marker, or by a look that
// saw it while its parent (a member) lived; one that leaves the session,
// drops the marker and whose parent exits before any look is not held,
// and outlives the containment.
func TestSessionMode(t *testing.T) {
	c := openSessionMode(t)
	dir := t.TempDir()

	t.Run("setsid keeping the marker, parent gone", func(t *testing.T) {
		file := filepath.Join(dir, "marked")
		s := start(t, c, "(setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! >"+file+"); exit 0")
		s.reap(t)
		pid := readPid(t, file)
		if m := waitMembers(t, s.g, 1, "sleep 300"); len(m) != 1 || m[0].Pid != pid {
			t.Errorf("members %v, want the setsid'd sleep %d", m, pid)
		}
		if reached, err := s.g.Signal(unix.SIGTERM); !reached || err != nil {
			t.Errorf("Signal = %v, %v", reached, err)
		}
		waitDone(t, s.g)
		s.g.Close()
	})

	t.Run("setsid env -i, seen while its parent lived", func(t *testing.T) {
		file, gate := filepath.Join(dir, "seen"), filepath.Join(dir, "seen.go")
		s := start(t, c, "setsid env -i /bin/sleep 300 </dev/null >/dev/null 2>&1 & echo $! >"+file+
			"; while [ ! -e "+gate+" ]; do sleep 0.01; done; exit 0")
		pid := readPid(t, file)
		waitMembers(t, s.g, 1, "sleep 300") // a look, while the shell lives
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		s.reap(t)
		time.Sleep(100 * time.Millisecond)
		if s.g.Empty() {
			t.Fatal("group empty while the recorded sleep runs")
		}
		m, err := s.g.Members()
		if err != nil || len(m) != 1 || m[0].Pid != pid {
			t.Errorf("members %v (%v), want the recorded sleep %d", m, err, pid)
		}
		if reached, err := s.g.Signal(unix.SIGTERM); !reached || err != nil {
			t.Errorf("Signal = %v, %v", reached, err)
		}
		waitDone(t, s.g)
		s.g.Close()
	})

	t.Run("setsid env -i, parent gone before any look", func(t *testing.T) {
		file, gate := filepath.Join(dir, "escaped"), filepath.Join(dir, "escaped.go")
		// The group's watch looks when the shell starts and once it has
		// exited: the escape comes between, from a subshell gone before
		// the shell, once the escapee has left the session (it runs
		// sleep; before, a look finds it in the session and holds it).
		s := start(t, c, "while [ ! -e "+gate+" ]; do sleep 0.01; done; (setsid env -i /bin/sleep 300 </dev/null >/dev/null 2>&1 & "+
			"while read -r comm </proc/$!/comm && [ \"$comm\" != sleep ]; do :; done; echo $! >"+file+"); exit 0")
		waitWatching(t, s.g.(*markerGroup)) // the first look is over
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		s.reap(t)
		pid := readPid(t, file)
		t.Cleanup(func() { killStray(t, pid) })
		waitDone(t, s.g)
		if !running(pid) {
			t.Fatalf("the escaped sleep %d is not running", pid)
		}
		s.g.Close()
		if err := c.KillAll(); err != nil {
			t.Error(err)
		}
		if !running(pid) {
			t.Errorf("the escaped sleep %d was killed: docs/containment.md says Session mode cannot find it", pid)
		}
	})
}

// A short command's end costs one scan of every process, not two: Empty,
// called once the shell has exited and before it is reaped, takes the
// scan of the watch's last look, which read the shell ended.
func TestEmptyTakesTheWatchsLastScan(t *testing.T) {
	c := openSessionMode(t)
	s := start(t, c, "exit 0")
	waitDone(t, s.g) // the watch's look read the shell ended
	scans := &s.g.(*markerGroup).m.scans
	before := scansMade(scans)
	if !s.g.Empty() {
		t.Error("Empty = false after the group ended")
	}
	if n := scansMade(scans) - before; n != 0 {
		t.Errorf("Empty made %d scans of its own, want none", n)
	}
	s.reap(t)
	s.g.Close()
}

// Once the members it waited for have ended, the watch takes a scan that
// read them ended, made after their end by another look, rather than
// make its own: here a scan the test makes while the watch's next look
// waits for the scanner.
func TestWatchTakesALateScan(t *testing.T) {
	c := openSessionMode(t)
	s := start(t, c, "exec sleep 30")
	g := s.g.(*markerGroup)
	for deadline := time.Now().Add(testloop.Wait); ; time.Sleep(time.Millisecond) {
		g.mu.Lock()
		waiting := g.waiting != nil // its first look done, it waits for the shell
		g.mu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch never waited for the shell")
		}
	}
	scans := &g.m.scans
	scans.mu.Lock() // the watch's look after the exit waits for this
	err := unix.Kill(s.pid, unix.SIGKILL)
	var procs []proc
	if err == nil && !becomesZombie(s.pid) { // not reaped until s.reap
		err = errors.New("the shell did not become a zombie")
	}
	if err == nil {
		procs, err = scanProcs()
	}
	scans.started++
	scans.last, scans.err, scans.finished = procs, err, scans.started
	made := scans.started
	scans.mu.Unlock() // before any Fatal: the watch must not wait forever
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, s.g)
	if n := scansMade(scans) - made; n != 0 {
		t.Errorf("the watch made %d scans of its own after its member ended, want none", n)
	}
	s.reap(t)
	s.g.Close()
}

// openSessionMode opens a Session mode containment, closed when the test ends,
// or skips the test in a run of another mode.
func openSessionMode(t *testing.T) *Containment {
	t.Helper()
	if m := os.Getenv("SHELLAGENT_TEST_CONTAINMENT"); m != "" && m != string(Session) && m != string(Auto) {
		t.Skipf("Session mode's own rules; the run is in %s mode", m)
	}
	return openMode(t, Session)
}
