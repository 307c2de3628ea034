package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// ticker prints its pid, then "tick N" every 100 ms.
const ticker = "/bg echo pid $$; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done"

// tickerTicks reads a ticker's output: its pid, and how many ticks it holds,
// every one complete, once, and in order from "tick 1" (-1 if not).
func tickerTicks(out []byte) (pid, n int) {
	lines := strings.Split(string(out), "\r\n")
	lines = lines[:len(lines)-1] // the part after the last line break
	if len(lines) == 0 {
		return 0, 0
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(lines[0], "pid "))
	if err != nil {
		return 0, -1
	}
	for i, l := range lines[1:] {
		if l != "tick "+strconv.Itoa(i+1) {
			return pid, -1
		}
	}
	return pid, len(lines) - 1
}

// upgradeKeepsTicker upgrades the daemon (process pid) in place to bin
// while a ticker (process ticker) runs in session sid, and checks, from a
// new relay that resumes it, that the ticker runs on with the same pid
// and every tick is there once, then new ticks come.
func (d *daemonFixture) upgradeKeepsTicker(bin string, pid, tickerPid int, sid string, seen int) int {
	t := d.t
	t.Helper()
	if _, stderr, code := d.run(bin, "daemon", "upgrade", "--socket", d.socket); code != 0 {
		t.Fatalf("upgrade to %s: exit %d, %s", bin, code, stderr)
	}
	if got := exe(t, pid); got != bin {
		t.Fatalf("after the upgrade the daemon runs %s, want %s", got, bin)
	}
	if ppid := parentOf(t, tickerPid); ppid != pid {
		t.Fatalf("after the upgrade the ticker %d has parent %d, want the daemon %d", tickerPid, ppid, pid)
	}
	r := d.relayOf(bin)
	defer func() { r.c.Close(); r.exited() }()
	r.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": d.cwd, "replayFrom": map[string]string{"type": "start"}}, nil)
	p, replayed := tickerTicks(r.c.Output(sid, "term_1"))
	if p != tickerPid || replayed < seen {
		t.Fatalf("after the upgrade the replay of term_1 has pid %d and %d ticks (-1: a gap or a duplicate); want pid %d and at least the %d seen:\n%q",
			p, replayed, tickerPid, seen, r.c.Output(sid, "term_1"))
	}
	var live int
	r.c.WaitFor("new ticks", func(*acptest.Msg) bool {
		p, live = tickerTicks(r.c.Output(sid, "term_1"))
		return live < 0 || live >= replayed+3
	})
	if p != tickerPid || live < replayed+3 {
		t.Fatalf("after the replay's %d ticks: pid %d, %d ticks (-1: a gap or a duplicate):\n%q", replayed, p, live, r.c.Output(sid, "term_1"))
	}
	return live
}

// parentOf returns the parent of process pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	f := statFields(pid)
	if len(f) < 2 {
		t.Fatalf("process %d: no /proc/%d/stat", pid, pid)
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// statFields returns the fields of /proc/PID/stat after the command name
// (state, ppid, ...), nil if the process is gone.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// NEWBIN daemon upgrade hands a session with a background ticker to
// NEWBIN: the daemon runs NEWBIN with the same pid, the ticker runs on
// with its pid (still the daemon's child), and a relay that resumes the
// session gets every tick from the first once, in order, then new ones.
// Three upgrades in a row, alternating between two builds (NEWBIN is
// otherBinary, a copy with another build ID: no go build, so that it runs
// in each containment mode, .ci/run); TestDaemonUpgradeKeepsWorkSoak
// does 20 to a real second build.
func TestDaemonUpgradeKeepsWork(t *testing.T) {
	t.Parallel()
	upgradeKeepsWork(t, otherBinary, 3)
}

// TestDaemonUpgradeKeepsWorkSoak is TestDaemonUpgradeKeepsWork with 20
// upgrades in a row to a build with another version linked in: the
// daemon's descriptors and memory stay flat (SHELLAGENT_LONG=1).
func TestDaemonUpgradeKeepsWorkSoak(t *testing.T) {
	testloop.Long(t, "20 upgrades in place, to a second go build")
	t.Parallel()
	upgradeKeepsWork(t, buildNew(t), 20)
}

// upgradeKeepsWork upgrades a daemon with a ticker n times, alternating
// between plainBinary and newBin, and checks that its descriptors and
// memory stay flat.
func upgradeKeepsWork(t *testing.T, newBin string, n int) {
	d := newDaemonFixture(t)
	cmd := d.startOwnDaemon(plainBinary)
	pid := cmd.Process.Pid

	r := d.relayOf(plainBinary)
	sid := r.session(d.cwd)
	r.prompt(sid, ticker)
	var tickerPid, seen int
	r.c.WaitFor("3 ticks", func(*acptest.Msg) bool {
		tickerPid, seen = tickerTicks(r.c.Output(sid, "term_1"))
		return seen < 0 || seen >= 3
	})
	if tickerPid == 0 || seen < 3 {
		t.Fatalf("the ticker printed %q", r.c.Output(sid, "term_1"))
	}

	// The relay connected during the upgrade is closed: it exits 1.
	seen = d.upgradeKeepsTicker(newBin, pid, tickerPid, sid, seen)
	if code := r.exited(); code != 1 {
		t.Errorf("the relay connected during the upgrade exited %d, want 1", code)
	}
	var fds0, rss0 int
	for i := 1; i < n; i++ {
		bin := plainBinary
		if i%2 == 0 {
			bin = newBin
		}
		seen = d.upgradeKeepsTicker(bin, pid, tickerPid, sid, seen)
		if i == 1 {
			fds0, rss0 = fdCount(t, pid), rss(t, pid)
		}
	}
	fds1, rss1 := fdCount(t, pid), rss(t, pid)
	t.Logf("%d upgrades with a ticker: %d ticks; after 2: %d fds, RSS %d KiB; after %d: %d fds, RSS %d KiB", n, seen, fds0, rss0>>10, n, fds1, rss1>>10)
	if fds1 > fds0+2 {
		t.Errorf("the daemon's descriptors went from %d to %d over %d upgrades", fds0, fds1, n-2)
	}
	if rss1 > rss0+8<<20 {
		t.Errorf("the daemon's RSS went from %d KiB to %d KiB over %d upgrades", rss0>>10, rss1>>10, n-2)
	}
}
