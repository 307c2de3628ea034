// Package contain holds every process a terminal starts, however it
// detaches, so that stopping a terminal stops all of them and no process
// outlives the agent that started it.
//
// A Containment is opened once per agent instance, in one of three modes:
//
//   - Cgroup (Linux): a cgroup v2 per instance, below the agent's own
//     cgroup, and one per terminal below that. Each terminal's first
//     process is born inside its cgroup (CLONE_INTO_CGROUP), so nothing
//     it forks can leave. The kernel reports when a cgroup is no longer
//     populated; one inotify descriptor watches every terminal's
//     cgroup.events. cgroup.kill ends what is left.
//   - Subreaper (Linux): where cgroups cannot be created (an unprivileged
//     container), the agent becomes a child subreaper, so orphans are
//     re-parented to it rather than to init. A process belongs to a
//     terminal by an inherited environment marker, by the terminal's
//     process session, and by ancestry recorded when it was first seen.
//     A reaper collects the orphans, by a rule that never takes a child
//     that another part of the program waits for (see reaper). An agent
//     that is its pid namespace's init (pid 1) reaps the same way in
//     Cgroup and Session mode.
//   - Session (every OS; the only one on macOS and FreeBSD): the
//     terminal's process session and group, ancestry recorded when first
//     seen, and the environment marker of any process, read from /proc on
//     Linux and from sysctl (kern.proc, KERN_PROCARGS2, kern.proc.env)
//     elsewhere. Nothing is re-parented to the agent: a process that
//     leaves the session, drops the marker and whose parent exits before
//     the agent has looked is not held (see openSession).
//
// On Linux every mode needs a /proc of the agent's own pid namespace;
// Open refuses to work with another's (see ownProc).
//
// Every mode adds the marker to the environment of every terminal:
// SHELLAGENT_INSTANCE (the agent's pid namespace, pid and start time) and
// SHELLAGENT_TERMINAL (the terminal's number in that instance). Sweep
// removes what agents killed with SIGKILL left behind, and never touches
// the work of a live agent.
//
// Files: contain.go (the API), adopt.go and adopt_linux.go (taking
// a group over after an exec in place), open_linux.go and open_bsd.go (which modes
// an OS has), cgroup_linux.go, spare_linux.go and watch_linux.go (cgroup mode),
// markermode.go and markergroup.go (what Subreaper and Session mode
// share: their groups), subreaper_linux.go, reaper_linux.go and
// children_linux.go (reaping orphans, the rule that says which, and
// where a pass finds them), session.go, send.go with
// pidref_*.go (signalling one process and telling whether it was
// reached), proc.go with procfs_linux.go, proc_darwin.go, proc_freebsd.go
// and procargs.go (reading processes), ending.go (when processes killed
// at Close or by the sweep are given up on), sweep.go.
package contain

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Mode is how a Containment holds the processes of a terminal.
type Mode string

// The modes. Auto chooses Cgroup where it works, else Subreaper, on
// Linux; Session on macOS and FreeBSD, which have neither.
const (
	Auto      Mode = "auto"
	Cgroup    Mode = "cgroup"
	Subreaper Mode = "subreaper"
	Session   Mode = "session"
)

// ParseMode parses a --containment value. A mode this OS lacks parses;
// Open refuses it, saying why.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Auto, Cgroup, Subreaper, Session:
		return m, nil
	}
	return "", errors.New("want auto, cgroup, subreaper or session")
}

// Environment variables that mark every process of a terminal.
const (
	InstanceEnv = "SHELLAGENT_INSTANCE" // PIDNS-PID-START[-SCOPE] of the agent
	TerminalEnv = "SHELLAGENT_TERMINAL" // the terminal's number in the agent
)

