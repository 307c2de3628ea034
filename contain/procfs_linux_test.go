package contain

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// statFields splits every stat line of this machine, and a few no process
// writes, as bytes.Fields does, up to the fields it has room for; and
// parseStat reads what it must of them.
func TestParseStat(t *testing.T) {
	pids, err := listPids()
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, pid := range pids {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			lines = append(lines, b)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("read %d stat lines, want this process's and more", len(lines))
	}
	made := []string{
		"", " ", "\n", "a", " a  b\n", "a\nb c\n\n", "  a b c  ",
		"0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52\n",
	}
	for _, m := range made {
		lines = append(lines, []byte(m))
	}
	for _, b := range lines {
		var f [50][]byte
		got := f[:statFields(b, f[:])]
		want := bytes.Fields(b)
		want = want[:min(len(want), len(f))]
		if len(got) != len(want) || !slices.EqualFunc(got, want, bytes.Equal) {
			t.Errorf("statFields(%q) = %q, want %q", b, got, want)
		}
	}

	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	sid, _ := unix.Getsid(0)
	if p, ok := parseStat(os.Getpid(), self); !ok || p.ppid != os.Getppid() || p.sid != sid || p.pgid != unix.Getpgrp() {
		t.Errorf("this process: %+v, %v; want ppid %d, session %d, group %d", p, ok, os.Getppid(), sid, unix.Getpgrp())
	}
	tests := []struct {
		name, line string
		want       proc
		ok         bool
	}{
		{"a name with spaces and parentheses, no exit_code",
			"7 (a) (b c) S 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
			proc{pid: 7, state: 'S', ppid: 1, pgid: 7, sid: 7, start: 99}, true},
		{"a zombie, exiting, blocking SIGTERM, with its exit code",
			"8 (sh) Z 1 8 8 0 -1 4194316 0 0 0 0 0 0 0 0 20 0 1 0 123 0 0 0 0 0 0 0 0 0 16384 256 65538 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 9\n",
			proc{pid: 8, state: 'Z', ppid: 1, pgid: 8, sid: 8, exiting: true, start: 123, sigBlocked: 16384, sigIgnore: 256, sigCatch: 65538, exitCode: 9}, true},
		{"up to sigcatch, no further", "9 (x) S 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0 0 0 0 0 0 0 0 7 0",
			proc{pid: 9, state: 'S', ppid: 1, pgid: 9, sid: 9, start: 5, sigIgnore: 7}, true},
		{"short of sigcatch", "9 (x) S 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0 0 0 0 0 0 0 0 0", proc{}, false},
		{"a field not a number", "10 (x) S 1 x 10 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0 0 0 0 0 0 0 0 0 0 0\n", proc{}, false},
		{"no closing parenthesis", "11 (x S 1 11 11", proc{}, false},
		{"nothing after the name", "12 (x)", proc{}, false},
	}
	for _, tt := range tests {
		p, ok := parseStat(tt.want.pid, []byte(tt.line))
		if ok != tt.ok || ok && p != tt.want {
			t.Errorf("%s: parseStat = %+v, %v; want %+v, %v", tt.name, p, ok, tt.want, tt.ok)
		}
	}
}

// BenchmarkScanProcs measures a look at every process of the machine, as
// a Subreaper or Session mode look, a kill's included, begins: its cost
// grows with the processes the machine runs. Run it beside many (for i in
// $(seq 1400); do sleep 300 & done) to see it matter.
func BenchmarkScanProcs(b *testing.B) {
	var n int
	for b.Loop() {
		procs, err := scanProcs()
		if err != nil {
			b.Fatal(err)
		}
		n = len(procs)
	}
	b.ReportMetric(float64(n), "procs")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(max(n, 1)), "ns/proc")
}
