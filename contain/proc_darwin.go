// What this file does: reads processes on macOS through sysctl:
// kern.proc.all and kern.proc.pid (struct kinfo_proc), getsid for the
// session (kinfo_proc has none), and kern.procargs2 for another process's
// arguments and environment (this user's processes only). The same rules
// on Linux's /proc are what every contain test runs in Session mode
// (TestDetachedProcessesStayInTheGroup, TestSweep/session …); the
// KERN_PROCARGS2 layout is parsed in procargs.go and tested by
// TestParseProcargs2.

package contain

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// Process states and flags of <sys/proc.h>.
const (
	sZomb  = 5      // SZOMB: exited, waiting to be reaped
	pWexit = 0x2000 // P_WEXIT: working on exiting
)

func fromKinfo(k *unix.KinfoProc) proc {
	p := proc{
		pid: int(k.Proc.P_pid), ppid: int(k.Eproc.Ppid), pgid: int(k.Eproc.Pgid),
		state:     'S',
		exiting:   k.Proc.P_flag&pWexit != 0,
		start:     uint64(k.Proc.P_starttime.Sec)*1_000_000 + uint64(k.Proc.P_starttime.Usec),
		exitCode:  int(k.Proc.P_xstat),
		sigIgnore: uint64(k.Proc.P_sigignore), sigCatch: uint64(k.Proc.P_sigcatch),
	}
	if k.Proc.P_stat == sZomb {
		p.state = 'Z'
	}
	if sid, err := unix.Getsid(p.pid); err == nil {
		p.sid = sid
	}
	return p
}

// readProc reads one process. ok is false if it is gone.
func readProc(pid int) (proc, bool) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(k.Proc.P_pid) != pid {
		return proc{}, false
	}
	return fromKinfo(k), true
}

// scanProcs returns every process.
func scanProcs() ([]proc, error) {
	ks, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("sysctl kern.proc.all: %w", err)
	}
	out := make([]proc, 0, len(ks))
	for i := range ks {
		if ks[i].Proc.P_pid > 0 {
			out = append(out, fromKinfo(&ks[i]))
		}
	}
	return out, nil
}

// environ returns process pid's initial environment, NUL-separated. The
// kernel gives it for this user's live processes only: anything else it
// refuses (EINVAL, EPERM) is taken as not ours to read. EIO, a process in
// the middle of a fork or an exec, reads as empty: read again later.
func environ(pid int) ([]byte, error) {
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if errors.Is(err, unix.EIO) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kern.procargs2 %d: %w (%w)", pid, err, fs.ErrPermission)
	}
	_, env, ok := parseProcargs2(b)
	if !ok {
		return nil, nil
	}
	return env, nil
}

// commandLine returns a process's command line, arguments joined by
// spaces, or its name in brackets when they cannot be read (another
// user's process, or one on its way out).
func commandLine(pid int) string {
	if b, err := unix.SysctlRaw("kern.procargs2", pid); err == nil {
		if args, _, ok := parseProcargs2(b); ok && len(args) > 0 {
			return joinArgs(args)
		}
	}
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return "?"
	}
	return "[" + unix.ByteSliceToString(k.Proc.P_comm[:]) + "]"
}

// heldSignals returns 0: a process's pending signals and mask are not
// read on macOS, so signalUntilStable does not wait for a process that
// blocks the signals it was sent (holding never calls it: sigBlocked is
// 0 here).
func heldSignals(proc) uint64 { return 0 }

// threadLives reports whether a thread of process pid runs where the
// process is a zombie: never here, where a zombie has ended.
func threadLives(int) bool { return false }

// workDir returns "": a process's working directory is not read here.
func workDir(int) string { return "" }
