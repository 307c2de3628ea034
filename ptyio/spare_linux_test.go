package ptyio

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// Commands launched through a Spare get a PTY of the size they ask for,
// whether it was opened ahead at another size or not; the next spare is
// opened after each launch; Close closes the one held and leaves no
// descriptor or goroutine behind.
func TestSpare(t *testing.T) {
	fds := openFDs(t)
	ptys := NewSpare(Size{Cols: 80, Rows: 24})
	l := Local{Containment: launcher.Containment, PTYs: ptys}
	for _, size := range []Size{{Cols: 80, Rows: 24}, {Cols: 120, Rows: 40}, {Cols: 80, Rows: 24}} {
		spare := waitHeld(t, ptys)
		_, rec := launchWith(t, l, "stty size", size)
		ptys.mu.Lock()
		taken := ptys.master != spare
		ptys.mu.Unlock()
		if !taken {
			t.Errorf("the launch in a PTY of %+v did not take the spare", size)
		}
		rec.wait(t)
		if got, want := strings.TrimSpace(rec.output()), fmt.Sprintf("%d %d", size.Rows, size.Cols); got != want {
			t.Errorf("stty size in a PTY of %+v: %q, want %q", size, got, want)
		}
	}
	waitHeld(t, ptys)
	if err := ptys.Close(); err != nil {
		t.Fatal(err)
	}
	if after := openFDs(t); after != fds {
		t.Errorf("%d descriptors open after Close, %d before NewSpare", after, fds)
	}
	// After Close, a launch opens its own PTY, and no spare after it.
	_, rec := launchWith(t, l, "echo after", Size{Cols: 80, Rows: 24})
	rec.wait(t)
	if got := strings.TrimSpace(rec.output()); got != "after" {
		t.Errorf("after Close: %q", got)
	}
	ptys.mu.Lock()
	held := ptys.master != nil || ptys.filling
	ptys.mu.Unlock()
	if held {
		t.Error("a spare opened after Close")
	}
}

// waitHeld waits until the Spare holds a PTY pair, and returns its master.
func waitHeld(t *testing.T, s *Spare) *os.File {
	t.Helper()
	for deadline := time.Now().Add(testloop.Wait); ; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		master := s.master
		s.mu.Unlock()
		if master != nil {
			return master
		}
		if time.Now().After(deadline) {
			t.Fatal("no spare PTY opened")
		}
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// launchWith launches line with l in a PTY of size.
func launchWith(t *testing.T, l Local, line string, size Size) (Process, *recorder) {
	t.Helper()
	rec := newRecorder()
	p, err := l.Launch(Command{Shell: "/bin/sh", Line: line, Dir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH"), marker}, Size: size}, rec, rec)
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}