// SweepScopeEnv names the scope of an agent's sweep when set in its
// environment (letters and digits, at most 32): the agent sweeps only what
// dead instances of the same scope left, and agents of another scope (or
// of none) leave its own leftovers alone. A test suite sets one of its
// own, so that agents of other suites, or of the user, running beside it
// never sweep what it checks.
const SweepScopeEnv = "SHELLAGENT_SWEEP_SCOPE"

// CloseTimeout bounds how long Close waits for killed processes to go;
// twice that for processes a SIGKILL has reached that have yet to run to
// their end, as on a loaded machine (see ending).
const CloseTimeout = 2 * time.Second

// A Containment holds the processes of every terminal of one agent
// instance. Its methods are safe for concurrent use.
type Containment struct {
	mode    Mode
	inst    instance
	nogroup error // in Auto mode, why cgroups could not be used
	next    atomic.Int64
	m       modeImpl
}

// modeImpl is a mode's side of a Containment.
type modeImpl interface {
	newGroup(n int64) (Group, error)
	prepare()
	killAll(timeout time.Duration) error
	close(timeout time.Duration) error
}

// Open sets up containment for this process. Mode Cgroup fails if the
// agent cannot create cgroups below its own and start processes inside
// them; Auto then falls back to Subreaper. On Linux every mode fails if
// /proc is not of the agent's pid namespace. A mode the OS lacks (Cgroup
// and Subreaper outside Linux) fails, saying so. Close undoes Open.
//
// One Containment at a time may be open in a process: what it sets up is
// the process's own (the instance's cgroup, named for the process; the
// subreaper flag; the reaper of orphans). Open fails while another is.
func Open(mode Mode) (*Containment, error) {
	if err := ownProc(); err != nil {
		// Subreaper mode finds a terminal's processes in /proc. Cgroup
		// mode lists them from cgroup.procs, in this namespace's pids,
		// but reads /proc to tell a live process from one exiting (and
		// so whether a signal reached it), to name its command for /ps,
		// to check a pid before signalling it, and, as the namespace's
		// init (always, under unshare --pid --fork), to reap orphans.
		// Through another namespace's /proc each of those reads is of
		// another process; translating every one through a pidfd would
		// be a second way to read /proc, for a setup that misleads the
		// commands' own ps and kill as much. One flag fixes it.
		return nil, err
	}
	inst, err := self()
	if err != nil {
		return nil, err
	}
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, fmt.Errorf("containment mode %q: %w", mode, err)
	}
	if !held.CompareAndSwap(false, true) {
		return nil, errors.New("open containment: one is open in this process already")
	}
	c := &Containment{inst: inst}
	if err := c.open(mode); err != nil {
		held.Store(false)
		return nil, err
	}
	return c, nil
}

// held is set while a Containment is open in this process (Open).
var held atomic.Bool

// Mode returns the mode in use: Cgroup, Subreaper or Session.
func (c *Containment) Mode() Mode { return c.mode }

// CgroupError says why Auto mode could not use cgroups, or is nil.
func (c *Containment) CgroupError() error { return c.nogroup }

// A Group is the processes of one terminal. Start its first process with
// ForkExec; every process that one starts, however it detaches, belongs to
// the group. Its methods are safe for concurrent use.
type Group interface {
	// ForkExec starts the group's first process as syscall.ForkExec does,
	// inside the group, in a new session (it sets attr.Sys.Setsid), with
	// the marker added to attr.Env. The caller waits for that process and
	// reaps it itself, before Close.
	ForkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (pid int, err error)
	// Done is closed once ForkExec has started a process and no live
	// process of the group remains. A zombie is not live.
	Done() <-chan struct{}
	// Empty reports, from a fresh look, whether Done is closed, closing it
	// if the group has emptied.
	Empty() bool
	// Members lists the live processes of the group, oldest first where
	// the mode knows their order.
	Members() ([]Member, error)
	// Signal sends sigs, in order, to every live process of the group, and
	// to every process that appeared meanwhile, until the list is stable
	// and, on Linux and FreeBSD, no process it signalled holds them
	// blocked (for up to a second: such a process may fork before it
	// takes them). It reports whether they reached a process that was
	// alive then (not a zombie, and not already exiting).
	Signal(sigs ...unix.Signal) (reached bool, err error)
	// Kill sends SIGKILL to every process of the group at once, and
	// reports whether one of them was alive and not already ended by an
	// earlier signal it has yet to act on (a SIGTERM that a loaded
	// machine has not let it die of is no reason to report SIGKILL).
	Kill() (reached bool, err error)
	// Killed reports whether a SIGKILL reached a process of the group that
	// was alive and not already ended by an earlier signal, whichever
	// sent it: Kill, or the Containment's KillAll or Close. A stopper that
	// reports the last signal it had to send asks it, for a kill it did
	// not send itself.
	Killed() bool
	// Close releases the group once it is done (a cgroup is removed). A
	// group that still has processes must be killed first.
	Close() error
}

