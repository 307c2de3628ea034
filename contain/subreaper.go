package contain

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// subreaper is Subreaper mode: the agent is a child subreaper, and the
// processes of a terminal are found in /proc.
//
// Reaping: orphans re-parented to the agent are reaped by one goroutine on
// SIGCHLD. It reaps only zombie children that no part of the program
// waits for: a group's first process is registered as waited for while
// the fork that starts it holds forks for reading, and each reaping pass
// holds forks for writing, so no pass can see such a child unregistered.
// A program in Subreaper mode must start its other children the same way,
// or not at all.
type subreaper struct {
	inst instance
	self int

	forks sync.RWMutex // read: a fork and its registration; write: a reaping pass

	mu      sync.Mutex // guards waited, groups and markers
	waited  map[int]bool
	groups  map[*markerGroup]bool
	markers map[int]marker // markers of the agent's children, by pid

	sigs chan os.Signal
	stop chan struct{}
	done chan struct{} // closed when reap returns

	scans             sync.Mutex // guards the fields below; see scan
	scanDone          *sync.Cond // on scans
	scanning          bool
	started, finished uint64 // scans begun and the last one done
	lastScan          []proc
	lastErr           error
}

func openSubreaper(inst instance) (*subreaper, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become a child subreaper: %w", err)
	}
	s := &subreaper{
		inst: inst, self: os.Getpid(),
		waited: make(map[int]bool), groups: make(map[*markerGroup]bool), markers: make(map[int]marker),
		sigs: make(chan os.Signal, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	s.scanDone = sync.NewCond(&s.scans)
	signal.Notify(s.sigs, unix.SIGCHLD)
	go s.reap()
	return s, nil
}

// scan returns a scan of /proc that began after the call. Groups that
// look at the same moment (a shutdown stops every terminal at once) share
// one scan. The result is shared: read it, never change it.
func (s *subreaper) scan() ([]proc, error) {
	s.scans.Lock()
	defer s.scans.Unlock()
	want := s.started + 1
	for s.finished < want {
		if s.scanning {
			s.scanDone.Wait()
			continue
		}
		s.scanning = true
		s.started++
		gen := s.started
		s.scans.Unlock()
		procs, err := scanProcs()
		s.scans.Lock()
		s.scanning = false
		s.lastScan, s.lastErr, s.finished = procs, err, gen
		s.scanDone.Broadcast()
	}
	return s.lastScan, s.lastErr
}

func (s *subreaper) reap() {
	defer close(s.done)
	for {
		select {
		case <-s.sigs:
			s.reapPass()
		case <-s.stop:
			s.reapPass()
			return
		}
	}
}

// reapPass reaps every zombie child that nobody waits for.
func (s *subreaper) reapPass() {
	s.forks.Lock()
	defer s.forks.Unlock()
	procs, err := scanProcs()
	if err != nil {
		return // the next SIGCHLD tries again
	}
	s.forgetMarkers(procs)
	for _, p := range procs {
		if p.ppid != s.self || !p.zombie() || s.isWaited(p.pid) {
			continue
		}
		var ws unix.WaitStatus
		// Best effort: it is ours and a zombie, so this reaps it; an error
		// means someone else did.
		_, _ = unix.Wait4(p.pid, &ws, unix.WNOHANG, nil)
	}
}

func (s *subreaper) isWaited(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waited[pid]
}

// killAll kills every process of the instance: every member of every
// group, every child of the agent and every process with the instance's
// marker, until none is left (at most timeout).
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
	close(s.stop)
	<-s.done
	signal.Stop(s.sigs)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("stop being a child subreaper: %w", err))
	}
	return errors.Join(errs...)
}

