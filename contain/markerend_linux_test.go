package contain

import (
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// markerModes runs f in each marker mode (Subreaper and Session) this run
// covers: what cgroup mode does not scan for.
func markerModes(t *testing.T, f func(t *testing.T, c *Containment, s *markerMode)) {
	eachMode(t, func(t *testing.T, c *Containment) {
		s, ok := c.m.(*markerMode)
		if !ok {
			t.Skip("cgroup mode makes no scan")
		}
		f(t, c, s)
	})
}

// The groups that look at one scan at once, as every terminal does at the
// agent's end, read the mode's facts of its processes once between them.
// Before, each group read them (three stats of each orphan's /proc/PID/fd
// in Subreaper mode), and at the end of an agent of 9 terminals the facts
// cost as much again as the scan.
func TestGroupsReadAScansFactsOnce(t *testing.T) {
	s := newMarkerMode(instance{pid: 1}, 0)
	procs, err := s.scans.scan()
	if err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int32
	s.facts = func(ps []proc) map[int]procFacts {
		if len(ps) > 0 && &ps[0] == &procs[0] {
			reads.Add(1)
		}
		return map[int]procFacts{}
	}
	var looks sync.WaitGroup
	for i := range 9 {
		g := newMarkerGroup(s, int64(i))
		g.shell, g.sid = procs[i].pid, procs[i].sid
		g.known[g.shell] = procs[i].start
		looks.Go(func() {
			if _, _, err := g.look(func([]proc) bool { return true }); err != nil {
				t.Error(err)
			}
		})
	}
	looks.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("9 groups looking at one scan read its facts %d times, want 1", n)
	}
}

// Signal scans every process once: its later rounds, which look for what
// the members forked meanwhile, read only the processes that appeared
// since. Before, each round was a scan of every process, and a stop of a
// terminal with a fork loop, at the agent's end on a loaded machine, took
// several seconds of scans before its SIGKILL was due.
func TestSignalScansOnce(t *testing.T) {
	markerModes(t, func(t *testing.T, c *Containment, s *markerMode) {
		st := start(t, c, "sleep 300 & sleep 300 & wait")
		defer func() {
			st.g.Kill()
			st.reap(t)
			waitDone(t, st.g)
			st.g.Close()
		}()
		waitMembers(t, st.g, 2, "sleep 300")
		before := scansMade(&s.scans)
		reached, err := st.g.Signal(unix.SIGCONT)
		if err != nil || !reached {
			t.Fatalf("Signal(SIGCONT) = %v, %v; want reached", reached, err)
		}
		if n := scansMade(&s.scans) - before; n != 1 {
			t.Errorf("Signal to a group of 3 processes made %d scans of every process, want 1", n)
		}
	})
}