// killRecord is a Group's Killed: set by whatever sends the group's
// processes SIGKILL, once that reached one of them. Safe for concurrent
// use.
type killRecord struct{ killed atomic.Bool }

func (k *killRecord) Killed() bool { return k.killed.Load() }

// note records a SIGKILL that reached a live process of the group.
func (k *killRecord) note(reached bool) {
	if reached {
		k.killed.Store(true)
	}
}

// NewGroup returns a new, empty group.
func (c *Containment) NewGroup() (Group, error) {
	n := c.next.Add(1)
	g, err := c.m.newGroup(n)
	if err != nil {
		return nil, fmt.Errorf("new terminal group %d: %w", n, err)
	}
	return g, nil
}

// Prepare has the next group made ahead of its NewGroup, on a goroutine
// of its own, where the mode has something to make (cgroup mode: its
// cgroup, see spare_linux.go); NewGroup takes it then. A NewGroup that
// finds none prepared makes its group itself. A launcher calls Prepare
// once the process it started has got going, so that the work does not
// slow that start (ptyio.Local). After Close it does nothing.
func (c *Containment) Prepare() { c.m.prepare() }

// KillAll sends SIGKILL to every process of every group and waits until
// they are gone, at most CloseTimeout. Groups go on working: each reports
// Done as its processes die, and Killed if the kill reached one of them.
func (c *Containment) KillAll() error { return c.m.killAll(CloseTimeout) }

// Close kills every process still held, waits until they are gone (at
// most CloseTimeout; not again for processes a KillAll gave up on with
// their SIGKILL pending, and still so), removes this instance's cgroups
// and stops watching and reaping. Call it once, last.
func (c *Containment) Close() error {
	defer held.Store(false)
	return c.m.close(CloseTimeout)
}

// instance names one run of an agent: its pid namespace, pid and start
// time, so that a reused pid is never taken for it, and its sweep scope.
type instance struct {
	ns    uint64 // inode of the pid namespace; 0 where there are none
	pid   int
	start uint64
	scope string // SweepScopeEnv; "" for none
}

func self() (instance, error) {
	ns, err := pidNamespace()
	if err != nil {
		return instance{}, err
	}
	p, ok := readProc(os.Getpid())
	if !ok {
		return instance{}, errors.New("read this process's own start time")
	}
	scope := os.Getenv(SweepScopeEnv)
	if !validScope(scope) {
		return instance{}, fmt.Errorf("%s=%q: want at most 32 letters and digits", SweepScopeEnv, scope)
	}
	return instance{ns: ns, pid: p.pid, start: p.start, scope: scope}, nil
}

// validScope reports whether s may be a sweep scope: "" or at most 32
// ASCII letters and digits, so that it fits an instance's name.
func validScope(s string) bool {
	return len(s) <= 32 && !strings.ContainsFunc(s, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	})
}

func (i instance) String() string {
	if i.scope != "" {
		return fmt.Sprintf("%d-%d-%d-%s", i.ns, i.pid, i.start, i.scope)
	}
	return fmt.Sprintf("%d-%d-%d", i.ns, i.pid, i.start)
}

