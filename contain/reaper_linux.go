package contain

import (
	"bytes"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// reaper reaps the orphans the kernel re-parents to the agent, whose
// reaper it is as a child subreaper (Subreaper mode) or as the init of its
// pid namespace (pid 1, in either mode: under unshare --pid --fork, or as
// a container's entry point). One goroutine makes a pass on each SIGCHLD,
// over the agent's children (childLister; a scan of every process where
// the kernel cannot list them).
//
// The rule. A pass reaps a zombie child of the agent only if nothing else
// in the program waits for it. That is decided from what a zombie keeps
// in /proc/PID/stat (its session) and the kernel's rules for sessions, not
// from how the rest of the program promises to start its children:
//
//  1. A registered child is left to its starter: a group's first process,
//     from its fork (forkExec) until the group's Close. While such a fork
//     is under way, every child that leads its own session is left, and
//     looked at again once the fork's child is registered.
//  2. A child in the agent's own session is left. Every child the agent
//     forks starts there (os/exec, pty.Start, syscall.ForkExec), and no
//     process of a terminal is ever there: forkExec starts every group in
//     a new session.
//  3. A child in a session that it does not lead was re-parented, and is
//     reaped: a child the agent forks stays in the agent's session or
//     leads a new one (setsid), and cannot join any other.
//  4. A child that leads its own session is reaped if the mode knows it as
//     a terminal's (a member a group recorded; a process in a terminal's
//     cgroup), or else if no pidfd in this process names it. An
//     os.Process holds a pidfd from Start until its Wait has reaped (Go
//     1.23, Linux 5.4), and ptyio holds one for each shell, so a child
//     started with os/exec in a session of its own (pty.Start) is left to
//     its Wait.
//
// What the rule leaves unreaped that nobody waits for: the orphan of a
// child the agent started itself outside the containment (rule 2), which
// the agent does not do; it stays a zombie until the agent exits and init
// reaps it. What rule 4 would take wrongly: a child the program starts in a
// session of its own with syscall.ForkExec, no pidfd and no registration,
// and waits for by pid; nothing in this program does.
//
// Concurrency: reap passes run on the run goroutine; mu is a leaf, held
// only to read or change the fields it guards, never across a scan, a
// fork or a wait.
type reaper struct {
	self, sid int                    // the agent's pid and session
	children  childLister            // the agent's children, as a pass reads them
	scan      func() ([]proc, error) // a scan of /proc begun after the call, where children fails
	known     func(p proc) bool      // the mode knows p as a terminal's process
	sigs      chan os.Signal         // SIGCHLD
	again     chan struct{}          // a pass left a child for a fork under way
	stop      chan struct{}          // closed by close
	done      chan struct{}          // closed when run returns

	mu         sync.Mutex // guards the fields below
	registered map[int]bool
	forking    int  // forkExec calls between fork and registration
	deferred   bool // a pass left a session leader while forking > 0
}

// startReaper starts reaping; close stops it.
func startReaper(scan func() ([]proc, error), known func(proc) bool) (*reaper, error) {
	self, ok := readProc(os.Getpid())
	if !ok {
		return nil, errors.New("read /proc/self/stat")
	}
	r := &reaper{
		self: self.pid, sid: self.sid, children: newChildLister(self.pid), scan: scan, known: known,
		sigs: make(chan os.Signal, 1), again: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
		registered: make(map[int]bool),
	}
	signal.Notify(r.sigs, unix.SIGCHLD)
	go r.run()
	return r, nil
}

func (r *reaper) run() {
	defer close(r.done)
	for {
		r.pass() // the first pass takes the zombies there already (pid 1)
		select {
		case <-r.sigs:
		case <-r.again:
		case <-r.stop:
			r.pass()
			return
		}
	}
}

// close makes a last pass and stops reaping. A nil reaper does nothing.
func (r *reaper) close() {
	if r == nil {
		return
	}
	close(r.stop)
	<-r.done
	signal.Stop(r.sigs)
}

// forkExec is syscall.ForkExec for a group's first process: the child
// starts in a new session (rule 2) and is registered (rule 1) until
// release. A nil reaper only forks.
func (r *reaper) forkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	a := inNewSession(attr)
	if r == nil {
		return syscall.ForkExec(argv0, argv, a)
	}
	r.mu.Lock()
	r.forking++
	r.mu.Unlock()
	pid, err := syscall.ForkExec(argv0, argv, a)
	r.mu.Lock()
	r.forking--
	if err == nil {
		r.registered[pid] = true
	}
	again := r.forking == 0 && r.deferred
	if again {
		r.deferred = false
	}
	r.mu.Unlock()
	if again {
		select {
		case r.again <- struct{}{}:
		default: // a pass is due already
		}
	}
	return pid, err
}

