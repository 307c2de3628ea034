package contain

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupPlace is the cgroup2 hierarchy as this process sees it.
type cgroupPlace struct {
	mount string // where the hierarchy is mounted
	root  string // the hierarchy path of the mount's root
	self  string // this process's cgroup, a hierarchy path ("/" or "/a/b")
}

// dir returns the directory of hierarchy path p.
func (c cgroupPlace) dir(p string) string {
	rel := strings.TrimPrefix(p, c.root)
	return filepath.Join(c.mount, rel)
}

// findCgroup2 finds the cgroup2 mount in /proc/self/mountinfo and this
// process's cgroup in /proc/self/cgroup ("0::/path").
func findCgroup2() (cgroupPlace, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return cgroupPlace{}, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	var self string
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			self = p
		}
	}
	if self == "" || !strings.HasPrefix(self, "/") {
		return cgroupPlace{}, errors.New("no cgroup v2 entry (0::/path) in /proc/self/cgroup")
	}
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return cgroupPlace{}, fmt.Errorf("read mountinfo: %w", err)
	}
	defer mi.Close() // Best effort: read-only.
	sc := bufio.NewScanner(mi)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		left, right, ok := strings.Cut(sc.Text(), " - ")
		lf, rf := strings.Fields(left), strings.Fields(right)
		if !ok || len(lf) < 5 || len(rf) < 1 || rf[0] != "cgroup2" {
			continue
		}
		root, mount := unescapeMount(lf[3]), unescapeMount(lf[4])
		if root == "/" || self == root || strings.HasPrefix(self, root+"/") {
			if root == "/" {
				root = ""
			}
			return cgroupPlace{mount: mount, root: root, self: self}, nil
		}
	}
	if err := sc.Err(); err != nil {
		return cgroupPlace{}, fmt.Errorf("read mountinfo: %w", err)
	}
	return cgroupPlace{}, fmt.Errorf("no cgroup2 mount shows this process's cgroup %s", self)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupTree is this instance's cgroup, one child cgroup per group below
// it, and the one inotify descriptor that watches them all.
type cgroupTree struct {
	place   cgroupPlace
	path    string // the instance's hierarchy path
	dir     string
	hasKill bool // cgroup.kill exists (Linux 5.14)
	w       *watcher
	env     []string // the instance marker
	reap    *reaper  // when the agent is its pid namespace's init; else nil
	spare   spare    // the next terminal's cgroup, made ahead

	mu     sync.Mutex            // guards groups
	groups map[*cgroupGroup]bool // every group made or adopted and not closed
	gaveUp givenUp               // what its kills gave up on (see ending)
}

// instanceDirPrefix starts the name of every instance cgroup:
// shellagent-PIDNS-PID-START.
const instanceDirPrefix = "shellagent-"

// openCgroups creates (or, after an exec in place, takes over) the
// instance cgroup below this process's own and
// checks that a process can be started inside it (CLONE_INTO_CGROUP).
// next returns the number the next NewGroup will issue; the cgroup of
// that group is made ahead (see spare).
func openCgroups(inst instance, next func() int64) (*cgroupTree, error) {
	place, err := findCgroup2()
	if err != nil {
		return nil, err
	}
	p := path.Join(place.self, instanceDirPrefix+inst.String())
	t := &cgroupTree{place: place, path: p, dir: place.dir(p), env: inst.env(), spare: spare{next: next}, groups: make(map[*cgroupGroup]bool)}
	// The name holds this process's pid and start time: one that exists
	// is this process's own, made before it exec'd itself in place (a
	// daemon's upgrade), and is taken over.
	if err := os.Mkdir(t.dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	if err := probeCloneInto(t.dir); err != nil {
		return nil, errors.Join(err, t.remove())
	}
	_, err = os.Stat(filepath.Join(t.dir, "cgroup.kill"))
	t.hasKill = err == nil
	if t.w, err = newWatcher(); err != nil {
		return nil, errors.Join(err, t.remove())
	}
	if os.Getpid() == 1 {
		// Init of its pid namespace: every orphan there is the agent's to
		// reap. Those of a terminal are in its cgroup, which a zombie
		// keeps (rule 4 of the reaper).
		inside := func(p proc) bool { return inCgroup(p.pid, t.path) }
		if t.reap, err = startReaper(scanProcs, inside); err != nil {
			return nil, errors.Join(err, t.w.close(), t.remove())
		}
	}
	t.spare.fill(t)
	return t, nil
}

// probeCloneInto starts a process inside dir whose exec fails: if the
// kernel refuses CLONE_INTO_CGROUP, the fork fails with another error than
// the exec's ENOENT.
func probeCloneInto(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	defer unix.Close(fd) // Best effort: a directory opened for reading.
	const missing = "/nonexistent/shellagent-cgroup-probe"
	_, err = syscall.ForkExec(missing, []string{missing}, &syscall.ProcAttr{
		Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd},
	})
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err == nil {
		return errors.New("cgroup probe: a missing program started")
	}
	return fmt.Errorf("start a process in cgroup %s (CLONE_INTO_CGROUP, Linux 5.7): %w", dir, err)
}