// kill sends SIGKILL to every live process of the instance and returns
// how many it found.
func (s *subreaper) kill() (int, error) {
	s.mu.Lock()
	groups := make([]*markerGroup, 0, len(s.groups))
	for g := range s.groups {
		groups = append(groups, g)
	}
	s.mu.Unlock()
	procs, err := scanProcs()
	if err != nil {
		return 0, err
	}
	victims := make(map[int]proc)
	for _, g := range groups {
		for _, p := range g.attribute(procs) {
			victims[p.pid] = p
		}
	}
	for _, p := range procs {
		if !p.live() {
			continue
		}
		if inst, _ := markerOf(p.pid); p.ppid == s.self || inst == s.inst.String() {
			victims[p.pid] = p
		}
	}
	var errs []error
	for _, p := range victims {
		start := p.start
		if _, err := signalProcess(p.pid, []unix.Signal{unix.SIGKILL}, byKill, func(q proc) bool { return q.start == start }); err != nil {
			errs = append(errs, err)
		}
	}
	return len(victims), errors.Join(errs...)
}

// markerOf reads the instance and terminal markers of a process.
func markerOf(pid int) (inst, term string) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return "", ""
	}
	inst, _ = lookupEnv(env, InstanceEnv)
	term, _ = lookupEnv(env, TerminalEnv)
	return inst, term
}

// marker is a process's markers as first read.
type marker struct {
	start      uint64
	inst, term string
}

// markerOf returns the markers of a live process, read once per process.
// A process in the middle of an exec shows an empty environment for a
// moment (longer on a loaded machine), so an empty one is read again for a
// while, and is not remembered: it is read again at the next look.
func (s *subreaper) markerOf(p proc) (inst, term string) {
	s.mu.Lock()
	m, ok := s.markers[p.pid]
	s.mu.Unlock()
	if ok && m.start == p.start {
		return m.inst, m.term
	}
	m = marker{start: p.start}
	for deadline := time.Now().Add(20 * time.Millisecond); ; time.Sleep(500 * time.Microsecond) {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/environ")
		if err != nil {
			return "", "" // gone
		}
		if len(env) == 0 && time.Now().After(deadline) {
			return "", "" // unknown for now: read again next time
		}
		if len(env) > 0 {
			m.inst, _ = lookupEnv(env, InstanceEnv)
			m.term, _ = lookupEnv(env, TerminalEnv)
			break
		}
	}
	s.mu.Lock()
	s.markers[p.pid] = m
	s.mu.Unlock()
	return m.inst, m.term
}

// forgetMarkers drops the markers of processes that are gone.
func (s *subreaper) forgetMarkers(procs []proc) {
	live := make(map[int]uint64, len(procs))
	for _, p := range procs {
		live[p.pid] = p.start
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, m := range s.markers {
		if start, ok := live[pid]; !ok || start != m.start {
			delete(s.markers, pid)
		}
	}
}

// markerGroup is a Group in Subreaper mode. Its members are found in /proc:
// the processes of its session, those carrying its marker that were
// re-parented to the agent, those it recorded when first seen, and their
// descendants.
type markerGroup struct {
	sr     *subreaper
	env    []string
	term   string // this group's TerminalEnv value
	done   chan struct{}
	cancel chan struct{} // closed by Close: the watch goroutine returns

	tty uint64 // device number of the group's terminal, 0 if unknown; set before shell

	mu      sync.Mutex // guards the fields below
	shell   int        // the first process, 0 before ForkExec
	sid     int        // the first process's session, if it leads one
	known   map[int]uint64
	ended   bool
	stopped bool          // Close was called
	waiting *os.File      // the pidfd watch waits on, closed by Close
	watched chan struct{} // closed when watch returns; nil before ForkExec
}

func (s *subreaper) newGroup(n int64) *markerGroup {
	term := strconv.FormatInt(n, 10)
	return &markerGroup{
		sr: s, term: term,
		env:  append(s.inst.env(), TerminalEnv+"="+term),
		done: make(chan struct{}), cancel: make(chan struct{}),
		known: make(map[int]uint64),
	}
}

func (g *markerGroup) ForkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	a := *attr
	a.Env = withEnv(a.Env, g.env)
	if len(a.Files) > 0 {
		var st unix.Stat_t
		if unix.Fstat(int(a.Files[0]), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
			g.tty = st.Rdev
		}
	}
	g.sr.forks.RLock()
	pid, err := syscall.ForkExec(argv0, argv, &a)
	if err == nil {
		g.sr.mu.Lock()
		g.sr.waited[pid] = true
		g.sr.groups[g] = true
		g.sr.mu.Unlock()
	}
	g.sr.forks.RUnlock()
	if err != nil {
		return 0, err
	}
	// Our unreaped child: its pid (and so its session id) cannot be reused
	// until the caller reaps it, so /proc can always be read for it; were
	// it not, the group would only lose the session as a way to find
	// members.
	p, _ := readProc(pid)
	g.mu.Lock()
	g.shell = pid
	g.known[pid] = p.start
	if p.sid == pid {
		g.sid = pid
	}
	g.watched = make(chan struct{})
	g.mu.Unlock()
	go g.watch()
	return pid, nil
}

