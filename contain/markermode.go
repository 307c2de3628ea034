package contain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// markerMode is Subreaper and Session mode: the processes of a terminal
// are found by looking at every process (markerGroup), and nothing holds
// them but the agent's looks. What differs between the two is in reap,
// facts and undo.
//
// Lock order: none. markerMode.mu, markerCache.mu, scanner.mu, the
// reaper's mu and each markerGroup.mu are leaves: whoever holds one takes
// no other, and none is held across a fork, a sleep or a scan.
type markerMode struct {
	inst    instance
	self    int // the agent's pid
	sid     int // the agent's session
	scans   scanner
	markers markerCache
	// reap reaps the orphans the kernel gives the agent, in Subreaper
	// mode; nil in Session mode, where there are none.
	reap orphanReaper
	// facts reads what the groups need to know of the processes among
	// procs that their session and ancestry do not place, by pid: the
	// agent's orphans (Subreaper), any process (Session).
	facts func(procs []proc) map[int]procFacts
	undo  func() error // undoes what the mode set up; may be nil

	mu     sync.Mutex // guards groups
	groups map[*markerGroup]bool
	gaveUp givenUp // what its kills gave up on (see ending)
}

// orphanReaper is the reaper of Subreaper mode, as the groups use it.
type orphanReaper interface {
	// forkExec starts a group's first process in a new session, and
	// leaves it to its starter until release.
	forkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error)
	release(pid int)
	isRegistered(pid int) bool
	// takes returns the children of the agent among procs (zombies, or
	// the others) that the reaper's rule gives it to reap or kill.
	takes(procs []proc, zombies bool) []proc
	close()
}

// procFacts is what a group needs to know of a live process that its
// session and ancestry do not place: its markers and the terminals it
// holds.
type procFacts struct {
	start      uint64
	ttys       [3]uint64 // device numbers of its stdin, stdout and stderr, if terminals (Subreaper)
	inst, term string    // its markers, unless it holds a group's terminal
}

// newMarkerMode returns a mode with no reaper, no facts and no groups;
// the caller sets what differs. patience is how long the marker cache
// reads an empty environment again.
func newMarkerMode(inst instance, patience time.Duration) *markerMode {
	s := &markerMode{inst: inst, self: os.Getpid(), groups: make(map[*markerGroup]bool)}
	s.sid, _ = unix.Getsid(0) // Best effort: this process is there.
	s.markers = markerCache{patience: patience, m: make(map[int]marker)}
	s.scans.init(s.markers.forget)
	return s
}

func (s *markerMode) newGroup(n int64) (Group, error) { return newMarkerGroup(s, n), nil }

// prepare does nothing: a marker group is made at no cost.
func (s *markerMode) prepare() {}

// forkExec starts a group's first process in a new session: through the
// reaper in Subreaper mode, which leaves it to its starter.
func (s *markerMode) forkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	if s.reap != nil {
		return s.reap.forkExec(argv0, argv, attr)
	}
	return syscall.ForkExec(argv0, argv, inNewSession(attr))
}

// release ends what forkExec started for the process pid, once its
// starter has reaped it.
func (s *markerMode) release(pid int) {
	if s.reap != nil && pid != 0 {
		s.reap.release(pid)
	}
}

// inNewSession returns a copy of attr with Setsid set.
func inNewSession(attr *syscall.ProcAttr) *syscall.ProcAttr {
	a := *attr
	sys := syscall.SysProcAttr{}
	if a.Sys != nil {
		sys = *a.Sys
	}
	sys.Setsid = true
	a.Sys = &sys
	return &a
}

// snapshot returns the groups started so far.
func (s *markerMode) snapshot() []*markerGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	groups := make([]*markerGroup, 0, len(s.groups))
	for g := range s.groups {
		groups = append(groups, g)
	}
	return groups
}

func (s *markerMode) add(g *markerGroup) {
	s.mu.Lock()
	s.groups[g] = true
	s.mu.Unlock()
}

func (s *markerMode) remove(g *markerGroup) {
	s.mu.Lock()
	delete(s.groups, g)
	s.mu.Unlock()
}

