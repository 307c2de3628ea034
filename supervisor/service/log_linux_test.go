package service

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"shellagent/internal/backoff"
	"shellagent/internal/stack"
	"shellagent/internal/testloop"
	"shellagent/outputbuf"
)

// A service's log that cannot be written (a full disk: here the log is
// /dev/full, whose writes fail with ENOSPC) drops the run's output
// meanwhile, and goes on once it can be written again, for the same run.
// Before, the copier of the run gave up at the first failure: the log
// held nothing more of a long-running service until its next run.
func TestLogGoesOnAfterAFullDisk(t *testing.T) {
	var lc logLines
	l := Log{Logger: slog.New(slog.NewTextHandler(&lc, nil)), Dir: t.TempDir(), Project: t.TempDir(), Name: "web"}
	path, err := stack.LogPath(l.Dir, l.Project, l.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/full", path); err != nil {
		t.Fatal(err)
	}
	ring := outputbuf.New(1 << 10)
	l.Run(ring, 0, true)
	ring.Write([]byte("lost\n"))
	waitUntil(t, "the failure to be logged", func() bool { return strings.Contains(lc.String(), "level=WARN") })
	if err := os.Remove(path); err != nil { // the disk has room again
		t.Fatal(err)
	}
	// A line each 50 ms, as a service prints, until the log has one.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(testloop.Bound(2 * backoff.First))
	for i := 0; ; i++ {
		ring.Write(fmt.Appendf(nil, "line %d\n", i))
		if b, _ := os.ReadFile(path); strings.Contains(string(b), "line") {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the log holds no line %v after the disk had room again:\n%s", testloop.Bound(2*backoff.First), lc.String())
		}
	}
	l.Ended()
	done := make(chan struct{})
	l.After(func(f func()) { f() }, func() { close(done) })
	<-done
	if n := strings.Count(lc.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, lc.String())
	}
	if !strings.Contains(lc.String(), "service log works again") {
		t.Errorf("no line saying the log works again:\n%s", lc.String())
	}
}

// logLines is a log handler's output, safe for the copier's goroutine.
type logLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitUntil waits for cond, at most testloop.Bound(2 s).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testloop.Bound(2 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
