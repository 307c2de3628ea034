package procexit

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Process is a process watched through a pidfd in the runtime poller.
type Process struct {
	pid int
	f   *os.File
}

func watch(pid int, _ bool) (*Process, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return nil, ErrGone
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d (Linux 5.3 or later): %w", pid, err)
	}
	return &Process{pid: pid, f: os.NewFile(uintptr(fd), "pidfd")}, nil
}

func atFork(sys *syscall.SysProcAttr) func(int) (*Process, error) {
	fd := -1
	sys.PidFD = &fd
	return func(pid int) (*Process, error) {
		if fd < 0 {
			return nil, fmt.Errorf("no pidfd for %d (Linux 5.3 or later)", pid)
		}
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd) // Best effort: never used.
			return nil, fmt.Errorf("pidfd %d: %w", pid, err)
		}
		return &Process{pid: pid, f: os.NewFile(uintptr(fd), "pidfd")}, nil
	}
}

// Wait blocks until the process has exited (its pidfd is readable then),
// parked in the runtime poller, or until Close.
func (p *Process) Wait() error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return ErrClosed
	}
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 0)
			if err != unix.EINTR {
				perr = err
				return n > 0 || err != nil
			}
		}
	})
	switch {
	case err != nil:
		return ErrClosed
	case perr != nil:
		return fmt.Errorf("poll pidfd %d: %w", p.pid, perr)
	}
	return nil
}

// Status returns the wait status of a child that has exited, without
// reaping it.
func (p *Process) Status() (unix.WaitStatus, error) {
	return p.waitid(unix.WEXITED | unix.WNOWAIT | unix.WNOHANG)
}

// Reap collects an exited child.
func (p *Process) Reap() error {
	_, err := p.waitid(unix.WEXITED | unix.WNOHANG)
	return err
}

func (p *Process) waitid(options int) (unix.WaitStatus, error) {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var info unix.Siginfo
	var werr error
	if err := rc.Control(func(fd uintptr) {
		werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, options, nil)
	}); err != nil {
		return 0, err
	}
	if werr != nil {
		return 0, fmt.Errorf("waitid %d: %w", p.pid, werr)
	}
	return decodeSiginfo(&info)
}

// Close stops watching: a Wait in progress returns ErrClosed.
func (p *Process) Close() error { return p.f.Close() }

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

// errNotExited is what waitid with WNOHANG gives for a child still running.
var errNotExited = errors.New("process has not exited")

// decodeSiginfo turns waitid's report into a wait status as wait4 encodes
// it (exit code << 8, or the signal, | 0x80 for a core dump).
func decodeSiginfo(info *unix.Siginfo) (unix.WaitStatus, error) {
	c := (*siginfoChild)(unsafe.Pointer(info))
	switch c.Code {
	case cldExited:
		return unix.WaitStatus(c.Status&0xff) << 8, nil
	case cldKilled:
		return unix.WaitStatus(c.Status & 0x7f), nil
	case cldDumped:
		return unix.WaitStatus(c.Status&0x7f | 0x80), nil
	}
	if c.Pid == 0 {
		return 0, errNotExited
	}
	return 0, fmt.Errorf("waitid: unexpected si_code %d", c.Code)
}
