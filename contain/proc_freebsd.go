//go:build amd64 || arm64 || riscv64

// What this file does: reads processes on FreeBSD through sysctl:
// kern.proc.proc and kern.proc.pid (struct kinfo_proc, of which the head
// is declared here for 64-bit platforms), kern.proc.env and
// kern.proc.args for another process's environment and arguments. The
// same rules on Linux's /proc are what every contain test runs in Session
// mode (TestDetachedProcessesStayInTheGroup, TestSweep/session …).

package contain

import (
	"errors"
	"fmt"
	"io/fs"
	"unsafe"

	"golang.org/x/sys/unix"
)

// kinfoProc is the head of FreeBSD's struct kinfo_proc (<sys/user.h>) on
// 64-bit platforms, up to ki_stat; the whole is kinfoProcSize bytes.
type kinfoProc struct {
	Structsize int32        // 0: ki_structsize
	_          [68]byte     // 4: ki_layout … ki_wchan
	Pid        int32        // 72
	Ppid       int32        // 76
	Pgid       int32        // 80
	Tpgid      int32        // 84
	Sid        int32        // 88
	_          [12]byte     // 92: ki_tsid, ki_jobc, ki_spare_short1, ki_tdev_freebsd11
	Siglist    [4]uint32    // 104
	Sigmask    [4]uint32    // 120
	Sigignore  [4]uint32    // 136
	Sigcatch   [4]uint32    // 152
	Uid        uint32       // 168
	_          [132]byte    // 172: ki_ruid … ki_ssize
	Xstat      uint16       // 304: the wait status
	_          [30]byte     // 306: ki_acflag … ki_runtime
	Start      unix.Timeval // 336
	_          [16]byte     // 352: ki_childtime
	Flag       int64        // 368: P_* flags
	_          [12]byte     // 376: ki_kiflag, ki_traceflag
	Stat       int8         // 388
}

// startTime returns ki_start in microseconds: with the pid, it names one
// process.
func (k *kinfoProc) startTime() uint64 {
	return uint64(k.Start.Sec)*1_000_000 + uint64(k.Start.Usec)
}

// KINFO_PROC_SIZE on 64-bit platforms.
const kinfoProcSize = 1088

// The offsets of <sys/user.h>, checked by the compiler: a wrong one is an
// index out of range.
var _ = [1]struct{}{}[unsafe.Offsetof(kinfoProc{}.Pid)-72+
	unsafe.Offsetof(kinfoProc{}.Sid)-88+
	unsafe.Offsetof(kinfoProc{}.Siglist)-104+
	unsafe.Offsetof(kinfoProc{}.Sigmask)-120+
	unsafe.Offsetof(kinfoProc{}.Sigignore)-136+
	unsafe.Offsetof(kinfoProc{}.Xstat)-304+
	unsafe.Offsetof(kinfoProc{}.Start)-336+
	unsafe.Offsetof(kinfoProc{}.Flag)-368+
	unsafe.Offsetof(kinfoProc{}.Stat)-388]

// Process states and flags of <sys/proc.h>.
const (
	sZomb   = 5       // SZOMB
	pWexit  = 0x02000 // P_WEXIT: working on exiting
	pSystem = 0x00200 // P_SYSTEM: a kernel process
)

// kinfos decodes a buffer of struct kinfo_proc.
func kinfos(b []byte) ([]proc, error) {
	var out []proc
	for len(b) > 0 {
		k, err := kinfo(b)
		if err != nil {
			return out, err
		}
		p := proc{
			pid: int(k.Pid), ppid: int(k.Ppid), pgid: int(k.Pgid), sid: int(k.Sid),
			state:     'S',
			exiting:   k.Flag&pWexit != 0,
			kthread:   k.Flag&pSystem != 0,
			start:     k.startTime(),
			exitCode:  int(k.Xstat),
			sigIgnore: sigset(k.Sigignore), sigCatch: sigset(k.Sigcatch),
			sigBlocked: sigset(k.Sigmask),
		}
		if k.Stat == sZomb {
			p.state = 'Z'
		}
		out = append(out, p)
		b = b[kinfoProcSize:]
	}
	return out, nil
}

// kinfo returns the struct kinfo_proc at the start of b.
func kinfo(b []byte) (*kinfoProc, error) {
	if len(b) < kinfoProcSize {
		return nil, fmt.Errorf("kinfo_proc: %d bytes left, want %d", len(b), kinfoProcSize)
	}
	k := (*kinfoProc)(unsafe.Pointer(&b[0]))
	if k.Structsize != kinfoProcSize {
		return nil, fmt.Errorf("kinfo_proc of %d bytes, want %d: a layout this program does not know", k.Structsize, kinfoProcSize)
	}
	return k, nil
}

// sigset returns signals 1 to 64 of a sigset_t as proc holds them, bit
// sig-1: signal n is bit n-1 of the set's words (<sys/signal.h>, _SIG_BIT).
func sigset(w [4]uint32) uint64 { return uint64(w[0]) | uint64(w[1])<<32 }

// heldSignals returns the signals sent to process p that none of its
// threads has taken yet: ki_siglist, the process's own queue, where a
// signal sent to the process waits while every thread blocks it
// (tdsendsignal; sigBlocked is the first thread's ki_sigmask). It is
// Linux's ShdPnd, on which the rule is tested
// (TestSignalReachesWhatAHolderForks); 0 for a process gone. The caller
// has just read p (holding): a second read, for the few processes that
// block one of the signals, keeps proc free of a field only FreeBSD fills.
func heldSignals(p proc) uint64 {
	b, err := unix.SysctlRaw("kern.proc.pid", p.pid)
	if err != nil {
		return 0
	}
	k, err := kinfo(b)
	if err != nil || int(k.Pid) != p.pid || k.startTime() != p.start {
		return 0
	}
	return sigset(k.Siglist)
}

// sysctlProcs reads kern.proc.NAME, again if the table grew meanwhile.
func sysctlProcs(name string, args ...int) ([]proc, error) {
	var b []byte
	var err error
	for range 5 {
		if b, err = unix.SysctlRaw(name, args...); !errors.Is(err, unix.ENOMEM) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sysctl %s: %w", name, err)
	}
	return kinfos(b)
}

// readProc reads one process. ok is false if it is gone.
func readProc(pid int) (proc, bool) {
	procs, err := sysctlProcs("kern.proc.pid", pid)
	if err != nil || len(procs) != 1 || procs[0].pid != pid {
		return proc{}, false
	}
	return procs[0], true
}

// scanProcs returns every process.
func scanProcs() ([]proc, error) { return sysctlProcs("kern.proc.proc") }

// environ returns process pid's environment, NUL-separated, for this
// user's processes; anything the kernel refuses is taken as not ours to
// read.
func environ(pid int) ([]byte, error) {
	b, err := unix.SysctlRaw("kern.proc.env", pid)
	if errors.Is(err, unix.ESRCH) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("kern.proc.env %d: %w (%w)", pid, err, fs.ErrPermission)
	}
	return b, nil
}

// commandLine returns a process's command line, arguments joined by
// spaces, or "?" when they cannot be read.
func commandLine(pid int) string {
	b, err := unix.SysctlRaw("kern.proc.args", pid)
	if err != nil || len(b) == 0 {
		return "?"
	}
	return joinArgs(b)
}

// threadLives reports whether a thread of process pid runs where the
// process is a zombie: never here, where a zombie has ended.
func threadLives(int) bool { return false }

// workDir returns "": a process's working directory is not read here.
func workDir(int) string { return "" }
