package ptyio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"shellagent/contain"
)

// Handover: a command that one image of the agent hands to the next, the
// same process after an exec in place (a daemon's upgrade). The old image
// freezes it (no more reads of the PTY: what was read is in out; no
// events), hands over its descriptors, and execs; the new image adopts
// it with the same out, and it goes on.

// Handed is a running command as the image that froze it hands it over.
type Handed struct {
	Pid    int      // the shell
	Master *os.File // the PTY's master
	Shell  *os.File // the shell's process handle (a pidfd)
	Group  int64    // its contain group (contain.GroupNumber)
	Tty    string   // the PTY's slave, /dev/pts/N
}

// A Freezer is a Process that can be handed over.
type Freezer interface {
	// Freeze stops reading the terminal and holds back the command's
	// events until Thaw, and returns what to hand over: files that stay
	// the Process's. It fails, having changed nothing, for a command that
	// is ending (ErrEnding) or when ctx ends first.
	Freeze(ctx context.Context) (Handed, error)
	// Thaw undoes Freeze: the reads and the events go on.
	Thaw()
}

// An Adopter is a Launcher that can take over a command that an earlier
// image of this process froze and handed over.
type Adopter interface {
	// Adopt takes h over: its output goes to out, its events to ev, as
	// for a command that Launch started. The files of h become the
	// Process's. It fails for a command it cannot follow, and then closes
	// nothing.
	Adopt(h Handed, out io.Writer, ev Events) (Process, error)
}

// ErrEnding is Freeze's error for a command whose end is being reported.
var ErrEnding = errors.New("the command is ending")

var _ Freezer = (*local)(nil)

// Freeze implements Freezer.
func (p *local) Freeze(ctx context.Context) (Handed, error) {
	p.mu.Lock()
	if p.done || p.thawed != nil {
		p.mu.Unlock()
		return Handed{}, fmt.Errorf("freeze the terminal of %d: %w", p.pid, ErrEnding)
	}
	p.thawed, p.parked = make(chan struct{}), make(chan struct{}, 1)
	parked := p.parked
	p.mu.Unlock()
	n, ok := contain.GroupNumber(p.group)
	shell := p.shell.File()
	if !ok || shell == nil {
		p.Thaw()
		return Handed{}, fmt.Errorf("freeze the terminal of %d: its group or process handle cannot be handed over", p.pid)
	}
	// Wakes the reader parked in the poller: it parks on thawed instead.
	err := p.master.SetReadDeadline(time.Now())
	if err == nil {
		select {
		case <-parked:
		case <-p.readDone: // EIO (macOS, FreeBSD): nothing holds the terminal any more
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		p.Thaw()
		return Handed{}, fmt.Errorf("freeze the terminal of %d: %w", p.pid, err)
	}
	return Handed{Pid: p.pid, Master: p.master, Shell: shell, Group: n, Tty: p.tty}, nil
}

// Thaw implements Freezer.
func (p *local) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thawed == nil {
		return
	}
	p.master.SetReadDeadline(time.Time{}) // Best effort: fails only once closed.
	close(p.thawed)
	p.thawed, p.parked = nil, nil
}

// frozen returns, while the command is frozen, the channel Thaw closes,
// and tells Freeze that the reader has parked.
func (p *local) frozen() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thawed != nil {
		select {
		case p.parked <- struct{}{}:
		default:
		}
	}
	return p.thawed
}

// waitThawed waits, under p.mu, while the command is frozen: the end of
// a command is not reported while it is.
func (p *local) waitThawed() {
	for p.thawed != nil {
		th := p.thawed
		p.mu.Unlock()
		<-th
		p.mu.Lock()
	}
}
