package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/sys/unix"

	"shellagent/daemon"
)

// closeOnExec marks every descriptor above stderr close-on-exec: the agent
// may have inherited some, and its commands must not.
func closeOnExec() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("close_range: %w", err)
	}
	ents, err := os.ReadDir("/proc/self/fd") // before Linux 5.11
	if err != nil {
		return fmt.Errorf("list descriptors: %w", err)
	}
	for _, e := range ents {
		var fd int
		if _, err := fmt.Sscan(e.Name(), &fd); err != nil || fd < 3 {
			continue
		}
		// EBADF: the directory's own descriptor, closed by now.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("close-on-exec %d: %w", fd, err)
		}
	}
	return nil
}

// watchHangup calls gone once fd reports an error or hang-up (the reading
// end of a pipe closed, a socket's peer gone). One epoll descriptor in the
// runtime poller does the waiting: no OS thread, no writes.
func watchHangup(fd int, gone func()) (stop func(), err error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	// No events asked: EPOLLERR and EPOLLHUP are always reported.
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Fd: int32(fd)}); err != nil {
		unix.Close(ep) // Best effort: never used.
		return nil, fmt.Errorf("epoll_ctl %d: %w", fd, err)
	}
	if err := unix.SetNonblock(ep, true); err != nil {
		unix.Close(ep) // Best effort: never used.
		return nil, fmt.Errorf("epoll: %w", err)
	}
	f := os.NewFile(uintptr(ep), "epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close() // Best effort: never used.
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var evs [1]unix.EpollEvent
		err := rc.Read(func(fd uintptr) bool {
			n, err := unix.EpollWait(int(fd), evs[:], 0)
			return n > 0 || err != nil && err != unix.EINTR
		})
		if err == nil {
			gone()
		}
	}()
	return func() {
		f.Close() // Best effort: ends the wait above.
		<-done
	}, nil
}

// pollableStdout returns stdout in the runtime poller when it is a pipe:
// a new open file of the same pipe (/proc/self/fd/1), non-blocking. A
// write to it that must wait parks the writer's goroutine instead of
// blocking an OS thread, which the runtime would then replace (sysmon
// takes the thread's P away and hands it to another), as the daemon's
// writes to a relay's stdout and the benchmark's in-process agent did
// already. O_NONBLOCK belongs to the open file, not the descriptor: set on
// fd 1 itself, it would be set for the client and whoever else shares
// that open file too; the new one is the agent's alone. Anything else (a
// terminal, a file, a socket, no reader yet) is stdout as it is.
func pollableStdout(log *slog.Logger) *os.File {
	return pollable(log, os.Stdout, os.O_WRONLY)
}

// pollableStdin is stdin in the runtime poller when it is a pipe, as
// pollableStdout is stdout. A blocking read of stdin would hold the
// thread's P while the agent waits for the next request: with one P
// (procs.go) whatever the last request readied (the session's actor, the
// writer) would wait for sysmon to take the P back, up to 10 ms once the
// agent has been idle; the spawn's hop from the prompt's handler to the
// actor took 250 µs at the median that way, 20 µs through the poller.
func pollableStdin(log *slog.Logger) *os.File {
	return pollable(log, os.Stdin, os.O_RDONLY)
}

// pollable is f opened anew non-blocking (mode O_RDONLY or O_WRONLY) if
// it is a pipe (daemon.OwnPipe: the rule the relay's handover uses too),
// else f itself.
func pollable(log *slog.Logger, f *os.File, mode int) *os.File {
	if p := daemon.OwnPipe(f, mode); p != nil {
		return p
	}
	log.Debug("stays blocking", "file", f.Name())
	return f
}

// inputEnded reports whether fd, stdin handed to the daemon, has ended:
// a pipe with no writer left (POLLHUP), a socket whose peer shut down its
// writes or closed (POLLRDHUP, POLLHUP). It reads nothing.
func inputEnded(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 1 && fds[0].Revents&(unix.POLLHUP|unix.POLLRDHUP) != 0
}
