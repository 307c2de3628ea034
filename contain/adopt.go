package contain

import (
	"fmt"
	"strconv"

	"shellagent/procexit"
)

// Adopt takes over group n of this instance, whose first process pid was
// started by this same process before it exec'd itself in place (a
// daemon's upgrade): pid is still its child, unreaped, and the group's
// processes are where they were. tty is the device number of the group's
// terminal (0 if unknown). The group then works as one NewGroup made and
// ForkExec started; NewGroup never issues n again.
func (c *Containment) Adopt(n int64, pid int, tty uint64) (Group, error) {
	for cur := c.next.Load(); cur < n && !c.next.CompareAndSwap(cur, n); cur = c.next.Load() {
	}
	a, ok := c.m.(adopter)
	if !ok {
		return nil, fmt.Errorf("adopt terminal group %d: %s containment cannot", n, c.mode)
	}
	g, err := a.adopt(n, pid, tty)
	if err != nil {
		return nil, fmt.Errorf("adopt terminal group %d (pid %d): %w", n, pid, err)
	}
	return g, nil
}

// adopter is a mode that can take over its groups after an exec in place.
type adopter interface {
	adopt(n int64, pid int, tty uint64) (Group, error)
}

// GroupNumber returns the number of g in its instance (its TerminalEnv
// value), which Adopt takes; false for a Group of another package.
func GroupNumber(g Group) (int64, bool) {
	if g, ok := g.(interface{ number() (int64, bool) }); ok {
		return g.number()
	}
	return 0, false
}

func (g *markerGroup) number() (int64, bool) {
	n, err := strconv.ParseInt(g.term, 10, 64)
	return n, err == nil
}

// adopt takes over a marker group: see Containment.Adopt.
func (s *markerMode) adopt(n int64, pid int, tty uint64) (Group, error) {
	g := newMarkerGroup(s, n)
	p, ok := readProc(pid)
	if !ok {
		return nil, fmt.Errorf("process %d: %w", pid, procexit.ErrGone)
	}
	s.add(g)
	if r, ok := s.reap.(interface{ adopt(pid int) }); ok {
		r.adopt(pid)
	}
	g.mu.Lock()
	g.tty, g.shell = tty, pid
	g.known[pid] = p.start
	if p.sid == pid {
		g.sid = pid
	}
	g.watched = make(chan struct{})
	g.mu.Unlock()
	go g.watch()
	return g, nil
}
