package contain

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Flags of /proc/PID/stat: PF_EXITING, the process has begun to exit and
// acts on no signal any more; PF_KTHREAD, a kernel thread.
const (
	pfExiting = 0x4
	pfKthread = 0x00200000
)

// readProc reads /proc/PID/stat. ok is false if the process is gone.
//
// That file shows the process's first thread. A process whose first
// thread has ended (pthread_exit in main, or an exec from another thread
// under way) lives on in its other threads, though its first shows as a
// zombie, or exiting: its state, and the signals its thread pending and
// blocks, are then a live thread's. Such a process is signalled, listed
// and waited for as any other; it is reaped once its last thread ends.
func readProc(pid int) (p proc, ok bool) {
	p, ok = readStat("/proc/"+strconv.Itoa(pid)+"/stat", pid)
	if ok && !p.live() && !p.kthread {
		if t, ok := liveThread(pid); ok {
			p.state, p.exiting, p.sigPending, p.sigBlocked = t.state, t.exiting, t.sigPending, t.sigBlocked
		}
	}
	return p, ok
}

// readStat reads and parses a stat file of process pid (its own, or one
// of its threads').
func readStat(path string, pid int) (proc, bool) {
	var buf [512]byte
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
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
// ')'. Field N of proc(5) is f[N-3]. It allocates nothing: a look at every
// process of the machine parses thousands of these.
func parseStat(pid int, b []byte) (proc, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return proc{}, false
	}
	var f [50][]byte // the fields up to exit_code
	n := statFields(b[i+2:], f[:])
	if n < 32 { // up to sigcatch
		return proc{}, false
	}
	var bad bool
	num := func(k int) uint64 {
		v, err := strconv.ParseUint(string(f[k]), 10, 64)
		bad = bad || err != nil
		return v
	}
	flags := num(6)
	p := proc{
		pid: pid, state: f[0][0],
		ppid: int(num(1)), pgid: int(num(2)), sid: int(num(3)),
		exiting: flags&pfExiting != 0, kthread: flags&pfKthread != 0,
		start:      num(19),
		sigPending: num(28), sigBlocked: num(29), sigIgnore: num(30), sigCatch: num(31),
	}
	if n > 49 { // exit_code, Linux 3.5 and later
		p.exitCode = int(num(49))
	}
	return p, !bad
}

// statFields splits b at spaces and newlines into f, as many fields as f
// holds, and returns how many it found.
func statFields(b []byte, f [][]byte) int {
	n := 0
	for len(b) > 0 && n < len(f) {
		if b[0] == ' ' || b[0] == '\n' {
			b = b[1:]
			continue
		}
		end := bytes.IndexAny(b, " \n")
		if end < 0 {
			end = len(b)
		}
		f[n], b, n = b[:end], b[end:], n+1
	}
	return n
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

// heldSignals returns the signals sent to process p that none of its
// threads has taken yet (ShdPnd in /proc/PID/status): each thread blocks
// them, or none has run since they came. The caller has read it live
// (holding); 0 for a process gone.
func heldSignals(p proc) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		if val, ok := bytes.CutPrefix(line, []byte("ShdPnd:\t")); ok {
			held, _ := strconv.ParseUint(string(bytes.TrimSpace(val)), 16, 64)
			return held
		}
	}
	return 0
}

// environ returns process pid's initial environment, NUL-separated: empty
// for a zombie (or, for a moment, a process in the middle of an exec), an
// error wrapping fs.ErrPermission for another user's process. A process
// whose first thread has ended has it in its live threads only.
func environ(pid int) ([]byte, error) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if (err != nil && !errors.Is(err, fs.ErrPermission)) || len(env) == 0 {
		if tenv := liveThreadFile(pid, "environ"); tenv != nil {
			return tenv, nil
		}
	}
	return env, err
}

// liveThreadFile returns the file name of /proc/PID/task/TID of a live
// thread of process pid other than its first (see liveThread), or nil if
// there is none or the file is empty or cannot be read.
func liveThreadFile(pid int, name string) []byte {
	t, ok := liveThread(pid)
	if !ok {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(t.tid) + "/" + name)
	if err != nil || len(b) == 0 {
		return nil
	}
	return b
}

// commandLine returns a process's command line, arguments joined by
// spaces, or its name in brackets when it has none (a kernel thread, or a
// process on its way out).
func commandLine(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err == nil && len(b) > 0 {
		return joinArgs(b)
	}
	if b := liveThreadFile(pid, "cmdline"); b != nil { // its first thread has ended
		return joinArgs(b)
	}
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return "?"
	}
	return "[" + strings.TrimSpace(string(comm)) + "]"
}

// threadLives reports whether a thread of process pid other than a zombie
// runs: a process whose first thread has ended lives on in the others,
// and one that execs from a thread other than its first shows that first
// thread as a zombie, or no process at all, until the kernel has given
// the exec'ing thread its pid.
func threadLives(pid int) bool {
	_, ok := liveThread(pid)
	return ok
}

// thread is a live thread of a process: its id, and its stat parsed as
// the process's (pid and start time are the thread's own there).
type thread struct {
	proc
	tid int
}

// liveThread returns a live thread of process pid other than its first,
// if it has one.
func liveThread(pid int) (thread, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	d, err := os.Open(dir)
	if err != nil {
		return thread{}, false
	}
	names, err := d.Readdirnames(-1)
	d.Close() // Best effort: read-only.
	if err != nil {
		return thread{}, false
	}
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil || tid == pid {
			continue
		}
		if p, ok := readStat(dir+name+"/stat", pid); ok && p.live() {
			return thread{p, tid}, true
		}
	}
	return thread{}, false
}

// workDir returns process pid's working directory, "" if it cannot be read.
func workDir(pid int) string {
	dir, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return ""
	}
	return dir
}
