package service

import (
	"log/slog"
	"time"

	"shellagent/internal/backoff"
	"shellagent/internal/stack"
	"shellagent/outputbuf"
)

// A Log is a service's runs as its log keeps them, one run after the
// other (stack.LogPath, capped at a limit), and the end of each run that
// its copier waits for. The copier of each run, a goroutine of its own,
// follows the run's ring and enters nothing of the session. Log's methods
// run on the session's actor; the zero Log keeps nothing, but still marks
// each run's end.
type Log struct {
	// Logger hears what fails; Dir is the state directory, "" for no log;
	// Project and Name the stack's directory and the service's name, of
	// which its path is made; Limit its cap (0: stack.MaxLogSize).
	Logger        *slog.Logger
	Dir           string
	Project, Name string
	Limit         int64

	end      chan struct{} // closed when the current run exits: its copier drains
	done     chan struct{} // closed when the last run's copier is done
	draining int           // what waits for a copier (After)
}

// Run begins a run whose output is ring: with keep, its output from
// offset from on is copied to the log, once the copier of the run before
// is done.
func (l *Log) Run(ring *outputbuf.Ring, from int64, keep bool) {
	l.end = make(chan struct{})
	if !keep || l.Dir == "" {
		return
	}
	path, err := stack.LogPath(l.Dir, l.Project, l.Name)
	if err != nil {
		l.Logger.Warn("service log", "service", l.Name, "err", err)
		return
	}
	prev, done := l.done, make(chan struct{})
	l.done = done
	go copyLog(l.Logger, path, l.Limit, ring, from, l.end, prev, done)
}

// Ended marks the end of the run that Run began: its copier writes what
// it printed last, and is done.
func (l *Log) Ended() { close(l.end) }

// After calls f once the copier of the run that ended is done: at once
// if it is (or there was none), else through do, which must run f on the
// session's actor in an entry of its own (work.Host.Do). Until then the
// Log is Draining.
func (l *Log) After(do func(func()), f func()) {
	done := l.done
	if done == nil {
		f()
		return
	}
	select {
	case <-done:
		f()
		return
	default:
	}
	l.draining++
	go func() {
		<-done
		do(func() {
			l.draining--
			f()
		})
	}()
}

// Draining reports whether something waits for a copier (After): a stop
// that an upgrade in place waits for.
func (l *Log) Draining() bool { return l.draining > 0 }

// copyLog copies what ring holds from offset off on to the log at path,
// following the ring without holding it: a run that prints faster than
// the disk takes loses what the ring overwrites, never waits. It begins
// once prev is closed (the copier of the run before, nil for none),
// drains what the run printed last once end is closed, and closes done
// when it is through. A log it cannot open or write (a full disk) drops
// the output meanwhile and is tried again (logWriter), so that the log
// goes on once the disk has room.
func copyLog(log *slog.Logger, path string, limit int64, ring *outputbuf.Ring, off int64, end, prev <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if prev != nil {
		<-prev
	}
	lw := logWriter{log: log, path: path, limit: limit}
	defer lw.close()
	kick := make(chan struct{}, 1)
	f := ring.Follow(func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	defer f.Stop()
	buf, cur := make([]byte, 32<<10), outputbuf.CursorAt(off)
	drain := func() {
		for {
			n, _ := cur.Next(ring, buf) // what the ring lost is not in the log
			if n == 0 {
				return
			}
			lw.write(buf[:n])
		}
	}
	lw.write(nil) // the log exists from the run's start
	drain()       // what it printed before the follow began
	for {
		select {
		case <-kick:
			drain()
		case <-end:
			drain()
			return
		}
	}
}

// A logWriter is a copier's log file: after a failure to open or write it
// (a full disk; the file is closed then), what comes is dropped until the
// next try, which opens it again, on package backoff's schedule. A run of
// failures is logged once as it starts, and once when the log works
// again with the bytes it dropped.
type logWriter struct {
	log   *slog.Logger
	path  string
	limit int64

	lg    *stack.Log // nil before the first write and after a failure
	tries backoff.Run
	lost  int64 // bytes dropped in the run of failures
}

func (w *logWriter) write(p []byte) {
	if w.lg == nil {
		if !w.tries.Due(time.Now()) {
			w.lost += int64(len(p))
			return
		}
		lg, err := stack.OpenLogCapped(w.path, w.limit)
		if err != nil {
			w.fail(err, len(p))
			return
		}
		w.lg = lg
	}
	n, err := w.lg.Write(p)
	if err != nil { // the Log is closed
		w.lg = nil
		w.fail(err, len(p)-n)
		return
	}
	if n := w.tries.Worked(); n > 0 {
		w.log.Info("service log works again", "path", w.path, "failures", n, "lost_bytes", w.lost)
		w.lost = 0
	}
}

// fail notes a failure that dropped lost bytes.
func (w *logWriter) fail(err error, lost int) {
	w.lost += int64(lost)
	if w.tries.Failed(time.Now()) {
		w.log.Warn("service log: output is not logged until it can be written again (tried after 1 s, then less often, at most each 30 s)", "path", w.path, "err", err)
	}
}

func (w *logWriter) close() {
	if w.lg != nil {
		w.lg.Close() // Best effort: every write was checked.
	}
}