func parseInstance(s string) (instance, bool) {
	f := strings.Split(s, "-")
	if len(f) != 3 && len(f) != 4 {
		return instance{}, false
	}
	ns, err1 := strconv.ParseUint(f[0], 10, 64)
	pid, err2 := strconv.Atoi(f[1])
	start, err3 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
		return instance{}, false
	}
	inst := instance{ns: ns, pid: pid, start: start}
	if len(f) == 4 {
		if f[3] == "" || !validScope(f[3]) {
			return instance{}, false
		}
		inst.scope = f[3]
	}
	return inst, true
}

// alive reports whether the instance's agent still runs. An agent that
// has begun to exit is alive: it cleans up after itself. So is one whose
// first thread is a zombie while another runs: an agent upgraded in place
// execs from whichever thread, and the kernel shows its first thread so
// until the exec'ing thread has its pid.
func (i instance) alive() bool {
	p, ok := readProc(i.pid)
	return ok && p.start == i.start && (!p.zombie() || threadLives(i.pid))
}

func (i instance) env() []string { return []string{InstanceEnv + "=" + i.String()} }

// withEnv returns env with the entries of add, replacing entries of the
// same names.
func withEnv(env, add []string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.ContainsFunc(add, func(a string) bool { return strings.HasPrefix(a, k+"=") })
	})
	return append(out, add...)
}

// holdWait bounds how long signalUntilStable waits for a process that
// holds the signals it was sent (it blocks them) to take them: until it
// does, it may fork, and the child does not get them. dash blocks every
// signal from just before it forks each command until the child has
// exec'd it, so a stop that comes then finds only the shell, and the
// command is forked after the last list. A process that holds them longer
// is left to SIGKILL after the grace. holdPoll is how often it is looked at.
const (
	holdWait = time.Second
	holdPoll = 5 * time.Millisecond
)

// signalUntilStable sends sigs to every pid that list returns, lists
// again, and signals the newcomers, until a list brings none (or
// maxRounds: a fork loop that ignores the signals is left to SIGKILL) and
// no process it signalled holds them still (holdWait).
func signalUntilStable(list func() ([]int, error), sigs []unix.Signal, belongs func(proc) bool) (bool, error) {
	const maxRounds = 20
	seen := make(map[int]bool)
	reached := false
	var errs []error
	start := time.Now()
	for rounds := 0; rounds < maxRounds; {
		// Looked at before the list: a child forked while its parent
		// held the signals is in every list made after it took them.
		held := holding(seen, sigs)
		pids, err := list()
		if err != nil {
			errs = append(errs, err)
			break
		}
		fresh := false
		for _, pid := range pids {
			if seen[pid] {
				continue
			}
			seen[pid], fresh = true, true
			// One process reached answers for the group: the others are
			// not looked at again.
			how := byLook
			if reached {
				how = byLive
			}
			r, err := signalProcess(pid, sigs, how, belongs)
			reached = reached || r
			if err != nil {
				errs = append(errs, err)
			}
		}
		switch {
		case fresh:
			rounds++
		case !held || time.Since(start) >= holdWait:
			return reached, errors.Join(errs...)
		default:
			time.Sleep(holdPoll)
		}
	}
	return reached, errors.Join(errs...)
}

// holding reports whether one of pids is live and holds one of sigs
// pending, blocked (heldSignals; never on macOS, whose procs have no
// sigBlocked).
func holding(pids map[int]bool, sigs []unix.Signal) bool {
	mask := sigMask(sigs)
	for pid := range pids {
		// Only a signal that every thread blocks is held, the main
		// thread's too: its stat, read in about a third of the time of
		// a status here, rules out most processes.
		p, ok := readProc(pid)
		if ok && p.live() && p.sigBlocked&mask != 0 && heldSignals(p)&mask != 0 {
			return true
		}
	}
	return false
}
