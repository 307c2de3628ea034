//go:build darwin || freebsd

// What this file does: waits for processes to exit through one kqueue
// (EVFILT_PROC, NOTE_EXIT, which carries the wait status), served by one
// goroutine that runs while anything is watched. No machine here runs
// it; TestWatch (procexit_test.go, on Linux's pidfd) states the same
// rules: Wait returns at the exit, Status gives the status without
// reaping, Close ends a Wait, a gone process is ErrGone.

package procexit

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Process is a process watched through the shared kqueue.
type Process struct {
	pid    int
	done   chan struct{} // closed at the exit
	closed chan struct{} // closed by Close
	once   sync.Once
	status unix.WaitStatus // set before done is closed
	reaped bool            // watch reaped it already (a zombie on macOS)
}

// queue is the kqueue and who waits on it. mu guards the fields below it;
// it is never held across a kevent that waits.
var queue struct {
	once    sync.Once
	fd      int
	err     error
	mu      sync.Mutex
	running bool // the serving goroutine runs
	pids    map[int]*entry
}

// entry is every Process watching one pid, and the fflags registered.
type entry struct {
	procs  []*Process
	fflags uint32
}

// wake is the EVFILT_USER event that tells the goroutine to look whether
// anything is still watched.
const wake = 0

func open() error {
	queue.once.Do(func() {
		// A kqueue is not inherited across fork: commands never see it.
		queue.fd, queue.err = unix.Kqueue()
		if queue.err != nil {
			queue.err = fmt.Errorf("kqueue: %w", queue.err)
			return
		}
		queue.pids = make(map[int]*entry)
		var ev unix.Kevent_t
		unix.SetKevent(&ev, wake, unix.EVFILT_USER, unix.EV_ADD|unix.EV_CLEAR)
		if _, err := unix.Kevent(queue.fd, []unix.Kevent_t{ev}, nil, nil); err != nil {
			queue.err = fmt.Errorf("kevent EVFILT_USER: %w", err)
		}
	})
	return queue.err
}

func watch(pid int, child bool) (*Process, error) {
	if err := open(); err != nil {
		return nil, err
	}
	p := &Process{pid: pid, done: make(chan struct{}), closed: make(chan struct{})}
	queue.mu.Lock()
	e := queue.pids[pid]
	if e == nil {
		e = &entry{}
		queue.pids[pid] = e
	}
	e.procs = append(e.procs, p)
	e.fflags |= unix.NOTE_EXIT
	if child {
		e.fflags |= noteExitStatus
	}
	var ev unix.Kevent_t
	unix.SetKevent(&ev, pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev.Fflags = e.fflags
	_, err := unix.Kevent(queue.fd, []unix.Kevent_t{ev}, nil, nil)
	if err == nil && !queue.running {
		queue.running = true
		go serve()
	}
	queue.mu.Unlock()
	if err == nil {
		return p, nil
	}
	p.remove()
	if !errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("kevent EVFILT_PROC %d: %w", pid, err)
	}
	if !child {
		return nil, ErrGone
	}
	// Our child has exited already (macOS does not watch a zombie): its
	// status is to be had only by reaping it.
	var ws unix.WaitStatus
	if n, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != nil || n != pid {
		return nil, ErrGone
	}
	p.status, p.reaped = ws, true
	close(p.done)
	return p, nil
}

// atFork has nothing to prepare: the watch is WatchChild's.
func atFork(*syscall.SysProcAttr) func(int) (*Process, error) { return WatchChild }

// serve delivers exits until nothing is watched.
func serve() {
	events := make([]unix.Kevent_t, 16)
	for {
		n, err := unix.Kevent(queue.fd, nil, events, nil)
		queue.mu.Lock()
		if err == nil {
			for _, ev := range events[:n] {
				if ev.Filter == unix.EVFILT_PROC && ev.Fflags&unix.NOTE_EXIT != 0 {
					exited(int(ev.Ident), unix.WaitStatus(ev.Data))
				}
			}
		}
		if len(queue.pids) == 0 {
			queue.running = false
			queue.mu.Unlock()
			return
		}
		queue.mu.Unlock()
	}
}

// exited ends the watches of pid. queue.mu is held.
func exited(pid int, ws unix.WaitStatus) {
	e := queue.pids[pid]
	delete(queue.pids, pid)
	if e == nil {
		return
	}
	for _, p := range e.procs {
		p.status = ws
		close(p.done)
	}
}

// remove takes p off the queue, and wakes the goroutine if nothing is
// watched any more.
func (p *Process) remove() {
	queue.mu.Lock()
	defer queue.mu.Unlock()
	e := queue.pids[p.pid]
	if e == nil {
		return
	}
	for i, q := range e.procs {
		if q == p {
			e.procs = append(e.procs[:i], e.procs[i+1:]...)
			break
		}
	}
	if len(e.procs) > 0 {
		return
	}
	delete(queue.pids, p.pid)
	var ev [2]unix.Kevent_t
	unix.SetKevent(&ev[0], p.pid, unix.EVFILT_PROC, unix.EV_DELETE)
	// Best effort: ENOENT once the event has fired.
	_, _ = unix.Kevent(queue.fd, ev[:1], nil, nil)
	if len(queue.pids) == 0 && queue.running {
		unix.SetKevent(&ev[1], wake, unix.EVFILT_USER, 0)
		ev[1].Fflags = unix.NOTE_TRIGGER
		// Best effort: the goroutine also looks after its next event.
		_, _ = unix.Kevent(queue.fd, ev[1:], nil, nil)
	}
}

// Wait blocks until the process has exited, or until Close.
func (p *Process) Wait() error {
	select {
	case <-p.done:
		return nil
	case <-p.closed:
		return ErrClosed
	}
}

// Status returns the wait status of a child that has exited, as the exit
// event carried it; the child is not reaped.
func (p *Process) Status() (unix.WaitStatus, error) {
	select {
	case <-p.done:
		return p.status, nil
	default:
		return 0, fmt.Errorf("status of %d: the process has not exited", p.pid)
	}
}

// Reap collects an exited child.
func (p *Process) Reap() error {
	if p.reaped {
		return nil
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(p.pid, &ws, unix.WNOHANG, nil); err != nil {
		return fmt.Errorf("wait4 %d: %w", p.pid, err)
	}
	return nil
}

// Close stops watching: a Wait in progress returns ErrClosed.
func (p *Process) Close() error {
	p.once.Do(func() {
		close(p.closed)
		p.remove()
	})
	return nil
}