// release ends the registration of a group's first process, once its
// starter has reaped it.
func (r *reaper) release(pid int) {
	if r == nil || pid == 0 {
		return
	}
	r.mu.Lock()
	delete(r.registered, pid)
	r.mu.Unlock()
}

func (r *reaper) isRegistered(pid int) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.registered[pid]
}

// starter reports whether p is left to its starter by rule 1: registered,
// or, while a group's first process is being forked, possibly that one.
func (r *reaper) starter(p proc) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.registered[p.pid] {
		return true
	}
	if r.forking > 0 && p.sid == p.pid {
		r.deferred = true
		return true
	}
	return false
}

// verdict is what the rule says of a child of the agent.
type verdict int

const (
	leave        verdict = iota // another part of the program waits for it
	take                        // an orphan: the agent's to reap (or kill)
	takeIfUnheld                // an orphan unless a pidfd of this process names it
)

// judge applies the rule to p, a child of the agent, live or not.
func (r *reaper) judge(p proc) verdict {
	switch {
	case r.starter(p), p.sid == r.sid:
		return leave // rules 1 and 2
	case p.sid != p.pid:
		return take // rule 3
	case r.known != nil && r.known(p):
		return take // rule 4
	}
	return takeIfUnheld // rule 4
}

// takes returns the children of the agent among procs, zombies or the
// others, that the rule gives the agent to reap (or to kill).
func (r *reaper) takes(procs []proc, zombies bool) []proc {
	var out []proc
	var held map[int]bool // read once, after the scan and before any pidfd of ours
	var heldErr error
	for _, p := range procs {
		if p.ppid != r.self || p.zombie() != zombies {
			continue
		}
		switch r.judge(p) {
		case leave:
			continue
		case takeIfUnheld:
			if held == nil && heldErr == nil {
				held, heldErr = heldPidfds()
			}
			if heldErr != nil || held[p.pid] {
				continue // unknown or waited for: left for now
			}
		}
		out = append(out, p)
	}
	return out
}

// pass reaps every zombie child that the rule gives the agent: read
// from the agent's children files, or from a scan of every process where
// they cannot be trusted.
func (r *reaper) pass() {
	procs, ok := r.children.list()
	if !ok {
		var err error
		if procs, err = r.scan(); err != nil {
			return // the next SIGCHLD tries again
		}
	}
	for _, p := range r.takes(procs, true) {
		reapZombie(p, r.self)
	}
}

// reapZombie reaps zombie p, and only p: through a pidfd opened, then
// checked against the scan, so that a pid reused since is never waited for.
func reapZombie(p proc, parent int) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		return // gone
	}
	defer unix.Close(fd) // Best effort: a pidfd only waited on.
	if now, ok := readProc(p.pid); !ok || now.start != p.start || !now.zombie() || now.ppid != parent {
		return
	}
	var info unix.Siginfo
	// Best effort: an error means someone reaped it after all.
	_ = unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil)
}

// heldPidfds returns the pids that the pidfds open in this process name
// (their /proc/self/fdinfo "Pid:" line).
func heldPidfds() (map[int]bool, error) {
	const dir = "/proc/self/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close() // Best effort: read-only.
	if err != nil {
		return nil, err
	}
	held := make(map[int]bool)
	for _, name := range names {
		// "anon_inode:[pidfd]"; "pidfd:[…]" where pidfs names it so.
		if link, err := os.Readlink(dir + name); err != nil || !strings.Contains(link, "pidfd") {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + name)
		if err != nil {
			continue // closed meanwhile
		}
		for line := range bytes.Lines(info) {
			if v, ok := bytes.CutPrefix(line, []byte("Pid:")); ok {
				if pid, err := strconv.Atoi(string(bytes.TrimSpace(v))); err == nil && pid > 0 {
					held[pid] = true
				}
			}
		}
	}
	return held, nil
}
