package contain

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// fieldsStat is parseStat as it was written with bytes.Fields (but for a
// line of 20 to 31 fields, which made it panic): the oracle for the parser
// that allocates nothing.
func fieldsStat(pid int, b []byte) (proc, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return proc{}, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 32 {
		return proc{}, false
	}
	var bad bool
	num := func(k int) uint64 {
		v, err := strconv.ParseUint(string(f[k]), 10, 64)
		bad = bad || err != nil
		return v
	}
	flags := num(6)
	p := proc{
		pid: pid, state: f[0][0],
		ppid: int(num(1)), pgid: int(num(2)), sid: int(num(3)),
		exiting: flags&pfExiting != 0, kthread: flags&pfKthread != 0,
		start:      num(19),
		sigPending: num(28), sigIgnore: num(30), sigCatch: num(31),
	}
	if len(f) > 49 {
		p.exitCode = int(num(49))
	}
	return p, !bad
}

// parseStat reads every process this machine has as bytes.Fields would,
// and a few lines no process writes.
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
	self, _ := os.ReadFile("/proc/self/stat")
	made := [][]byte{
		// A command name with spaces and parentheses, no exit_code.
		[]byte("7 (a) (b c) S 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"),
		// Every field, exit_code last, two spaces in a row.
		[]byte("8 (sh) Z  1 8 8 0 -1 4194316 0 0 0 0 0 0 0 0 20 0 1 0 123 0 0 0 0 0 0 0 0 0 0 256 65538 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 9"),
		[]byte("9 (short) S 1 9 9"),
		[]byte("10 (no close"),
		[]byte("11 (x) S 1 x 11 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0"),
		[]byte("12 (x)"),
		bytes.Replace(self, []byte(")"), []byte(") "), 1), // two spaces after the name
	}
	for i, b := range append(lines, made...) {
		got, gotOK := parseStat(i, b)
		want, wantOK := fieldsStat(i, b)
		if got != want || gotOK != wantOK {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", b, got, gotOK, want, wantOK)
		}
	}
	sid, _ := unix.Getsid(0)
	if p, ok := parseStat(os.Getpid(), self); !ok || p.ppid != os.Getppid() || p.sid != sid || p.pgid != unix.Getpgrp() {
		t.Errorf("this process: %+v, %v; want ppid %d, session %d, group %d", p, ok, os.Getppid(), sid, unix.Getpgrp())
	}
	if p, ok := parseStat(8, made[1]); !ok || p.exitCode != 9 || p.start != 123 || p.sigIgnore != 256 {
		t.Errorf("zombie line: %+v, %v", p, ok)
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

// KillAll in a mode that finds processes by looking (Subreaper, Session)
// kills a process that carries the instance's marker and that nothing else
// places (no group holds it, the reaper leaves it: it is an os/exec child
// in the agent's session), at every look (the marker is read once and
// remembered); it leaves one with another instance's marker alone.
func TestKillAllKillsTheMarked(t *testing.T) {
	eachMode(t, func(t *testing.T, c *Containment) {
		if c.Mode() == Cgroup {
			t.Skip("cgroup mode kills what its cgroups hold, not what carries the marker")
		}
		other := sleepWith(t, instance{pid: 1})
		for i := range 2 {
			marked := sleepWith(t, c.inst)
			if err := c.KillAll(); err != nil {
				t.Fatal(err)
			}
			if running(marked.Process.Pid) {
				t.Errorf("KillAll %d left the marked process %d running", i+1, marked.Process.Pid)
			} else if err := marked.Wait(); marked.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("KillAll %d: the marked process ended with %v, want SIGKILL", i+1, err)
			}
		}
		if !running(other.Process.Pid) {
			t.Errorf("KillAll killed %d, another instance's", other.Process.Pid)
		}
	})
}

// sleepWith starts sleep 300 with inst's marker, with os/exec.
func sleepWith(t *testing.T, inst instance) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "300")
	cmd.Env = inst.env()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}
