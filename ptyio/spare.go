package ptyio

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/creack/pty"
)

// A Spare keeps one PTY pair open ahead of the next launch, so that the
// kernel's allocation of a PTY and its line discipline (OpenPTY: about a
// third of a millisecond, bench/HISTORY.md round 5) is off the spawn's
// path, as contain's spare cgroup is. A Launch takes the pair and, once
// its shell has started (prepare.go), has the next one opened on a
// goroutine of its own (refill). A take that finds none opens one as
// OpenPTY does. It is safe for concurrent use. Its owner closes it
// (Close) once no Launch can run any more: the spare held is closed, and
// a refill under way is waited for.
type Spare struct {
	size Size // the size the spares are opened at

	mu      sync.Mutex // guards the fields below
	master  *os.File   // nil: none held
	tty     *os.File
	filling bool // a refill is under way
	closed  bool
	filled  sync.WaitGroup // the refill under way
}

// NewSpare returns a Spare that opens its pairs at size, and opens the
// first one on a goroutine of its own.
func NewSpare(size Size) *Spare {
	s := &Spare{size: size}
	s.refill()
	return s
}

// take returns the spare pair, set to size, or a new pair if none is held.
func (s *Spare) take(size Size) (master, tty *os.File, err error) {
	if s == nil {
		return OpenPTY(size)
	}
	s.mu.Lock()
	master, tty = s.master, s.tty
	s.master, s.tty = nil, nil
	s.mu.Unlock()
	if master == nil {
		return OpenPTY(size)
	}
	if size != s.size {
		if err := pty.Setsize(tty, &pty.Winsize{Cols: size.Cols, Rows: size.Rows}); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("set size: %w", err), master.Close(), tty.Close())
		}
	}
	return master, tty, nil
}

// refill opens the next spare on a goroutine of its own, unless one is
// held, one is being opened or the Spare is closed. A pair that cannot be
// opened is not retried until the next refill: take opens one then.
func (s *Spare) refill() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.master != nil || s.filling || s.closed {
		return
	}
	s.filling = true
	s.filled.Go(func() {
		master, tty, err := OpenPTY(s.size)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.filling = false
		if err != nil {
			return
		}
		if s.closed || s.master != nil {
			master.Close() // Best effort: never handed out.
			tty.Close()
			return
		}
		s.master, s.tty = master, tty
	})
}

// Close closes the spare held, after a refill under way has ended. A take
// after Close opens a pair as OpenPTY does.
func (s *Spare) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.filled.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.master == nil {
		return nil
	}
	err := errors.Join(s.master.Close(), s.tty.Close())
	s.master, s.tty = nil, nil
	if err != nil {
		return fmt.Errorf("close the spare PTY: %w", err)
	}
	return nil
}
