//go:build darwin || freebsd

// What this file does: signals a process by pid, as macOS and FreeBSD
// have no pidfd; signalProcess checks the pid's start time just before
// (so a pid reused between the check and the kill, within microseconds,
// is the one case left). The rules it serves (a signal reaches a member,
// a reused pid is never signalled once the check sees it) are tested on
// Linux by contain's TestDetachedProcessesStayInTheGroup,
// TestKillEndsWhatIgnoresTerm and TestSignalDoesNotCountAZombie in every
// mode, and by cmd/shellagent's TestCancelRacingExit.

package contain

import (
	"time"

	"golang.org/x/sys/unix"
)

// pidRef names a process by its pid only.
type pidRef struct{ pid int }

func openPid(pid int) (pidRef, error) { return pidRef{pid}, nil }

func (r pidRef) signal(sig unix.Signal) error { return unix.Kill(r.pid, sig) }

// waitExited sleeps a little: the caller looks again, at most d in all.
func (r pidRef) waitExited(d time.Duration) { time.Sleep(min(d, time.Millisecond)) }

func (r pidRef) close() {}

// listPids lists every pid, from the sysctl scan (scanProcs): macOS and
// FreeBSD have no cheaper list.
func listPids() ([]int, error) {
	procs, err := scanProcs()
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.pid
	}
	return pids, err
}