// prepare has the next group's cgroup made ahead (see spare).
func (t *cgroupTree) prepare() { t.spare.refill(t) }

// remove removes the instance cgroup and every cgroup below it. They must
// be empty.
func (t *cgroupTree) remove() error { return removeTree(t.dir) }

// killAll kills every process in the instance's cgroups and waits until
// they are gone, at most timeout. Each group that had a process alive
// before notes the kill (Group.Killed) once it has been sent.
func (t *cgroupTree) killAll(timeout time.Duration) error {
	t.mu.Lock()
	groups := make([]*cgroupGroup, 0, len(t.groups))
	for g := range t.groups {
		groups = append(groups, g)
	}
	t.mu.Unlock()
	// Noted before the kill is sent, as a terminal may see its processes
	// gone before killTree returns; withdrawn if none was sent, so that
	// an exit does not claim a SIGKILL on the word of a failed write.
	withdraw := make([]func(), 0, len(groups))
	for _, g := range groups {
		if pids, err := cgroupPids(g.dir); err == nil { // a group closed meanwhile has nothing to note
			withdraw = append(withdraw, g.noteAhead(anyAlive(pids)))
		}
	}
	sent := false
	err := killTree(t.dir, t.hasKill, timeout, func() { sent = true }, &t.gaveUp)
	if !sent {
		for _, w := range withdraw {
			w()
		}
	}
	return err
}

// track adds g to the groups that killAll notes a kill of, or, if !add,
// takes it out.
func (t *cgroupTree) track(g *cgroupGroup, add bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if add {
		t.groups[g] = true
	} else {
		delete(t.groups, g)
	}
}

// close kills every process left in the instance's cgroups, waits until
// they are gone (at most timeout), removes the cgroups and stops watching.
func (t *cgroupTree) close(timeout time.Duration) error {
	t.spare.close()
	err := t.killAll(timeout)
	if e := t.remove(); e != nil {
		err = errors.Join(err, e)
	}
	if e := t.w.close(); e != nil {
		err = errors.Join(err, e)
	}
	t.reap.close()
	return err
}

// afterKill, if not nil, is called once a kill has been sent to the
// processes of the cgroup at dir (cgroup.kill written, or killEach's
// signals sent), before the sender goes on: a test's look at that moment.
var afterKill atomic.Pointer[func(dir string)]

// noteAhead (cgroup mode's: a cgroup.kill kills as it is written)
// records a SIGKILL that will reach a live process of the
// group (reached) before it is sent: the process it ends may be seen
// gone, and its exit reported, before the sender returns. The function
// returned withdraws the note, for a kill that was not sent after all,
// unless an earlier kill had set it.
func (k *killRecord) noteAhead(reached bool) (withdraw func()) {
	if !reached || k.killed.Swap(true) {
		return func() {}
	}
	return func() { k.killed.Store(false) }
}

// killSent calls afterKill, if set, for the cgroup at dir.
func killSent(dir string) {
	if f := afterKill.Load(); f != nil {
		(*f)(dir)
	}
}

