package contain

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// parents finds each parent by pid wherever the scan lists it, and none
// where the parent is gone or its pid names a newer process.
func TestParents(t *testing.T) {
	procs := []proc{
		{pid: 1, ppid: 0, start: 1},
		{pid: 10, ppid: 1, start: 5},
		{pid: 11, ppid: 10, start: 6},
		{pid: 12, ppid: 99, start: 7}, // its parent is gone
		{pid: 20, ppid: 30, start: 8}, // its parent's pid was reused by a newer process
		{pid: 30, ppid: 1, start: 9},
		{pid: 5, ppid: 11, start: 10}, // a lower pid than its parent's (pids wrapped)
	}
	want := []int{-1, 0, 1, -1, -1, 0, 2}
	if got := parents(procs); !slices.Equal(got, want) {
		t.Errorf("parents = %v, want %v", got, want)
	}
}

// A group's members are its session, what it recorded and their
// descendants, however deep and in whatever order the scan lists them;
// not a process whose parent's pid names a newer process.
func TestAttribute(t *testing.T) {
	s := newMarkerMode(instance{pid: 1}, 0)
	g := newMarkerGroup(s, 1)
	g.shell, g.sid = 100, 100
	g.known[100] = 50
	procs := []proc{
		{pid: 7, ppid: 103, start: 60, state: 'S'}, // the shell's great-grandchild, listed before its parent
		{pid: 100, ppid: 1, sid: 100, start: 50, state: 'S'},
		{pid: 101, ppid: 100, sid: 101, start: 51, state: 'S'}, // setsid: in by ancestry
		{pid: 102, ppid: 1, sid: 102, start: 52, state: 'S'},   // another session
		{pid: 103, ppid: 101, sid: 103, start: 53, state: 'S'},
		{pid: 104, ppid: 102, sid: 104, start: 54, state: 'S'},
		{pid: 105, ppid: 106, sid: 105, start: 55, state: 'S'}, // 106 is newer: not its parent
		{pid: 106, ppid: 100, sid: 100, start: 56, state: 'S'},
	}
	var got []int
	for _, p := range g.attribute(procs, parents(procs), nil) {
		got = append(got, p.pid)
	}
	want := []int{100, 101, 103, 106, 7} // oldest first
	if !slices.Equal(got, want) {
		t.Errorf("members %v, want %v", got, want)
	}
}

// A look may attribute a scan listed before a member was forked (one that
// another look made, or one older than the last look's): the member stays
// recorded while it runs, so that a signal is not refused to it, and is
// forgotten once its pid no longer names it.
func TestAttributeKeepsWhatAnOlderScanMisses(t *testing.T) {
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	member, ok := readProc(sleep.Process.Pid)
	if !ok {
		t.Fatal("cannot read the sleep's stat")
	}
	self, _ := readProc(os.Getpid())
	s := newMarkerMode(instance{pid: 1}, 0)
	g := newMarkerGroup(s, 1)
	g.shell, g.sid = self.pid, self.sid
	g.known[self.pid] = self.start
	const gone = 1 << 30 // above any pid_max
	g.known[member.pid], g.known[gone] = member.start, 5

	older := []proc{self} // listed before the member and the gone one
	g.attribute(older, parents(older), nil)
	if !g.recorded(member) {
		t.Error("the running member was forgotten by a scan that does not hold it")
	}
	if g.recorded(proc{pid: gone, start: 5}) {
		t.Error("a process that is gone stays recorded")
	}

	sleep.Process.Kill()
	sleep.Wait()
	g.attribute(older, parents(older), nil)
	if g.recorded(member) {
		t.Error("the member stays recorded once it is reaped")
	}
}

// BenchmarkAttribute measures what a kill's look spends, beyond the scan,
// to work out the members of 9 terminals among every process of the
// machine (run it beside many: for i in $(seq 1400); do sleep 300 & done).
func BenchmarkAttribute(b *testing.B) {
	procs, err := scanProcs()
	if err != nil {
		b.Fatal(err)
	}
	s := newMarkerMode(instance{pid: 1}, 0)
	var groups []*markerGroup
	for i := range 9 {
		g := newMarkerGroup(s, int64(i))
		g.shell, g.sid = procs[i].pid, procs[i].sid
		g.known[g.shell] = procs[i].start
		groups = append(groups, g)
	}
	for b.Loop() {
		parent := parents(procs)
		for _, g := range groups {
			g.attribute(procs, parent, nil)
		}
	}
	b.ReportMetric(float64(len(procs)), "procs")
}

// Empty takes the last scan when it read the shell ended (the watch's
// look at the shell's exit), but only its "empty": a member it read alive
// is looked for again in a scan of its own, as is everything when the
// last scan read the shell alive. The pids are above any pid_max, so the
// scans Empty makes find none of them.
func TestEmptyTakesALateScan(t *testing.T) {
	const shell, member = 1 << 30, 1<<30 + 1
	ended := proc{pid: shell, ppid: 1, sid: shell, start: 50, state: 'Z'}
	running := proc{pid: shell, ppid: 1, sid: shell, start: 50, state: 'S'}
	child := proc{pid: member, ppid: 1, sid: shell, start: 51, state: 'S'}
	for _, tc := range []struct {
		name  string
		last  []proc
		scans uint64 // scans Empty makes
	}{
		{"the shell ended, no member", []proc{ended}, 0},
		{"the shell ended, a member alive", []proc{ended, child}, 1},
		{"the shell alive", []proc{running, child}, 1},
		{"the shell's pid taken by a newer process", []proc{{pid: shell, start: 60, state: 'Z'}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMarkerMode(instance{pid: 1}, 0)
			m.facts = func([]proc) map[int]procFacts { return nil }
			g := newMarkerGroup(m, 1)
			g.shell, g.sid = shell, shell
			g.known[shell] = 50
			s := &g.m.scans
			s.last, s.started, s.finished = tc.last, 1, 1
			if !g.Empty() {
				t.Error("Empty = false, want true: no member is left")
			}
			if got := s.started - 1; got != tc.scans {
				t.Errorf("Empty made %d scans, want %d", got, tc.scans)
			}
		})
	}
}

// A scan that reads each of the processes a look waited for ended (a
// zombie, exiting, gone, or its pid taken by a newer process) tells that
// they have ended; one that reads any of them running does not.
func TestReadEnded(t *testing.T) {
	a := proc{pid: 10, start: 5, state: 'S'}
	b := proc{pid: 11, start: 6, state: 'S'}
	for _, tc := range []struct {
		name string
		scan []proc
		want bool
	}{
		{"both running", []proc{a, b}, false},
		{"one running", []proc{{pid: 10, start: 5, state: 'Z'}, b}, false},
		{"zombie and gone", []proc{{pid: 10, start: 5, state: 'Z'}}, true},
		{"exiting and a newer process on the pid", []proc{{pid: 10, start: 5, state: 'R', exiting: true}, {pid: 11, start: 9, state: 'S'}}, true},
		{"both gone", nil, true},
	} {
		if got := readEnded([]proc{a, b})(tc.scan); got != tc.want {
			t.Errorf("%s: readEnded = %v, want %v", tc.name, got, tc.want)
		}
	}
}
