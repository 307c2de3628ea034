//go:build !linux

package ptyio

import (
	"errors"
	"fmt"
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// OpenPTY opens a PTY pair of the given size and returns a non-blocking
// master served by the runtime poller: reads park a goroutine, not an OS
// thread, and deadlines work. creack/pty's Open leaves the master in
// blocking mode (it calls Fd), so its descriptor is duplicated into a fresh
// non-blocking one; never call Fd on the master returned. Close tty once the
// command has started.
func OpenPTY(size Size) (master, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	defer m.Close() // Best effort: the duplicate below is the master we use.
	if err := pty.Setsize(tty, &pty.Winsize{Cols: size.Cols, Rows: size.Rows}); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("set size: %w", err), tty.Close())
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err == nil {
		if err = unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd) // Best effort: never handed out.
		}
	}
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("dup pty master: %w", err), tty.Close())
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), tty, nil
}
