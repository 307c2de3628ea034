package contain

import (
	"errors"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// markerGroup is a Group in Subreaper mode. Its members are found in /proc:
// the processes of its session, the children of the agent that hold its
// terminal or carry its marker, those it recorded when first seen, and
// their descendants.
//
// Concurrency: mu is a leaf (see subreaper). Membership is worked out under
// it from a scan and the facts of the agent's children, both read before
// it is taken.
type markerGroup struct {
	sr     *subreaper
	env    []string
	inst   string // the instance's InstanceEnv value
	term   string // this group's TerminalEnv value
	done   chan struct{}
	cancel chan struct{} // closed by Close: the watch goroutine returns

	mu      sync.Mutex // guards the fields below
	tty     uint64     // device number of the group's terminal, 0 if unknown
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
		sr: s, inst: s.inst.String(), term: term,
		env:  append(s.inst.env(), TerminalEnv+"="+term),
		done: make(chan struct{}), cancel: make(chan struct{}),
		known: make(map[int]uint64),
	}
}

func (g *markerGroup) ForkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	a := *attr
	a.Env = withEnv(a.Env, g.env)
	tty := uint64(0)
	if len(a.Files) > 0 {
		var st unix.Stat_t
		if unix.Fstat(int(a.Files[0]), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR {
			tty = st.Rdev
		}
	}
	g.mu.Lock()
	g.tty = tty
	g.mu.Unlock()
	// Known to killAll before its first process runs.
	g.sr.add(g)
	pid, err := g.sr.reap.forkExec(argv0, argv, &a)
	if err != nil {
		g.sr.remove(g)
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

// terminal returns the device number of the group's terminal, 0 if none.
func (g *markerGroup) terminal() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tty
}

// attribute returns the group's processes among procs, live or not, and
// records them. children holds what subreaper.children read of the
// agent's children among procs. A group that has ended has no members: its last
// look found none, and members come only from members.
func (g *markerGroup) attribute(procs []proc, children map[int]childFacts) []proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shell == 0 || g.ended {
		return nil
	}
	byPid := make(map[int]proc, len(procs))
	for _, p := range procs {
		byPid[p.pid] = p
	}
	member := make(map[int]bool)
	for _, p := range procs {
		if g.belongsLocked(p, children) {
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
// start time), in the group's session, or a child of the agent that holds
// the group's terminal or carries its marker. g.mu is held.
func (g *markerGroup) belongsLocked(p proc, children map[int]childFacts) bool {
	if start, ok := g.known[p.pid]; ok && start == p.start {
		return true
	}
	if g.sid != 0 && p.sid == g.sid {
		return true
	}
	// A zombie or exiting process has no environment left to read, and
	// no children: it does not matter to the group.
	o, ok := children[p.pid]
	if !ok || o.start != p.start || !p.live() {
		return false
	}
	if g.tty != 0 && slices.Contains(o.ttys[:], g.tty) {
		return true
	}
	return o.inst == g.inst && o.term == g.term
}

// members returns the live members, oldest first.
func (g *markerGroup) members() ([]proc, error) {
	procs, err := g.sr.scans.scan()
	if err != nil {
		return nil, err
	}
	return liveOnly(g.attribute(procs, g.sr.children(procs))), nil
}

func liveOnly(procs []proc) []proc {
	return slices.DeleteFunc(procs, func(p proc) bool { return !p.live() })
}

// look returns the live members, oldest first, from a fresh scan; none
// means the group is empty. A scan that finds none is checked against the
// processes that appeared since it listed /proc, until a listing brings
// no newcomer (or a few rounds on a busy machine).
func (g *markerGroup) look() ([]proc, error) {
	procs, err := g.sr.scans.scan()
	if err != nil {
		return nil, err
	}
	children := g.sr.children(procs)
	for range 10 {
		if live := liveOnly(g.attribute(procs, children)); len(live) > 0 {
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
		children = maps.Clone(children)
		maps.Copy(children, g.sr.children(fresh))
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
	g.sr.remove(g)
	g.sr.reap.release(shell)
	return nil
}