// attribute returns the group's processes among procs, live or not, and
// records them.
func (g *markerGroup) attribute(procs []proc) []proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shell == 0 {
		return nil
	}
	byPid := make(map[int]proc, len(procs))
	for _, p := range procs {
		byPid[p.pid] = p
	}
	member := make(map[int]bool)
	for _, p := range procs {
		if g.belongsLocked(p) {
			member[p.pid] = true
		}
	}
	// Ancestry: a child of a member is a member. Parents usually come
	// first in start order, so this settles in a pass or two.
	for changed := true; changed; {
		changed = false
		for _, p := range procs {
			if !member[p.pid] && member[p.ppid] && byPid[p.ppid].start <= p.start {
				member[p.pid], changed = true, true
			}
		}
	}
	out := make([]proc, 0, len(member))
	known := make(map[int]uint64, len(member))
	for _, p := range procs {
		if member[p.pid] {
			out = append(out, p)
			known[p.pid] = p.start
		}
	}
	known[g.shell] = g.known[g.shell] // kept until Close
	g.known = known
	slices.SortFunc(out, func(a, b proc) int {
		if a.start != b.start {
			if a.start < b.start {
				return -1
			}
			return 1
		}
		return a.pid - b.pid
	})
	return out
}

// belongsLocked tells a member by its own traits: recorded before (same
// start time), in the group's session, or re-parented to the agent with
// the group's marker. g.mu is held.
func (g *markerGroup) belongsLocked(p proc) bool {
	if start, ok := g.known[p.pid]; ok && start == p.start {
		return true
	}
	if g.sid != 0 && p.sid == g.sid {
		return true
	}
	// A zombie or exiting process has no environment left to read, and
	// no children: it does not matter to the group.
	if p.ppid != g.sr.self || !p.live() || g.sr.isWaited(p.pid) {
		return false
	}
	// An orphan that holds the group's terminal is the group's, whatever
	// its environment says (or cannot say yet, in the middle of an exec).
	if g.tty != 0 && holdsTTY(p.pid, g.tty) {
		return true
	}
	inst, term := g.sr.markerOf(p)
	return inst == g.sr.inst.String() && term == g.term
}

// holdsTTY reports whether process pid has terminal device tty as its
// standard input, output or error.
func holdsTTY(pid int, tty uint64) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	for _, fd := range []string{"0", "1", "2"} {
		var st unix.Stat_t
		if unix.Stat(dir+fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == tty {
			return true
		}
	}
	return false
}

// members returns the live members, oldest first.
func (g *markerGroup) members() ([]proc, error) {
	procs, err := g.sr.scan()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(g.attribute(procs), func(p proc) bool { return !p.live() }), nil
}

// look returns the live members, oldest first, from a fresh scan; none
// means the group is empty. A scan that finds none is checked against the
// processes that appeared since it listed /proc, until a listing brings
// no newcomer (or a few rounds on a busy machine).
func (g *markerGroup) look() ([]proc, error) {
	procs, err := g.sr.scan()
	if err != nil {
		return nil, err
	}
	for range 10 {
		if live := slices.DeleteFunc(g.attribute(procs), func(p proc) bool { return !p.live() }); len(live) > 0 {
			return live, nil
		}
		fresh, err := newcomers(procs)
		if err != nil {
			return nil, err
		}
		if len(fresh) == 0 {
			break
		}
		procs = append(slices.Clip(procs), fresh...)
	}
	return nil, nil
}