// killTree kills every process of the cgroup at dir and below, and waits
// until none is left, at most timeout (see ending, whose past is past,
// which may be nil). It calls sent, if not nil, after each kill it sent
// (cgroup.kill written, or killEach's signals sent).
func killTree(dir string, hasKill bool, timeout time.Duration, sent func(), past *givenUp) error {
	end := newEnding(timeout, past)
	for {
		began := time.Now()
		populated, _, err := readEvents(dir)
		if errors.Is(err, fs.ErrNotExist) || err == nil && !populated {
			return nil
		}
		if err != nil {
			return err
		}
		if !began.Before(end.deadline) || past.any() {
			pids, _ := cgroupPids(dir) // Best effort: for the rule and the error
			left := end.left(began, statPids(pids))
			if len(left) > 0 || end.over(began) {
				return fmt.Errorf("cgroup %s: processes left after %v: %s", dir, end.tried(), listProcs(left))
			}
		}
		signalled := false
		if hasKill {
			err = writeFile(filepath.Join(dir, "cgroup.kill"), "1")
			signalled = err == nil
		} else {
			signalled, err = killEach(dir)
		}
		if signalled {
			killSent(dir)
		}
		if signalled && sent != nil {
			sent()
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// Shutdown and the sweep only: the processes die within
		// milliseconds of SIGKILL.
		time.Sleep(2 * time.Millisecond)
	}
}

// killEach kills every process of the cgroup at dir and below without
// cgroup.kill (before Linux 5.14): freeze, kill each, thaw. It reports
// whether a SIGKILL went to one of them.
func killEach(dir string) (signalled bool, err error) {
	if err := writeFile(filepath.Join(dir, "cgroup.freeze"), "1"); err != nil {
		return false, err
	}
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, frozen, err := readEvents(dir); err != nil || frozen {
			break
		}
	}
	pids, err := cgroupPids(dir)
	for _, pid := range pids {
		r, e := signalProcess(pid, []unix.Signal{unix.SIGKILL}, byKill, func(proc) bool { return true })
		signalled = signalled || r
		if e != nil {
			err = errors.Join(err, e)
		}
	}
	if e := writeFile(filepath.Join(dir, "cgroup.freeze"), "0"); e != nil {
		err = errors.Join(err, e)
	}
	return signalled, err
}

// removeTree removes the cgroup at dir and every cgroup below it, deepest
// first. A cgroup that is gone already is fine.
func removeTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() {
			errs = append(errs, removeTree(filepath.Join(dir, e.Name())))
		}
	}
	if err := rmdir(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// rmdir removes one empty cgroup. The kernel may still count a process
// that is on its way out for a moment; EBUSY is retried briefly.
func rmdir(dir string) error {
	var err error
	for range 50 {
		err = unix.Rmdir(dir)
		if err != unix.EBUSY {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// readEvents reads a cgroup's cgroup.events.
func readEvents(dir string) (populated, frozen bool, err error) {
	var buf [128]byte
	fd, err := unix.Open(filepath.Join(dir, "cgroup.events"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, false, &fs.PathError{Op: "open", Path: filepath.Join(dir, "cgroup.events"), Err: err}
	}
	defer unix.Close(fd) // Best effort: read-only.
	n, err := unix.Read(fd, buf[:])
	if err != nil {
		return false, false, fmt.Errorf("read %s/cgroup.events: %w", dir, err)
	}
	for line := range bytes.Lines(buf[:n]) {
		k, v, _ := bytes.Cut(bytes.TrimSpace(line), []byte(" "))
		switch string(k) {
		case "populated":
			populated = string(v) == "1"
		case "frozen":
			frozen = string(v) == "1"
		}
	}
	return populated, frozen, nil
}

func writeFile(name, s string) error {
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: name, Err: err}
	}
	_, err = unix.Write(fd, []byte(s))
	if e := unix.Close(fd); err == nil {
		err = e
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	return nil
}

// cgroupPids lists the processes of the cgroup at dir and of every cgroup
// below it (a nested agent's, say).
func cgroupPids(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return pids, err
	}
	for _, e := range ents {
		if e.IsDir() {
			sub, err := cgroupPids(filepath.Join(dir, e.Name()))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return pids, err
			}
			pids = append(pids, sub...)
		}
	}
	return pids, nil
}

// inCgroup reports whether process pid is in the cgroup at hierarchy path
// p or below it.
func inCgroup(pid int, p string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if cg, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			return cg == p || strings.HasPrefix(cg, p+"/")
		}
	}
	return false
}

// cgroupGroup is a Group held by a cgroup: every process forked inside it
// stays inside it, and the kernel says when the last one has exited.
type cgroupGroup struct {
	killRecord
	tree *cgroupTree
	path string // hierarchy path
	dir  string
	env  []string
	done chan struct{}

	mu       sync.Mutex // guards the fields below
	started  bool       // ForkExec has begun: an empty group is done
	shell    int        // the first process, 0 before ForkExec
	ended    bool       // done is closed
	wd       int        // inotify watch, or -1
	fd       int        // the cgroup's directory until ForkExec, or -1
	retrying bool       // a failed read of cgroup.events is to be tried again (update)
}

