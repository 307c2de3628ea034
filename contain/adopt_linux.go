package contain

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// adopt registers pid, a group's first process that this process started
// before it exec'd itself in place, as forkExec would have: it is left to
// its starter until release.
func (r *reaper) adopt(pid int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.registered[pid] = true
	r.mu.Unlock()
}

// adopt takes over the cgroup of group n, made by this process before it
// exec'd itself in place: see Containment.Adopt.
func (t *cgroupTree) adopt(n int64, pid int, _ uint64) (Group, error) {
	name := "t" + strconv.FormatInt(n, 10)
	g := &cgroupGroup{
		tree: t, path: path.Join(t.path, name), dir: filepath.Join(t.dir, name),
		env: append(t.env[:len(t.env):len(t.env)], TerminalEnv+"="+strconv.FormatInt(n, 10)), done: make(chan struct{}), wd: -1, fd: -1,
	}
	if fi, err := os.Stat(g.dir); err != nil || !fi.IsDir() {
		return nil, errors.Join(fmt.Errorf("cgroup %s is gone", g.dir), err)
	}
	wd, err := t.w.add(filepath.Join(g.dir, "cgroup.events"), g.update)
	if err != nil {
		return nil, err
	}
	t.reap.adopt(pid)
	g.mu.Lock()
	g.wd, g.shell, g.started = wd, pid, true
	g.mu.Unlock()
	t.track(g, true)
	g.update()
	return g, nil
}

func (g *cgroupGroup) number() (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(path.Base(g.path), "t"), 10, 64)
	return n, err == nil
}
