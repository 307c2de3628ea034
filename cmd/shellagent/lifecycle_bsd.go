//go:build darwin || freebsd

// What this file does: marks inherited descriptors close-on-exec by
// trying each up to the descriptor limit (there is no close_range with
// CLOSE_RANGE_CLOEXEC here, and no /proc/self/fd), and does not watch
// stdout for a hang-up (no epoll): a client that closes the agent's
// stdout but not its stdin is noticed at the agent's next write. The
// Linux test of the same rule is TestCloseOnExecAndEnvironment.

package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/sys/unix"
)

// maxScanFds bounds the descriptors closeOnExec tries where the limit is
// larger still (unlimited).
const maxScanFds = 1 << 20

// closeOnExec marks every descriptor above stderr close-on-exec: the agent
// may have inherited some, and its commands must not.
func closeOnExec() error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("descriptor limit: %w", err)
	}
	for fd := 3; uint64(fd) < min(uint64(lim.Cur), maxScanFds); fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("close-on-exec %d: %w", fd, err)
		}
	}
	return nil
}

// watchHangup does not watch: see the top of this file.
func watchHangup(int, func()) (stop func(), err error) {
	return nil, errors.New("no hang-up watch on this OS: a closed stdout is noticed at the next write")
}

// pollableStdout returns stdout as it is: /dev/fd here duplicates a
// descriptor rather than opening the pipe anew, so the agent could not
// make stdout non-blocking without making it so for the client too.
func pollableStdout(*slog.Logger) *os.File { return os.Stdout }

// pollableStdin returns stdin as it is, for the same reason.
func pollableStdin(*slog.Logger) *os.File { return os.Stdin }

// inputEnded reports whether fd, stdin handed to the daemon, has ended:
// a pipe with no writer left, a socket whose peer closed (POLLHUP). It
// reads nothing.
func inputEnded(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 1 && fds[0].Revents&unix.POLLHUP != 0
}
