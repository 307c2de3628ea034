package contain

import (
	"time"

	"golang.org/x/sys/unix"
)

// pidRef names one process through a pidfd: once it is open, a signal
// sent through it reaches that process or none, never a process that has
// taken its pid since.
type pidRef struct{ fd int }

// openPid opens a pidfd of process pid; unix.ESRCH if there is none.
func openPid(pid int) (pidRef, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	return pidRef{fd}, err
}

func (r pidRef) signal(sig unix.Signal) error { return unix.PidfdSendSignal(r.fd, sig, nil, 0) }

// waitExited waits until the process has exited (the pidfd is readable),
// at most d.
func (r pidRef) waitExited(d time.Duration) {
	fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
	// Best effort: an error or EINTR ends the wait early, and the caller
	// looks at /proc again, which is always right.
	_, _ = unix.Poll(fds, max(1, int(d.Milliseconds())))
}

func (r pidRef) close() {
	unix.Close(r.fd) // Best effort: nothing was written through it.
}
