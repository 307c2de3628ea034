package contain

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pfExiting is PF_EXITING in /proc/PID/stat's flags: the process has begun
// to exit and acts on no signal any more.
const pfExiting = 0x4

// proc is one process as /proc/PID/stat shows it.
type proc struct {
	pid, ppid, pgid, sid int
	state                byte
	flags                uint64
	start                uint64 // start time, in clock ticks since boot
	exitCode             int    // the wait status once exiting (as waitpid encodes it)
	sigIgnore, sigCatch  uint64 // signals ignored and caught, bit sig-1
}

// live reports whether the process runs and has not begun to exit. A zombie
// holds a pid but runs nothing.
func (p proc) live() bool {
	return p.state != 'Z' && p.state != 'X' && p.state != 'x' && p.flags&pfExiting == 0
}

// dieOf returns the first of sigs whose default action, which the process
// keeps (it neither catches nor ignores it), ends the process; 0 if none.
func (p proc) dieOf(sigs []unix.Signal) unix.Signal {
	for _, sig := range sigs {
		bit := uint64(1) << (sig - 1)
		if (p.sigIgnore|p.sigCatch)&bit == 0 && terminates(sig) {
			return sig
		}
	}
	return 0
}

// catches reports whether the process has a handler for one of sigs.
func (p proc) catches(sigs []unix.Signal) bool {
	for _, sig := range sigs {
		if p.sigCatch&(uint64(1)<<(sig-1)) != 0 {
			return true
		}
	}
	return false
}

// terminates reports whether sig's default action ends the process.
func terminates(sig unix.Signal) bool {
	switch sig {
	case unix.SIGCONT, unix.SIGCHLD, unix.SIGURG, unix.SIGWINCH, unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		return false
	}
	return true
}

// zombie reports whether the process has exited and waits to be reaped.
func (p proc) zombie() bool { return p.state == 'Z' }

// readProc reads /proc/PID/stat. ok is false if the process is gone.
func readProc(pid int) (p proc, ok bool) {
	var buf [512]byte
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return proc{}, false
	}
	defer unix.Close(fd) // Best effort: read-only.
	n, err := unix.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return proc{}, false
	}
	return parseStat(pid, buf[:n])
}

// parseStat parses /proc/PID/stat: "pid (comm) state ppid pgrp session ...".
// comm may hold spaces and parentheses, so fields are counted from the last
// ')'. Field N of proc(5) is f[N-3].
func parseStat(pid int, b []byte) (proc, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return proc{}, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 20 {
		return proc{}, false
	}
	var bad bool
	num := func(k int) uint64 {
		v, err := strconv.ParseUint(string(f[k]), 10, 64)
		bad = bad || err != nil
		return v
	}
	p := proc{
		pid: pid, state: f[0][0],
		ppid: int(num(1)), pgid: int(num(2)), sid: int(num(3)),
		flags: num(6), start: num(19),
		sigIgnore: num(30), sigCatch: num(31),
	}
	if len(f) > 49 { // exit_code, Linux 3.5 and later
		p.exitCode = int(num(49))
	}
	return p, !bad
}

// ownProc checks that /proc shows this process's pid namespace, as every
// pid the package reads there is taken to be. In a pid namespace whose
// /proc is another's (unshare --pid --fork without --mount-proc), the
// pids there name other processes, or none: /proc/self names this process
// by its number there, and /proc/self/status lists its pid in each
// namespace from that /proc's down to its own.
func ownProc() error {
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return fmt.Errorf("read /proc/self: %w", err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("read /proc/self/status: %w", err)
	}
	levels := 1 // NSpid is missing without CONFIG_PID_NS: one namespace
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			levels = len(strings.Fields(v))
		}
	}
	if pid := os.Getpid(); self != strconv.Itoa(pid) || levels != 1 {
		return fmt.Errorf("/proc is not of this process's pid namespace (/proc/self is %s, this process is %d): "+
			"give it a /proc of its own (unshare --pid --fork --mount-proc, or mount -t proc proc /proc in a new mount namespace)", self, pid)
	}
	return nil
}

// scanProcs returns every process in /proc.
func scanProcs() ([]proc, error) {
	pids, err := listPids()
	if err != nil {
		return nil, err
	}
	return statPids(pids), nil
}

// listPids lists the pids in /proc.
func listPids() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("scan /proc: %w", err)
	}
	defer d.Close() // Best effort: read-only.
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("scan /proc: %w", err)
	}
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// statPids reads the processes of pids that are still there.
func statPids(pids []int) []proc {
	out := make([]proc, 0, len(pids))
	for _, pid := range pids {
		if p, ok := readProc(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// newcomers returns the processes in /proc that procs does not hold. A
// scan reads /proc one process at a time, so it misses a child forked
// during the scan by a parent that exits before it is read; the next
// listing shows the child.
func newcomers(procs []proc) ([]proc, error) {
	pids, err := listPids()
	if err != nil {
		return nil, err
	}
	seen := make(map[int]bool, len(procs))
	for _, p := range procs {
		seen[p.pid] = true
	}
	pids = slices.DeleteFunc(pids, func(pid int) bool { return seen[pid] })
	return statPids(pids), nil
}

// environValue returns the value of the environment variable key in
// process pid's initial environment, and whether it is set there. A process
// that cannot be read (gone, another user's, a zombie) has none.
func environValue(pid int, key string) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return "", false
	}
	return lookupEnv(b, key)
}

// lookupEnv finds key in a NUL-separated environment.
func lookupEnv(env []byte, key string) (string, bool) {
	prefix := []byte(key + "=")
	for len(env) > 0 {
		var kv []byte
		kv, env, _ = bytes.Cut(env, []byte{0})
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return string(v), true
		}
	}
	return "", false
}

// commandLine returns a process's command line, arguments joined by
// spaces, or its name in brackets when it has none (a kernel thread, or a
// process on its way out).
func commandLine(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err == nil && len(b) > 0 {
		return strings.Join(strings.Fields(strings.ReplaceAll(string(bytes.TrimRight(b, "\x00")), "\x00", " ")), " ")
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "?"
	}
	return "[" + strings.TrimSpace(string(comm)) + "]"
}

// Member is a live process of a Group.
type Member struct {
	Pid     int
	Command string // its command line, arguments joined by spaces
}

// describe turns pids into Members, dropping those no longer live.
func describe(pids []int) []Member {
	out := make([]Member, 0, len(pids))
	for _, pid := range pids {
		if p, ok := readProc(pid); ok && p.live() {
			out = append(out, Member{Pid: pid, Command: commandLine(pid)})
		}
	}
	return out
}
