package contain

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/internal/testloop"
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

// Kill takes the scan under way, if one is: it makes no scan of its own,
// where before it waited for that scan to end and then made a whole one
// more.
func TestKillTakesTheScanUnderWay(t *testing.T) {
	markerModes(t, func(t *testing.T, c *Containment, s *markerMode) {
		// A scan held under way until Kill waits for it, once armed; and
		// the scans that Kill makes itself, counted. Set before any
		// goroutine of the test's group scans, and while no scan is
		// under way (its scanner reads seen).
		held, release := make(chan struct{}), make(chan struct{})
		var armed atomic.Bool
		var once sync.Once
		var byKill atomic.Int32
		seen := s.scans.seen
		s.scans.mu.Lock()
		for s.scans.scanning {
			s.scans.done.Wait()
		}
		s.scans.seen = func(procs []proc) {
			if armed.Load() {
				once.Do(func() {
					close(held)
					<-release
				})
			}
			if stackHas("(*markerGroup).Kill") {
				byKill.Add(1)
			}
			seen(procs)
		}
		s.scans.mu.Unlock()
		st := start(t, c, "exec sleep 300")
		waitMembers(t, st.g, 1, "sleep 300")
		armed.Store(true)
		go s.scans.scan()
		<-held
		killed := make(chan bool)
		go func() {
			reached, err := st.g.Kill()
			if err != nil {
				t.Error(err)
			}
			killed <- reached
		}()
		for deadline := time.Now().Add(testloop.Wait); !waitsForAScan("(*markerGroup).Kill"); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				close(release)
				t.Fatal("Kill never waited for the scan under way")
			}
		}
		close(release)
		if !<-killed {
			t.Error("Kill did not reach the sleep")
		}
		if n := byKill.Load(); n != 0 {
			t.Errorf("Kill during a scan made %d scans of its own, want 0", n)
		}
		st.reap(t)
		waitDone(t, st.g)
		st.g.Close()
	})
}

// stackHas reports whether the calling goroutine runs fn.
func stackHas(fn string) bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), fn)
}

// waitsForAScan reports whether a goroutine running fn waits for a scan
// to end (on the scanner's sync.Cond).
func waitsForAScan(fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, fn) && strings.Contains(g, "sync.(*Cond).Wait") {
			return true
		}
	}
	return false
}
