package ptyio

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"shellagent/signals"
)

// pidFile is a pidfd served by the runtime poller: waiting for a process
// parks a goroutine, not an OS thread.
type pidFile struct {
	pid int
	f   *os.File
}

func newPidFile(pid, fd int) (*pidFile, error) {
	if fd < 0 {
		return nil, fmt.Errorf("no pidfd for %d (Linux 5.3 or later needed)", pid)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd) // Best effort: never used.
		return nil, fmt.Errorf("pidfd %d: %w", pid, err)
	}
	return &pidFile{pid: pid, f: os.NewFile(uintptr(fd), "pidfd")}, nil
}

// wait blocks until the process has exited (a pidfd is readable then) or
// the file is closed.
func (p *pidFile) wait() error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		var n int
		n, perr = pollNow(int(fd))
		return n > 0 || perr != nil
	})
	if err != nil {
		return err
	}
	if perr != nil {
		return fmt.Errorf("poll pidfd %d: %w", p.pid, perr)
	}
	return nil
}

// pollNow reports whether fd is readable, without waiting.
func pollNow(fd int) (int, error) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// status returns the wait status of an exited child without reaping it, so
// that its pid (and so the session id) cannot be reused while the session
// lives on.
func (p *pidFile) status() (Status, error) {
	return p.waitid(unix.WEXITED | unix.WNOWAIT | unix.WNOHANG)
}

// reap collects the exited child.
func (p *pidFile) reap() error {
	_, err := p.waitid(unix.WEXITED | unix.WNOHANG)
	return err
}

func (p *pidFile) waitid(options int) (Status, error) {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return Status{}, err
	}
	var info unix.Siginfo
	var werr error
	if err := rc.Control(func(fd uintptr) {
		werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, options, nil)
	}); err != nil {
		return Status{}, err
	}
	if werr != nil {
		return Status{}, fmt.Errorf("waitid %d: %w", p.pid, werr)
	}
	return decodeSiginfo(&info)
}

// siginfoChild mirrors the SIGCHLD layout of siginfo_t on Linux:
// signo, errno, code, padding, then pid, uid, status.
type siginfoChild struct {
	Signo, Errno, Code, _ int32
	Pid                   int32
	UID                   uint32
	Status                int32
}

const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

func decodeSiginfo(info *unix.Siginfo) (Status, error) {
	c := (*siginfoChild)(unsafe.Pointer(info))
	switch c.Code {
	case cldExited:
		return Status{Code: int(c.Status), Exited: true}, nil
	case cldKilled, cldDumped:
		return Status{Signal: signals.Name(unix.Signal(c.Status))}, nil
	}
	if c.Pid == 0 {
		return Status{}, errNotExited
	}
	return Status{}, fmt.Errorf("waitid: unexpected si_code %d", c.Code)
}

var errNotExited = errors.New("process has not exited")

func (p *pidFile) close() error { return p.f.Close() }
