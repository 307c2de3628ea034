package contain

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"shellagent/procexit"
)

// markerGroup is a Group in Subreaper and Session mode. Its members are
// found by looking at every process: the processes of its session and
// process group, those it recorded when first seen, their descendants,
// and the processes the mode has facts for that hold its terminal or
// carry its marker (the agent's orphans in Subreaper mode, any process in
// Session mode).
//
// Concurrency: mu is a leaf (see markerMode). Membership is worked out
// under it from a scan and the mode's facts, both read before it is taken,
// and the stat of each recorded process the scan does not hold.
type markerGroup struct {
	killRecord
	m      *markerMode
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
	stopped bool              // Close was called
	waiting *procexit.Process // the exit watch waits for, closed by Close
	watched chan struct{}     // closed when watch returns; nil before ForkExec
}

func newMarkerGroup(s *markerMode, n int64) *markerGroup {
	term := strconv.FormatInt(n, 10)
	return &markerGroup{
		m: s, inst: s.inst.String(), term: term,
		env:  append(s.inst.env(), TerminalEnv+"="+term),
		done: make(chan struct{}), cancel: make(chan struct{}),
		known: make(map[int]uint64),
	}
}

func (g *markerGroup) ForkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	a := *attr
	a.Env = withEnv(a.Env, g.env)
	// The group's terminal, which its members may hold: stdin if it is
	// one. Not any character device: every process that holds /dev/null
	// would belong to a group whose first process reads it.
	tty := uint64(0)
	if len(a.Files) > 0 && term.IsTerminal(int(a.Files[0])) {
		var st unix.Stat_t
		if unix.Fstat(int(a.Files[0]), &st) == nil {
			tty = uint64(st.Rdev) // an int32 on macOS
		}
	}
	g.mu.Lock()
	g.tty = tty
	g.mu.Unlock()
	// Known to killAll before its first process runs.
	g.m.add(g)
	pid, err := g.m.forkExec(argv0, argv, &a)
	if err != nil {
		g.m.remove(g)
		return 0, err
	}
	// Our unreaped child: its pid (and so its session id) cannot be reused
	// until the caller reaps it, so it can always be read; were it not,
	// the group would only lose the session as a way to find members.
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
// records them. parent is parents(procs); facts holds what the mode read
// of processes among procs (markerMode.facts). A group that has ended has
// no members: its last look found none, and members come only from
// members.
func (g *markerGroup) attribute(procs []proc, parent []int, facts map[int]procFacts) []proc {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shell == 0 || g.ended {
		return nil
	}
	member := make([]bool, len(procs))
	n := 0
	for i, p := range procs {
		if g.belongsLocked(p, facts) {
			member[i] = true
			n++
		}
	}
	// Ancestry: a child of a member is a member. Parents usually come
	// first in start order, so this settles in a pass or two.
	for changed := true; changed; {
		changed = false
		for i, j := range parent {
			if !member[i] && j >= 0 && member[j] {
				member[i], changed = true, true
				n++
			}
		}
	}
	out := make([]proc, 0, n)
	known := make(map[int]uint64, n+1)
	for i, p := range procs {
		if member[i] {
			out = append(out, p)
			known[p.pid] = p.start
		}
	}
	known[g.shell] = g.known[g.shell] // kept until Close
	// A process recorded before that procs does not hold stays recorded
	// while its pid names it: procs may have been listed before it was
	// forked (a scan another look made, or an older one than the last
	// look's), and a member forgotten by such a scan would be refused its
	// signals (recorded) and, once it has left the session and lost its
	// parent, found by nothing.
	for pid, start := range g.known {
		if _, ok := known[pid]; !ok {
			if now, ok := readProc(pid); ok && now.start == start {
				known[pid] = start
			}
		}
	}
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

// parents returns, for each process of procs, the index in procs of its
// parent; -1 where the parent is not among them, or started after it (its
// pid was reused). kill works it out once for all the groups.
func parents(procs []proc) []int {
	at := make(map[int]int, len(procs))
	for i, p := range procs {
		at[p.pid] = i
	}
	out := make([]int, len(procs))
	for i, p := range procs {
		j, ok := at[p.ppid]
		if !ok || procs[j].start > p.start {
			j = -1
		}
		out[i] = j
	}
	return out
}

// ancestorsFirst returns the processes of victims so that each comes
// after those of its ancestors among them (by depth in the tree of
// procs, whose parents are parent, as parents returns them). A shell
// killed after its child can see the child's end first and exit on its
// own (a "wait" returns 0) before its own SIGKILL reaches it, and the
// command that was killed then reads as one that exited 0; a process
// sent SIGKILL runs no more code, so once its shell is sent SIGKILL
// first, a child's end changes nothing.
func ancestorsFirst(victims map[int]proc, procs []proc, parent []int) []proc {
	at := make(map[int]int, len(procs))
	for i, p := range procs {
		at[p.pid] = i
	}
	depth := make(map[int]int, len(victims))
	out := make([]proc, 0, len(victims))
	for pid, p := range victims {
		d := 0
		if i, ok := at[pid]; ok {
			for j := parent[i]; j >= 0 && d < len(procs); j = parent[j] {
				d++
			}
		}
		depth[pid] = d
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b proc) int { return cmp.Or(cmp.Compare(depth[a.pid], depth[b.pid]), cmp.Compare(a.pid, b.pid)) })
	return out
}