// killAll kills every process of the instance: every member of every
// group, every child of the agent that its reaper would reap, and every
// process with the instance's marker, until none is left (at most
// timeout, see ending).
func (s *markerMode) killAll(timeout time.Duration) error {
	var errs []error
	for end := newEnding(timeout, &s.gaveUp); ; {
		began := time.Now()
		found, err := s.kill()
		if err != nil {
			errs = append(errs, err)
		}
		if len(found) == 0 {
			return errors.Join(errs...)
		}
		if left := end.left(began, found); len(left) > 0 {
			return errors.Join(append(errs, fmt.Errorf("containment: %d processes left after %v: %s", len(left), end.tried(), listProcs(left)))...)
		}
		time.Sleep(2 * time.Millisecond) // shutdown only: SIGKILL acts within milliseconds
	}
}

// close kills every process of the instance (killAll), then stops reaping
// and undoes what the mode set up.
func (s *markerMode) close(timeout time.Duration) error {
	var errs []error
	if err := s.killAll(timeout); err != nil {
		errs = append(errs, err)
	}
	if s.reap != nil {
		s.reap.close()
	}
	if s.undo != nil {
		if err := s.undo(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kill sends SIGKILL to every live process of the instance and returns
// those it found. A process's marker is read once (markerCache), not at
// every look: a look at shutdown, on a machine of thousands of processes,
// reads the environments of the newcomers only.
func (s *markerMode) kill() ([]proc, error) {
	procs, err := s.scans.scan()
	if err != nil {
		return nil, err
	}
	facts := s.facts(procs)
	victims := make(map[int]proc)
	parent := parents(procs)
	for _, g := range s.snapshot() {
		members := g.attribute(procs, parent, facts)
		for _, p := range members {
			victims[p.pid] = p
		}
		// Noted before the kill, as Kill does: once it is sent, every
		// member is doomed.
		g.note(slices.ContainsFunc(members, func(p proc) bool { return p.live() && !p.doomed() }))
	}
	if s.reap != nil {
		for _, p := range s.reap.takes(procs, false) {
			victims[p.pid] = p
		}
	}
	inst := s.inst.String()
	for _, p := range procs {
		if p.zombie() || p.kthread {
			continue // no environment, and an empty one is read at every look
		}
		if v, _ := s.markers.read(p, 0); v == inst {
			victims[p.pid] = p
		}
	}
	var errs []error
	var found []proc
	for _, p := range ancestorsFirst(victims, procs, parent) {
		if p.zombie() {
			continue // gone but for its status
		}
		found = append(found, p)
		start := p.start
		if _, err := signalProcess(p.pid, []unix.Signal{unix.SIGKILL}, byKill, func(q proc) bool { return q.start == start }); err != nil {
			errs = append(errs, err)
		}
	}
	return found, errors.Join(errs...)
}

// marker is a process's markers as first read.
type marker struct {
	start      uint64
	inst, term string
}

// markerCache holds the markers of processes, read once per process (pid
// and start time).
type markerCache struct {
	patience time.Duration // how long an empty environment is read again

	mu sync.Mutex // guards m; never held while an environment is read
	m  map[int]marker
}

// get returns the markers of live process p. A process in the middle of
// an exec shows an empty environment for a moment (longer on a loaded
// machine), so an empty one is read again for c.patience, and is not
// remembered: it is read again at the next look. One that is not ours to
// read has no marker, and that is remembered.
func (c *markerCache) get(p proc) (inst, term string) { return c.read(p, c.patience) }

// read is get with an empty environment read again for patience.
func (c *markerCache) read(p proc, patience time.Duration) (inst, term string) {
	c.mu.Lock()
	m, ok := c.m[p.pid]
	c.mu.Unlock()
	if ok && m.start == p.start {
		return m.inst, m.term
	}
	m = marker{start: p.start}
	for deadline := time.Now().Add(patience); ; time.Sleep(500 * time.Microsecond) {
		env, err := environ(p.pid)
		if errors.Is(err, fs.ErrPermission) {
			break // another user's
		}
		if err != nil {
			return "", "" // gone
		}
		if len(env) > 0 {
			m.inst, _ = lookupEnv(env, InstanceEnv)
			m.term, _ = lookupEnv(env, TerminalEnv)
			break
		}
		if !time.Now().Before(deadline) {
			return "", "" // unknown for now: read again next time
		}
	}
	c.mu.Lock()
	c.m[p.pid] = m
	c.mu.Unlock()
	return m.inst, m.term
}

// forget drops the markers of processes that are not in procs.
func (c *markerCache) forget(procs []proc) {
	live := make(map[int]uint64, len(procs))
	for _, p := range procs {
		live[p.pid] = p.start
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid, m := range c.m {
		if start, ok := live[pid]; !ok || start != m.start {
			delete(c.m, pid)
		}
	}
}
