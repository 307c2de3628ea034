package service

import (
	"log/slog"

	"shellagent/internal/stack"
	"shellagent/outputbuf"
)

// CopyLog copies what ring holds from offset off on to the service log
// at path (capped at limit, stack.OpenLogCapped), following the ring
// without holding it: a run that prints faster than the disk takes loses
// what the ring overwrites, never waits. It begins once prev is closed
// (the copier of the run before, nil for none), drains what the run
// printed last once end is closed (the run exited), and closes done when
// it is through. It runs on the goroutine that calls it, a goroutine of
// the log's own, and enters nothing of the session; log hears what fails.
func CopyLog(log *slog.Logger, path string, limit int64, ring *outputbuf.Ring, off int64, end, prev <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if prev != nil {
		<-prev
	}
	lg, err := stack.OpenLogCapped(path, limit)
	if err != nil {
		log.Warn("service log", "path", path, "err", err)
		return
	}
	defer lg.Close() // Best effort: every write was checked.
	kick := make(chan struct{}, 1)
	f := ring.Follow(func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	defer f.Stop()
	buf := make([]byte, 32<<10)
	drain := func() bool {
		for {
			n, start := ring.ReadAt(buf, off)
			if n == 0 {
				return true
			}
			off = start + int64(n)
			if _, err := lg.Write(buf[:n]); err != nil {
				log.Warn("service log", "path", path, "err", err)
				return false
			}
		}
	}
	if !drain() { // what it printed before the follow began
		return
	}
	for {
		select {
		case <-kick:
			if !drain() {
				return
			}
		case <-end:
			drain()
			return
		}
	}
}