func (g *markerGroup) recorded(p proc) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	start, ok := g.known[p.pid]
	return ok && start == p.start
}

// watch ends the group once no member is left: it waits for each member
// it found to exit, oldest first, and looks again. Members come only from
// members, so a look that finds none is final; and a look is a scan of
// /proc, so it is made only once every member of the last one is gone.
func (g *markerGroup) watch() {
	defer close(g.watched)
	for {
		live, err := g.look()
		if err == nil && len(live) == 0 {
			g.end()
			return
		}
		if err != nil {
			// /proc unreadable for a moment: look again soon, without
			// spinning.
			if !g.sleep(time.Millisecond) {
				return
			}
			continue
		}
		for _, p := range live {
			if !g.waitExit(p) {
				return
			}
		}
	}
}

// sleep waits d, or returns false once the group is closed.
func (g *markerGroup) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-g.cancel:
		return false
	}
}

// waitExit waits until process p exits, or returns false once the group
// is closed.
func (g *markerGroup) waitExit(p proc) bool {
	fd, err := unix.PidfdOpen(p.pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return true // gone already
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close() // Best effort: a pidfd we only polled (Close may have closed it).
	if now, ok := readProc(p.pid); !ok || now.start != p.start || !now.live() {
		return true
	}
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return false
	}
	g.waiting = f
	g.mu.Unlock()
	waitReadable(f) // until the process exits, or Close closes f
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting = nil
	return !g.stopped
}

// waitReadable parks until a pidfd is readable (its process has exited)
// or the file is closed.
func waitReadable(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// Best effort: an error means the file was closed, which ends the wait
	// as intended.
	_ = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 0)
			if err != unix.EINTR {
				// An error other than EINTR ends the wait too: the
				// caller looks at /proc again, which is always right.
				return n > 0 || err != nil
			}
		}
	})
}

func (g *markerGroup) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ended {
		g.ended = true
		close(g.done)
	}
}

func (g *markerGroup) Done() <-chan struct{} { return g.done }

func (g *markerGroup) Empty() bool {
	g.mu.Lock()
	started := g.shell != 0
	g.mu.Unlock()
	if !started {
		return false
	}
	if live, err := g.look(); err == nil && len(live) == 0 {
		g.end()
	}
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

func (g *markerGroup) Members() ([]Member, error) {
	pids, err := g.pids()
	if err != nil {
		return nil, err
	}
	return describe(pids), nil
}

func (g *markerGroup) pids() ([]int, error) {
	procs, err := g.members()
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.pid
	}
	return pids, err
}

func (g *markerGroup) Signal(sigs ...unix.Signal) (bool, error) {
	return signalUntilStable(g.pids, sigs, g.recorded)
}

func (g *markerGroup) Kill() (bool, error) {
	procs, err := g.members()
	if err != nil {
		return false, err
	}
	var errs []error
	for _, p := range procs {
		if _, err := signalProcess(p.pid, []unix.Signal{unix.SIGKILL}, byKill, g.recorded); err != nil {
			errs = append(errs, err)
		}
	}
	return len(procs) > 0, errors.Join(errs...)
}

func (g *markerGroup) Close() error {
	g.mu.Lock()
	if !g.stopped {
		g.stopped = true
		close(g.cancel)
		if g.waiting != nil {
			g.waiting.Close() // Best effort: wakes watch, which returns.
		}
	}
	shell, watched := g.shell, g.watched
	g.mu.Unlock()
	if watched != nil {
		<-watched
	}
	g.sr.mu.Lock()
	delete(g.sr.groups, g)
	delete(g.sr.waited, shell)
	g.sr.mu.Unlock()
	return nil
}
