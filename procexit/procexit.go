// Package procexit tells when a process exits, without reaping it and
// without an OS thread per process: on Linux a pidfd served by Go's
// runtime poller; on macOS and FreeBSD one kqueue (EVFILT_PROC,
// NOTE_EXIT) for every process watched, served by one goroutine while
// anything is watched.
//
// Files: procexit.go (the API), procexit_linux.go, procexit_bsd.go with
// procexit_darwin.go and procexit_freebsd.go; adopt_linux.go and
// file_other.go (a pidfd handed over by an exec in place).
package procexit

import (
	"errors"
	"syscall"
)

// ErrGone is returned by Watch for a process that no longer exists (or,
// on macOS, one that has already exited: a zombie cannot be watched
// there).
var ErrGone = errors.New("no such process")

// ErrClosed is returned by Wait once Close has been called.
var ErrClosed = errors.New("watch closed")

// Watch starts watching process pid. A pid can be reused once its process
// is reaped: unless pid is an unreaped child of this process, check after
// Watch that pid still names the process meant (its start time), and take
// an exit for that process's if it does not.
//
// Process methods are safe for concurrent use.
func Watch(pid int) (*Process, error) { return watch(pid, false) }

// WatchChild is Watch for a child of this process that it has not reaped:
// Status then reports its wait status. On macOS that takes
// NOTE_EXITSTATUS, which the kernel grants only to the parent.
func WatchChild(pid int) (*Process, error) { return watch(pid, true) }

// AtFork prepares sys, the attributes of a child about to be forked, so
// that the child is watched from the fork on, and returns what takes the
// watch once the fork has given the child's pid: on Linux the fork itself
// makes the pidfd (CLONE_PIDFD), so no moment passes in which this
// process holds nothing that names the child; elsewhere the watch is
// WatchChild's. Call the function returned exactly once after a fork that
// succeeded.
func AtFork(sys *syscall.SysProcAttr) (watch func(pid int) (*Process, error)) { return atFork(sys) }

// Pid returns the process id watched.
func (p *Process) Pid() int { return p.pid }