// belongsLocked tells a member by its own traits: in the group's session
// or process group, recorded before (same start time), or a process the
// mode has facts for that holds the group's terminal or carries its
// marker. g.mu is held.
func (g *markerGroup) belongsLocked(p proc, facts map[int]procFacts) bool {
	// The process group is the session's where the OS cannot tell a
	// process's session (a zombie's, on macOS).
	if g.sid != 0 && (p.sid == g.sid || p.pgid == g.sid) {
		return true
	}
	if start, ok := g.known[p.pid]; ok && start == p.start {
		return true
	}
	// A zombie or exiting process has no environment left to read, and
	// no children: it does not matter to the group.
	o, ok := facts[p.pid]
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
	procs, err := g.m.scans.scan()
	if err != nil {
		return nil, err
	}
	return liveOnly(g.attribute(procs, parents(procs), g.m.facts(procs))), nil
}

func liveOnly(procs []proc) []proc {
	return slices.DeleteFunc(procs, func(p proc) bool { return !p.live() })
}

// look returns the live members, oldest first, from a scan that began
// after the call, or from the last one if late says it was read late
// enough (scanner.scanWhere; fresh tells which). None means the group is
// empty, whichever scan it was: a scan that finds none is checked against
// the processes that appeared since it listed them, until a listing brings
// no newcomer (or a few rounds on a busy machine). A member an earlier scan
// read alive may have ended since.
func (g *markerGroup) look(late func([]proc) bool) (live []proc, fresh bool, err error) {
	procs, fresh, err := g.m.scans.scanWhere(late)
	if err != nil {
		return nil, fresh, err
	}
	facts := g.m.facts(procs)
	for range 10 {
		if live := liveOnly(g.attribute(procs, parents(procs), facts)); len(live) > 0 {
			return live, fresh, nil
		}
		more, err := newcomers(procs)
		if err != nil {
			return nil, fresh, err
		}
		if len(more) == 0 {
			break
		}
		procs = append(slices.Clip(procs), more...)
		facts = maps.Clone(facts)
		maps.Copy(facts, g.m.facts(more))
	}
	return nil, fresh, nil
}

// readEnded returns a test of a scan: it read each of ps ended (a zombie,
// exiting, or gone). Each of ps was read live by an earlier scan, so a
// scan that does not hold it listed the processes after it was gone.
func readEnded(ps []proc) func([]proc) bool {
	return func(procs []proc) bool {
		alive := make(map[int]uint64, len(ps))
		for _, p := range ps {
			alive[p.pid] = p.start
		}
		for _, q := range procs {
			if start, ok := alive[q.pid]; ok && start == q.start && q.live() {
				return false
			}
		}
		return true
	}
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
// every process, so it is made only once every member of the last one is
// gone.
//
// The first look is a fresh scan; each one after it may be a scan that
// another look (Empty's, say) made after the members it waited for ended.
func (g *markerGroup) watch() {
	defer close(g.watched)
	var late func([]proc) bool
	for {
		live, _, err := g.look(late)
		if err == nil && len(live) == 0 {
			g.end()
			return
		}
		if err != nil {
			// Processes unreadable for a moment: look again soon,
			// without spinning.
			if !g.sleep(time.Millisecond) {
				return
			}
			late = nil
			continue
		}
		for _, p := range live {
			if !g.waitExit(p) {
				return
			}
		}
		late = readEnded(live)
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
	w, err := procexit.Watch(p.pid)
	if errors.Is(err, procexit.ErrGone) {
		return true
	}
	if err != nil {
		// Not watchable (not permitted, say): look again in a while.
		return g.sleep(100 * time.Millisecond)
	}
	defer w.Close() // Best effort: only waited on (Close may have closed it).
	if now, ok := readProc(p.pid); !ok || now.start != p.start || !now.live() {
		return true
	}
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return false
	}
	g.waiting = w
	g.mu.Unlock()
	// Best effort: the end of the wait is all that matters; the caller
	// looks again, which is always right.
	_ = w.Wait() // until the process exits, or Close closes w
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting = nil
	return !g.stopped
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

// Empty is called once the shell has exited (and before it is reaped):
// a scan that read the shell ended (exiting or a zombie) read it after
// its exit, so the watch's look at that exit does for both. Only "empty"
// is taken from such a scan: a member it read alive may have ended before
// the shell, and is looked for again in a scan of Empty's own.
func (g *markerGroup) Empty() bool {
	g.mu.Lock()
	shell := proc{pid: g.shell, start: g.known[g.shell]}
	g.mu.Unlock()
	if shell.pid == 0 {
		return false
	}
	shellEnded := func(procs []proc) bool { // it read the shell, and read it ended
		return slices.ContainsFunc(procs, func(q proc) bool {
			return q.pid == shell.pid && q.start == shell.start && !q.live()
		})
	}
	live, fresh, err := g.look(shellEnded)
	if err == nil && len(live) > 0 && !fresh {
		live, _, err = g.look(nil)
	}
	if err == nil && len(live) == 0 {
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
	reached := slices.ContainsFunc(procs, func(p proc) bool { return !p.doomed() })
	g.note(reached)
	return reached, errors.Join(errs...)
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
	g.m.remove(g)
	g.m.release(shell)
	return nil
}
