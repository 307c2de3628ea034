package contain

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// reach is how signalProcess tells whether its signals reached a live
// process.
type reach int

const (
	// byKill is for SIGKILL: it is sent to a process already exiting too
	// (its main thread may have exited before the others), and a process
	// that was live just before is taken to be reached.
	byKill reach = iota
	// byLook sends only to a live process, and looks at it again right
	// after: it was reached if it still runs, if it ended by one of the
	// signals, or if it is gone altogether. A process that ended with an
	// exit code had begun exiting on its own before the signals came.
	byLook
	// byLive is byLook without the second look, for a caller that knows
	// already that the signals reached a live process: one that was live
	// just before counts as reached.
	byLive
)

// signalProcess sends sigs, in order, to process pid through a pidRef (a
// pidfd on Linux, so that a pid reused by another process is never
// signalled), and only if belongs accepts the process as the OS shows it
// once the reference is open. It reports, as how says, whether the
// signals reached a live process.
func signalProcess(pid int, sigs []unix.Signal, how reach, belongs func(proc) bool) (reached bool, err error) {
	ref, err := openPid(pid)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open process %d: %w", pid, err)
	}
	defer ref.close()
	before, ok := readProc(pid)
	if !ok || !belongs(before) {
		return false, nil // gone, or the pid already names another process
	}
	if !before.live() && how != byKill {
		return false, nil
	}
	for _, sig := range sigs {
		if err := ref.signal(sig); err != nil {
			if errors.Is(err, unix.ESRCH) {
				break
			}
			return false, fmt.Errorf("signal %d with %s: %w", pid, unix.SignalName(sig), err)
		}
	}
	if !before.live() {
		return false, nil
	}
	return how != byLook || reachedAfter(ref, before, sigs), nil
}

// fatalWait bounds how long reachedAfter waits for a process that keeps
// the default action of a signal it was sent to die of it; exitWait, how
// long it waits for a process already exiting to write its status.
const (
	fatalWait = 50 * time.Millisecond
	exitWait  = time.Second
)

// reachedAfter looks at a process that was live just before sigs were sent
// to it through ref and tells whether they reached it alive; see
// byLook. A process that catches one of the signals was reached: its
// handler runs, however it ends. One that ignores them all was reached if
// it still runs. One that keeps the default action of one of them dies of it, unless it
// was already on its way out (in exit_group, where no signal is acted on),
// so its end tells: it ended by the signal, or with its own exit code.
// Waiting for that end sleeps (on the pidfd, on Linux): a busy loop would
// take the CPU from the very process that has to run to die.
func reachedAfter(ref pidRef, before proc, sigs []unix.Signal) bool {
	if before.catches(sigs) {
		// A handler runs for it: however the process ends (trap 'exit 9'
		// TERM ends with a code), the signal reached it.
		return true
	}
	fatal := before.dieOf(sigs) != 0
	start := time.Now()
	for {
		p, ok := readProc(before.pid)
		waited := time.Since(start)
		switch {
		case !ok || p.start != before.start:
			return true // reaped already: most likely ended by the signal
		case p.live() && (!fatal || waited >= fatalWait):
			return true
		case p.exitCode != 0 || p.zombie():
			return killedBy(p.exitCode, sigs)
		case waited >= exitWait:
			return false // exiting with status 0 all along: its own exit(0)
		}
		// About to act on a fatal signal, or exiting and its status not
		// written yet.
		limit := fatalWait
		if !p.live() {
			limit = exitWait
		}
		ref.waitExited(limit - waited)
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
