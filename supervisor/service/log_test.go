package service

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"shellagent/internal/stack"
	"shellagent/outputbuf"
)

// Each run's output goes to the log, one run after the other, and what
// waits for the last copier runs once the log holds what it printed last.
func TestLogKeepsEveryRun(t *testing.T) {
	l := Log{Logger: slog.New(slog.DiscardHandler), Dir: t.TempDir(), Project: t.TempDir(), Name: "web"}
	for _, out := range []string{"first\n", "second\n"} {
		ring := outputbuf.New(1 << 10)
		l.Run(ring, 0, true)
		ring.Write([]byte(out)) // Safe: a ring takes every write.
		l.Ended()
	}
	entered := make(chan func(), 1)
	done := make(chan struct{})
	l.After(func(f func()) { entered <- f }, func() { close(done) })
	select {
	case f := <-entered: // the copier was not done yet: f enters as the actor would
		if !l.Draining() {
			t.Error("not draining while a stop waits for the copier")
		}
		f()
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("After never called back")
	}
	<-done
	if l.Draining() {
		t.Error("still draining once the copier is done")
	}
	path, err := stack.LogPath(l.Dir, l.Project, l.Name)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "first\nsecond\n" {
		t.Errorf("log = %q, %v; want both runs' output in order", b, err)
	}
}

// The zero Log keeps nothing, and what waits for it runs at once.
func TestLogKeepsNothing(t *testing.T) {
	var l Log
	l.Run(outputbuf.New(16), 0, true)
	l.Ended()
	ran := false
	l.After(func(func()) { t.Error("After went through do with no copier") }, func() { ran = true })
	if !ran || l.Draining() {
		t.Errorf("After with no copier: ran %v, draining %v", ran, l.Draining())
	}
}
