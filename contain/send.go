package contain

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// signalProcess sends sigs, in order, to process pid through a pidfd, so
// that a pid reused by another process is never signalled, and only if
// belongs accepts the process as /proc shows it once the pidfd is open.
//
// It reports whether the signals reached a live process. A process that is
// already exiting or a zombie is not signalled. For SIGKILL (kill) a
// process that was live just before is taken to be reached; for other
// signals the process is looked at again right after: it was reached if it
// still runs, or if it ended by one of sigs, or if it is gone altogether.
// A process that ended with an exit code had begun exiting on its own
// before the signals came, and was not reached.
func signalProcess(pid int, sigs []unix.Signal, kill bool, belongs func(proc) bool) (reached bool, err error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd) // Best effort: nothing was written through it.
	before, ok := readProc(pid)
	if !ok || !belongs(before) {
		return false, nil // gone, or the pid already names another process
	}
	if !before.live() && !kill {
		return false, nil
	}
	for _, sig := range sigs {
		if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
			if errors.Is(err, unix.ESRCH) {
				break
			}
			return false, fmt.Errorf("signal %d with %s: %w", pid, unix.SignalName(sig), err)
		}
	}
	if !before.live() {
		return false, nil
	}
	return kill || reachedAfter(pid, before.start, sigs), nil
}

// reachedAfter looks at a process that was live just before sigs were sent
// to it and tells whether they reached it alive; see signalProcess.
func reachedAfter(pid int, start uint64, sigs []unix.Signal) bool {
	for range 1000 {
		p, ok := readProc(pid)
		switch {
		case !ok || p.start != start:
			return true // reaped already: most likely ended by the signal
		case p.live():
			return true
		case p.exitCode != 0 || p.zombie():
			return killedBy(p.exitCode, sigs)
		}
		// Exiting, and its status is not written yet: it will be soon.
		runtime.Gosched()
	}
	return true
}

// killedBy reports whether a wait status says a signal in sigs ended the
// process.
func killedBy(status int, sigs []unix.Signal) bool {
	ws := unix.WaitStatus(status)
	if !ws.Signaled() {
		return false
	}
	for _, sig := range sigs {
		if ws.Signal() == sig {
			return true
		}
	}
	return false
}
