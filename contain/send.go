package contain

import (
	"errors"
	"fmt"
	"runtime"
	"time"

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
	return kill || reachedAfter(pid, before, sigs), nil
}

// fatalWait bounds how long reachedAfter waits for a process that keeps
// the default action of a signal it was sent to die of it.
const fatalWait = 50 * time.Millisecond

// reachedAfter looks at a process that was live just before sigs were sent
// to it and tells whether they reached it alive; see signalProcess. A
// process that handles the signals was reached if it still runs. One that
// keeps the default action of one of them dies of it, unless it was
// already on its way out (in exit_group, where no signal is acted on), so
// its end tells: it ended by the signal, or with its own exit code.
func reachedAfter(pid int, before proc, sigs []unix.Signal) bool {
	fatal := before.dieOf(sigs) != 0
	deadline := time.Now().Add(fatalWait)
	for {
		p, ok := readProc(pid)
		switch {
		case !ok || p.start != before.start:
			return true // reaped already: most likely ended by the signal
		case p.live() && (!fatal || time.Now().After(deadline)):
			return true
		case p.exitCode != 0 || p.zombie():
			return killedBy(p.exitCode, sigs)
		}
		// Exiting and its status not written yet, or about to act on a
		// fatal signal: either is a matter of microseconds.
		runtime.Gosched()
	}
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
