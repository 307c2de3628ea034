package contain

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// subreaper is Subreaper mode: the agent is a child subreaper, so orphans
// are re-parented to it, its reaper collects them (see reaper for the
// rule), and the processes of a terminal are found in /proc (markerGroup).
//
// Lock order: none. subreaper.mu, markerCache.mu, scanner.mu, reaper.mu
// and each markerGroup.mu are leaves: whoever holds one takes no other,
// and none is held across a fork, a sleep or a read of /proc.
type subreaper struct {
	inst    instance
	self    int
	scans   scanner
	markers markerCache
	reap    *reaper

	mu     sync.Mutex // guards groups
	groups map[*markerGroup]bool
}

func openSubreaper(inst instance) (*subreaper, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become a child subreaper: %w", err)
	}
	s := &subreaper{inst: inst, self: os.Getpid(), groups: make(map[*markerGroup]bool)}
	s.scans.init()
	s.markers.m = make(map[int]marker)
	scan := func() ([]proc, error) {
		procs, err := s.scans.scan()
		if err == nil {
			s.markers.forget(procs)
		}
		return procs, err
	}
	var err error
	if s.reap, err = startReaper(scan, s.known); err != nil {
		return nil, errors.Join(err, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0))
	}
	return s, nil
}

// snapshot returns the groups started so far.
func (s *subreaper) snapshot() []*markerGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	groups := make([]*markerGroup, 0, len(s.groups))
	for g := range s.groups {
		groups = append(groups, g)
	}
	return groups
}

func (s *subreaper) add(g *markerGroup) {
	s.mu.Lock()
	s.groups[g] = true
	s.mu.Unlock()
}

func (s *subreaper) remove(g *markerGroup) {
	s.mu.Lock()
	delete(s.groups, g)
	s.mu.Unlock()
}

// known reports whether a group recorded p as a member: rule 4 of the
// reaper.
func (s *subreaper) known(p proc) bool {
	for _, g := range s.snapshot() {
		if g.recorded(p) {
			return true
		}
	}
	return false
}

// childFacts is what a group needs to know of a live child of the agent
// that no group started (an orphan, mostly): its markers and the
// terminals it holds.
type childFacts struct {
	start      uint64
	ttys       [3]uint64 // device numbers of its stdin, stdout and stderr, if terminals
	inst, term string    // its markers, unless it holds a group's terminal
}

// children reads what the groups need to know of the live children of
// the agent among procs that no group started. Nothing is locked
// meanwhile: reading a marker can take a moment (see markerCache.get).
func (s *subreaper) children(procs []proc) map[int]childFacts {
	ttys := make(map[uint64]bool)
	for _, g := range s.snapshot() {
		if tty := g.terminal(); tty != 0 {
			ttys[tty] = true
		}
	}
	out := make(map[int]childFacts)
	for _, p := range procs {
		if p.ppid != s.self || !p.live() || s.reap.isRegistered(p.pid) {
			continue
		}
		o := childFacts{start: p.start, ttys: terminalsOf(p.pid)}
		if !ttys[o.ttys[0]] && !ttys[o.ttys[1]] && !ttys[o.ttys[2]] {
			// An orphan that holds a group's terminal is that group's,
			// whatever its environment says (or cannot say yet, in the
			// middle of an exec).
			o.inst, o.term = s.markers.get(p)
		}
		out[p.pid] = o
	}
	return out
}

// terminalsOf returns the device numbers of process pid's standard input,
// output and error where they are character devices, 0 elsewhere.
func terminalsOf(pid int) [3]uint64 {
	var out [3]uint64
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	for i, fd := range []string{"0", "1", "2"} {
		var st unix.Stat_t
		if unix.Stat(dir+fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
			out[i] = st.Rdev
		}
	}
	return out
}

// killAll kills every process of the instance: every member of every
// group, every child of the agent that its reaper would reap, and every
// process with the instance's marker, until none is left (at most
// timeout).
func (s *subreaper) killAll(timeout time.Duration) error {
	var errs []error
	for deadline := time.Now().Add(timeout); ; {
		left, err := s.kill()
		if err != nil {
			errs = append(errs, err)
		}
		if left == 0 {
			return errors.Join(errs...)
		}
		if time.Now().After(deadline) {
			return errors.Join(append(errs, fmt.Errorf("subreaper: %d processes left after %v", left, timeout))...)
		}
		time.Sleep(2 * time.Millisecond) // shutdown only: SIGKILL acts within milliseconds
	}
}

// close kills every process of the instance (killAll), then stops reaping.
func (s *subreaper) close(timeout time.Duration) error {
	var errs []error
	if err := s.killAll(timeout); err != nil {
		errs = append(errs, err)
	}
	s.reap.close()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("stop being a child subreaper: %w", err))
	}
	return errors.Join(errs...)
}

// kill sends SIGKILL to every live process of the instance and returns
// how many it found.
func (s *subreaper) kill() (int, error) {
	procs, err := scanProcs()
	if err != nil {
		return 0, err
	}
	children := s.children(procs)
	victims := make(map[int]proc)
	for _, g := range s.snapshot() {
		for _, p := range g.attribute(procs, children) {
			victims[p.pid] = p
		}
	}
	for _, p := range s.reap.takes(procs, false) {
		victims[p.pid] = p
	}
	inst := s.inst.String()
	for _, p := range procs {
		if v, _ := environValue(p.pid, InstanceEnv); v == inst {
			victims[p.pid] = p
		}
	}
	var errs []error
	n := 0
	for _, p := range victims {
		if p.zombie() {
			continue // gone but for its status
		}
		n++
		start := p.start
		if _, err := signalProcess(p.pid, []unix.Signal{unix.SIGKILL}, byKill, func(q proc) bool { return q.start == start }); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// marker is a process's markers as first read.
type marker struct {
	start      uint64
	inst, term string
}

// markerCache holds the markers of the agent's children, read once per
// process (pid and start time).
type markerCache struct {
	mu sync.Mutex // guards m; never held while /proc is read
	m  map[int]marker
}

// get returns the markers of live process p. A process in the middle of
// an exec shows an empty environment for a moment (longer on a loaded
// machine), so an empty one is read again for a while, and is not
// remembered: it is read again at the next look.
func (c *markerCache) get(p proc) (inst, term string) {
	c.mu.Lock()
	m, ok := c.m[p.pid]
	c.mu.Unlock()
	if ok && m.start == p.start {
		return m.inst, m.term
	}
	m = marker{start: p.start}
	for deadline := time.Now().Add(20 * time.Millisecond); ; time.Sleep(500 * time.Microsecond) {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/environ")
		if err != nil {
			return "", "" // gone
		}
		if len(env) > 0 {
			m.inst, _ = lookupEnv(env, InstanceEnv)
			m.term, _ = lookupEnv(env, TerminalEnv)
			break
		}
		if time.Now().After(deadline) {
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

// scanner shares scans of /proc: callers that look at the same moment (a
// shutdown stops every terminal at once, the reaper and a group's watch
// wake on the same exit) share one scan.
type scanner struct {
	mu                sync.Mutex // guards the fields below; not held during a scan
	done              *sync.Cond // on mu: a scan has finished
	scanning          bool
	started, finished uint64 // scans begun and the last one done
	last              []proc
	err               error
}

func (s *scanner) init() { s.done = sync.NewCond(&s.mu) }

// scan returns a scan of /proc that began after the call. The result is
// shared: read it, never change it.
func (s *scanner) scan() ([]proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
		s.mu.Lock()
		s.scanning = false
		s.last, s.err, s.finished = procs, err, gen
		s.done.Broadcast()
	}
	return s.last, s.err
}