// newGroup returns the cgroup of group n: the spare if it was made for n,
// else one made now.
func (t *cgroupTree) newGroup(n int64) (Group, error) {
	if g := t.spare.take(n); g != nil {
		return g, nil
	}
	g, err := t.makeGroup(n, true)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// makeGroup makes the cgroup of group n, watched, with its directory open
// for ForkExec. If reuse, a cgroup of that name that exists and is empty
// is taken: this process made it before it exec'd itself in place (its
// spare), and NewGroup never issues the number of a group it adopted.
func (t *cgroupTree) makeGroup(n int64, reuse bool) (*cgroupGroup, error) {
	name := "t" + strconv.FormatInt(n, 10)
	g := &cgroupGroup{
		tree: t, path: path.Join(t.path, name), dir: filepath.Join(t.dir, name),
		env: append(t.env[:len(t.env):len(t.env)], TerminalEnv+"="+strconv.FormatInt(n, 10)), done: make(chan struct{}), wd: -1, fd: -1,
	}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		populated, _, perr := readEvents(g.dir)
		if !reuse || !errors.Is(err, fs.ErrExist) || perr != nil || populated {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
	}
	fd, err := unix.Open(g.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open cgroup %s: %w", g.dir, err), rmdir(g.dir))
	}
	wd, err := t.w.add(filepath.Join(g.dir, "cgroup.events"), g.update)
	if err != nil {
		unix.Close(fd) // Best effort: a directory opened for reading.
		return nil, errors.Join(err, rmdir(g.dir))
	}
	g.mu.Lock()
	g.wd, g.fd = wd, fd
	g.mu.Unlock()
	t.track(g, true)
	return g, nil
}

// ForkExec implements Group: the process is born in the cgroup
// (CLONE_INTO_CGROUP). The group counts as started from just before the
// clone, so that the watcher's call for the cgroup's first change (the
// process entering, or already gone) can end it, and no read of
// cgroup.events is needed after the fork.
func (g *cgroupGroup) ForkExec(argv0 string, argv []string, attr *syscall.ProcAttr) (int, error) {
	g.mu.Lock()
	fd := g.fd
	g.fd, g.started = -1, true
	g.mu.Unlock()
	if fd < 0 {
		return 0, fmt.Errorf("start in cgroup %s: the group has started or closed", g.dir)
	}
	defer unix.Close(fd) // Best effort: a directory opened for reading.
	a := *attr
	sys := syscall.SysProcAttr{}
	if a.Sys != nil {
		sys = *a.Sys
	}
	sys.UseCgroupFD, sys.CgroupFD = true, fd
	a.Sys, a.Env = &sys, withEnv(a.Env, g.env)
	pid, err := g.tree.reap.forkExec(argv0, argv, &a)
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	g.shell = pid
	g.mu.Unlock()
	return pid, nil
}

// update reads cgroup.events and ends the group once a started group is
// no longer populated. The watcher calls it on every change. A read that
// fails (the agent is out of descriptors: EMFILE, ENFILE) is tried again
// every retryEvents, for as long as the group is started, not ended and
// watched: the change it missed is not signalled again, and without it
// the group would never end.
func (g *cgroupGroup) update() {
	populated, _, err := readEvents(g.dir)
	gone := errors.Is(err, fs.ErrNotExist)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started && !g.ended && (err == nil && !populated || gone) {
		g.ended = true
		close(g.done)
	}
	if err != nil && !gone && g.started && !g.ended && g.wd >= 0 && !g.retrying {
		g.retrying = true
		time.AfterFunc(retryEvents, func() {
			g.mu.Lock()
			g.retrying = false
			g.mu.Unlock()
			g.update()
		})
	}
}

// retryEvents is how long update waits before it reads cgroup.events
// again after a read failed.
const retryEvents = 100 * time.Millisecond

func (g *cgroupGroup) Done() <-chan struct{} { return g.done }

func (g *cgroupGroup) Empty() bool {
	g.update()
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

func (g *cgroupGroup) belongs(p proc) bool { return inCgroup(p.pid, g.path) }

func (g *cgroupGroup) Members() ([]Member, error) {
	pids, err := cgroupPids(g.dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", g.dir, err)
	}
	return describe(pids), nil
}

func (g *cgroupGroup) Signal(sigs ...unix.Signal) (bool, error) {
	return signalUntilStable(func() ([]int, error) { return cgroupPids(g.dir) }, sigs, g.belongs)
}

func (g *cgroupGroup) Kill() (bool, error) {
	pids, err := cgroupPids(g.dir)
	if err != nil {
		return false, fmt.Errorf("list %s: %w", g.dir, err)
	}
	reached := anyAlive(pids)
	// Noted before it is sent, as the terminal may see its processes gone
	// before Kill returns; withdrawn if it was not, so that the exit does
	// not claim a SIGKILL on the word of a failed write.
	withdraw := g.noteAhead(reached)
	if !g.tree.hasKill {
		signalled, err := killEach(g.dir)
		if !signalled {
			withdraw()
			return false, err
		}
		killSent(g.dir)
		return reached, err
	}
	if err := writeFile(filepath.Join(g.dir, "cgroup.kill"), "1"); err != nil {
		withdraw()
		return false, fmt.Errorf("kill %s: %w", g.dir, err)
	}
	killSent(g.dir)
	return reached, nil
}

// anyAlive reports whether one of pids is alive and not already ended by
// an earlier signal: one that a SIGKILL sent now reaches.
func anyAlive(pids []int) bool {
	return slices.ContainsFunc(pids, func(pid int) bool {
		p, ok := readProc(pid)
		return ok && p.live() && !p.doomed()
	})
}

func (g *cgroupGroup) Close() error {
	g.tree.track(g, false)
	g.mu.Lock()
	wd, shell, fd := g.wd, g.shell, g.fd
	g.wd, g.fd = -1, -1
	g.mu.Unlock()
	var err error
	if fd >= 0 {
		unix.Close(fd) // Best effort: a directory opened for reading.
	}
	if wd >= 0 {
		err = g.tree.w.remove(wd)
	}
	g.tree.reap.release(shell)
	return errors.Join(err, removeTree(g.dir))
}

// sweepCgroups kills the processes of the cgroups of the terminals of only
// that belong to dead instances of this agent's pid namespace and sweep
// scope, wherever in the cgroup2 hierarchy this agent can see and write
// them, and removes the cgroups: with a nil set, each dead instance's
// whole cgroup. It returns how many cgroups it removed.
func sweepCgroups(j *judge, only terminalSet) (int, error) {
	place, err := findCgroup2()
	if err != nil {
		return 0, nil // no cgroup2 here: nothing to sweep
	}
	var dirs, insts []string
	walkErr := filepath.WalkDir(place.mount, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable or gone: not ours to judge
		}
		if !d.IsDir() {
			return nil
		}
		name, ok := strings.CutPrefix(d.Name(), instanceDirPrefix)
		if ok && j.suspect(name) {
			dirs, insts = append(dirs, p), append(insts, name)
			return fs.SkipDir
		}
		return nil
	})
	var errs []error
	if walkErr != nil {
		errs = append(errs, walkErr)
	}
	j.confirm()
	n := 0
	for i, dir := range dirs {
		if !j.dead(insts[i]) {
			continue
		}
		for _, dir := range terminalDirs(dir, insts[i], only) {
			_, err := os.Stat(filepath.Join(dir, "cgroup.kill"))
			if err := killTree(dir, err == nil, SweepTimeout, nil, nil); err != nil {
				errs = append(errs, fmt.Errorf("sweep %s: %w", dir, err))
				continue
			}
			if err := removeTree(dir); err != nil {
				errs = append(errs, fmt.Errorf("sweep %s: %w", dir, err))
				continue
			}
			n++
		}
		if only != nil {
			// With its last terminal stopped, the instance's cgroup (and
			// the spare made ahead) goes too; else a sweep removes it.
			if populated, _, err := readEvents(dir); err == nil && !populated {
				errs = append(errs, removeTree(dir))
			}
		}
	}
	return n, errors.Join(errs...)
}

// terminalDirs returns the cgroups of the terminals of only in the cgroup
// dir of instance inst (named as makeGroup names them), or dir itself for a
// nil set.
func terminalDirs(dir, inst string, only terminalSet) []string {
	if only == nil {
		return []string{dir}
	}
	var dirs []string
	for k := range only {
		if k[0] == inst && k[1] != "" {
			dirs = append(dirs, filepath.Join(dir, "t"+k[1]))
		}
	}
	slices.Sort(dirs)
	return dirs
}

// any reports whether g holds a process. (Here: only the cgroup kill
// asks.)
func (g *givenUp) any() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.ids) > 0
}
