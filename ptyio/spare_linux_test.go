package ptyio

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// Commands launched through a Spare get a PTY of the size they ask for,
// whether it was opened ahead at another size or not; the next spare is
// opened after each launch; Close closes both ends of the one held (the
// goroutines are containtest.Main's to check).
func TestSpare(t *testing.T) {
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
	ptys.mu.Lock()
	master, tty := ptys.master, ptys.tty
	ptys.mu.Unlock()
	if err := ptys.Close(); err != nil {
		t.Fatal(err)
	}
	// A count of this process's descriptors would race with what earlier
	// tests' commands close as they end.
	for _, f := range []*os.File{master, tty} {
		if err := f.Close(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s left open by Close (closing it again: %v)", f.Name(), err)
		}
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

// The next launch's spare is opened Local.prepareAfter after a launch's fork
// (prepare.go), not while the shell starts, nor at its first output.
func TestSpareIsOpenedOnceTheShellHasStarted(t *testing.T) {
	size := Size{Cols: 80, Rows: 24}
	ptys := NewSpare(size)
	defer ptys.Close()
	l := Local{Containment: launcher.Containment, PTYs: ptys, prepareAfter: time.Hour}
	waitHeld(t, ptys)
	_, rec := launchWith(t, l, "echo started", size)
	rec.wait(t)
	ptys.mu.Lock()
	held := ptys.master != nil || ptys.filling
	ptys.mu.Unlock()
	if held {
		t.Fatalf("a spare was opened before prepareAfter (output %q)", rec.output())
	}
	l.prepareAfter = time.Millisecond
	_, rec = launchWith(t, l, "echo next", size) // none held: it opens its own
	rec.wait(t)
	waitHeld(t, ptys)
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
