package contain

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// openSubreaper opens Subreaper mode: the agent becomes a child
// subreaper, so orphans are re-parented to it, its reaper collects them
// (see reaper for the rule), and the processes of a terminal are found in
// /proc (markerGroup), orphans among them by the terminal they hold or
// the marker they carry (orphanFacts).
func openSubreaper(inst instance) (*markerMode, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("become a child subreaper: %w", err)
	}
	undo := func() error {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
			return fmt.Errorf("stop being a child subreaper: %w", err)
		}
		return nil
	}
	// A process in the middle of an exec shows an empty environment for
	// a moment; an orphan's marker is worth waiting 20 ms for.
	s := newMarkerMode(inst, 20*time.Millisecond)
	s.facts, s.undo = s.orphanFacts, undo
	r, err := startReaper(s.scans.scan, s.known)
	if err != nil {
		return nil, errors.Join(err, undo())
	}
	s.reap = r
	return s, nil
}

// orphanFacts reads what the groups need to know of the live children of
// the agent among procs that no group started (orphans, mostly): the
// terminals they hold and their markers. Nothing is locked meanwhile:
// reading a marker can take a moment (see markerCache.get).
func (s *markerMode) orphanFacts(procs []proc) map[int]procFacts {
	ttys := make(map[uint64]bool)
	for _, g := range s.snapshot() {
		if tty := g.terminal(); tty != 0 {
			ttys[tty] = true
		}
	}
	out := make(map[int]procFacts)
	for _, p := range procs {
		if p.ppid != s.self || !p.live() || s.reap.isRegistered(p.pid) {
			continue
		}
		o := procFacts{start: p.start, ttys: terminalsOf(p.pid)}
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

// known reports whether a group recorded p as a member: rule 4 of the
// reaper.
func (s *markerMode) known(p proc) bool {
	for _, g := range s.snapshot() {
		if g.recorded(p) {
			return true
		}
	}
	return false
}

// terminal returns the device number of the group's terminal, 0 if none.
func (g *markerGroup) terminal() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tty
}
