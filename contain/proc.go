package contain

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// proc is one process as the OS shows it: /proc/PID/stat on Linux, a
// kinfo_proc from sysctl on macOS and FreeBSD.
type proc struct {
	pid, ppid, pgid, sid int
	state                byte   // as Linux writes it: 'Z' for a zombie
	exiting              bool   // the process has begun to exit and acts on no signal any more
	kthread              bool   // a kernel thread (Linux)
	start                uint64 // start time, in the OS's unit: with the pid, it names one process
	exitCode             int    // the wait status once exiting (as waitpid encodes it)
	sigIgnore, sigCatch  uint64 // signals ignored and caught, bit sig-1
	sigPending           uint64 // signals pending for its main thread, bit sig-1 (Linux)
	sigBlocked           uint64 // signals its main thread blocks, bit sig-1 (Linux, FreeBSD)
}

// live reports whether the process runs and has not begun to exit. A zombie
// holds a pid but runs nothing.
func (p proc) live() bool {
	return p.state != 'Z' && p.state != 'X' && p.state != 'x' && !p.exiting
}

// doomed reports whether the process is live but will not run its own
// code again: a signal has already ended it and it has not been scheduled
// to act on it yet. On Linux the kernel marks such a process, whatever
// the fatal signal was, with SIGKILL pending (complete_signal), and a
// SIGKILL sent now changes nothing. On a loaded machine that state can
// outlast a grace period.
func (p proc) doomed() bool {
	return p.sigPending&(uint64(1)<<(unix.SIGKILL-1)) != 0
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
	return p.sigCatch&sigMask(sigs) != 0
}

// sigMask returns sigs as a set, bit sig-1, as proc's masks hold them.
func sigMask(sigs []unix.Signal) uint64 {
	var mask uint64
	for _, sig := range sigs {
		mask |= 1 << (sig - 1)
	}
	return mask
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

// newcomers returns the processes that procs does not hold. A scan reads
// the processes one at a time on Linux, so it misses a child forked during
// the scan by a parent that exits before it is read; the next listing
// shows the child.
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

// joinArgs joins NUL-separated arguments with spaces; "" if there are none.
func joinArgs(b []byte) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(string(bytes.TrimRight(b, "\x00")), "\x00", " ")), " ")
}

// Member is a live process of a Group.
type Member struct {
	Pid     int
	Command string // its command line, arguments joined by spaces
}

// describe turns pids into Members, dropping those no longer live: also
// one that went between its check and the reading of its command line
// (which then cannot be read: "?").
func describe(pids []int) []Member {
	out := make([]Member, 0, len(pids))
	for _, pid := range pids {
		if !liveNow(pid) {
			continue
		}
		cmd := commandLine(pid)
		if cmd == "?" && !liveNow(pid) {
			continue
		}
		out = append(out, Member{Pid: pid, Command: cmd})
	}
	return out
}

// liveNow reports whether process pid is live (neither gone nor a zombie).
func liveNow(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.live()
}

// scanner shares scans of every process: callers that look at the same
// moment (a shutdown stops every terminal at once, the reaper and a
// group's watch wake on the same exit) share one scan, and a caller that
// can tell from a scan that it was read late enough (scanWhere) takes the
// last one. A scan reads every process of the machine: thousands of them
// take tens of milliseconds, and a command's end waits for one.
type scanner struct {
	seen func([]proc) // if not nil, called with every scan, before it is shared

	mu                sync.Mutex // guards the fields below; not held during a scan
	done              *sync.Cond // on mu: a scan has finished
	scanning          bool
	started, finished uint64 // scans begun and the last one done
	last              []proc
	err               error
}

func (s *scanner) init(seen func([]proc)) {
	s.seen = seen
	s.done = sync.NewCond(&s.mu)
}

// scan returns a scan that began after the call. The result is shared:
// read it, never change it.
func (s *scanner) scan() ([]proc, error) {
	procs, _, err := s.scanWhere(nil)
	return procs, err
}

// scanWhere returns the scan under way when it ends, or else the last
// one, if late(procs) says that it was read late enough; otherwise, as
// scan, one that began after the call (fresh). A nil late takes none.
func (s *scanner) scanWhere(late func([]proc) bool) (procs []proc, fresh bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if late != nil {
		for s.scanning {
			s.done.Wait()
		}
		if s.finished > 0 && s.err == nil && late(s.last) {
			return s.last, false, nil
		}
	}
	want := s.started + 1
	for s.finished < want {
		if s.scanning {
			s.done.Wait()
			continue
		}
		s.scanning = true
		s.started++
		gen := s.started
		s.mu.Unlock()
		procs, err := scanProcs()
		if err == nil && s.seen != nil {
			s.seen(procs)
		}
		s.mu.Lock()
		s.scanning = false
		s.last, s.err, s.finished = procs, err, gen
		s.done.Broadcast()
	}
	return s.last, true, s.err
}

// listProcs describes procs for an error: pid, command line and what
// /proc showed of each (its state, parent and session, whether it was
// exiting or doomed), at most five of them.
func listProcs(procs []proc) string {
	var b strings.Builder
	for i, p := range procs {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(procs)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d %q (state %c, parent %d, session %d", p.pid, commandLine(p.pid), p.state, p.ppid, p.sid)
		if p.exiting {
			b.WriteString(", exiting")
		}
		if p.doomed() {
			b.WriteString(", doomed")
		}
		b.WriteString(")")
	}
	return b.String()
}
