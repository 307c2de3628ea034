package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/daemon"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
	"shellagent/supervisor"
)

// upgradeVersion is the version linked into the new binary of the
// upgrade tests.
const upgradeVersion = "v9.9.9-upgrade-test"

// buildNew builds the agent again, without the race detector, with
// upgradeVersion linked in, into a directory of the test's: another
// build than plainBinary, as a new release is.
func buildNew(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "shellagent-new")
	if err := goBuild(out, "-ldflags", "-X main.linkedVersion="+upgradeVersion); err != nil {
		t.Fatal(err)
	}
	return out
}

// startOwnDaemon starts bin as the fixture's daemon, a child of the test,
// and waits for it to serve; the cleanup stops it.
func (d *daemonFixture) startOwnDaemon(bin string) *exec.Cmd {
	d.t.Helper()
	return d.startOwnDaemonUnder(nil, bin)
}

// startOwnDaemonUnder is startOwnDaemon with the daemon's command line
// run by wrapper (a command that runs its arguments: a shell setting a
// limit), if not nil.
func (d *daemonFixture) startOwnDaemonUnder(wrapper []string, bin string) *exec.Cmd {
	t := d.t
	t.Helper()
	argv := append(append(wrapper, bin, "daemon", "--socket", d.socket), d.args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = d.env()
	var log syncBuffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.run(bin, "daemon", "stop", "--socket", d.socket)
		waitExited(t, cmd)
		if t.Failed() {
			t.Logf("the daemon's log:\n%s", log.String())
		}
	})
	waitFor(t, "the daemon to serve", func() bool { return strings.Contains(log.String(), "daemon serving") })
	return cmd
}

// exe returns what /proc/PID/exe of process pid links to.
func exe(t *testing.T, pid int) string {
	t.Helper()
	p, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serving checks that the daemon at the fixture's socket answers status
// as process pid of a build that starts with build.
func (d *daemonFixture) serving(pid int, build string) {
	d.t.Helper()
	st, err := daemon.AskStatus(d.socket, daemonHello())
	if err != nil {
		d.t.Fatalf("status after the upgrade: %v", err)
	}
	if st.Pid != pid || !strings.HasPrefix(st.Build, build) {
		d.t.Errorf("status answers pid %d, build %s; want pid %d, build %s…", st.Pid, st.Build, pid, build)
	}
}

// NEWBIN daemon upgrade makes the running daemon exec NEWBIN in place:
// the same pid (still the test's child) serves the same socket as the
// new build, and a relay that was connected is closed and exits 1. A
// NEWBIN that exits at once, or cannot be executed, leaves the old
// daemon serving, and the command exits 1 naming why; so does a daemon
// that holds work it cannot hand over (a scenario that plays), which goes
// on untouched. 20
// upgrades in a row leave the daemon's descriptors and memory flat
// (SHELLAGENT_LONG=1; the quick run does 4 in a row).
func TestDaemonUpgradeInPlace(t *testing.T) {
	t.Parallel()
	// The quick run takes otherBinary, a copy with another build ID, as
	// the new release: a go build here took over a minute under load.
	newBin, newBuild := otherBinary, "devel"
	if newBin == "" || testloop.Enabled() {
		newBin, newBuild = buildNew(t), upgradeVersion
	}
	d := newDaemonFixture(t)
	cmd := d.startOwnDaemon(plainBinary)
	pid := cmd.Process.Pid
	old := exe(t, pid)

	// Refused while a session holds work that cannot be handed over (a
	// scenario of the kit that plays), naming it and its session: its
	// work runs on.
	r := d.relayOf(plainBinary)
	sid, seen := r.startCounter(d.cwd)
	other := r.session(d.cwd)
	r.prompt(other, "/scenario paused 30s")
	r.c.WaitFor("the scenario's watch", func(m *acptest.Msg) bool { return m.SessionID == other && m.Status() == acp.StatusPaused })
	_, stderr, code := d.run(newBin, "daemon", "upgrade", "--socket", d.socket)
	if code != 1 || !strings.Contains(stderr, "a scenario plays") || !strings.Contains(stderr, other) {
		t.Errorf("upgrade while a scenario plays: exit %d, %q; want 1, naming it and %s", code, stderr, other)
	}
	r.c.MustCall("session/close", map[string]string{"sessionId": other}, nil)
	r.waitLines(sid, "term_1", seen+3) // the counter and its relay go on
	r.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	r.c.Close()
	if code := r.exited(); code != 0 {
		t.Errorf("the relay exited %d after the refused upgrade", code)
	}
	d.waitGone(5*time.Second, "session/close", d.work)

	// A NEWBIN that cannot take over: the old daemon serves on.
	dir := t.TempDir()
	exits, noexec := filepath.Join(dir, "exits"), filepath.Join(dir, "noexec")
	if err := os.WriteFile(exits, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ to, why string }{
		{exits, "exited without answering its probe"},
		{noexec, "cannot be executed"},
	} {
		_, stderr, code := d.run(plainBinary, "daemon", "upgrade", "--socket", d.socket, "--to", tt.to)
		if code != 1 || !strings.Contains(stderr, tt.why) || !strings.Contains(stderr, tt.to) {
			t.Errorf("upgrade to %s: exit %d, %q; want 1, naming it and %q", tt.to, code, stderr, tt.why)
		}
		if got := exe(t, pid); got != old {
			t.Errorf("after the upgrade to %s failed the daemon runs %s", tt.to, got)
		}
		d.serving(pid, "devel")
	}

	// The upgrade: same pid, new image, the relay connected is closed.
	r = d.relayOf(plainBinary)
	stdout, stderr, code := d.run(newBin, "daemon", "upgrade", "--socket", d.socket)
	if code != 0 || !strings.Contains(stdout, "to "+newBuild) {
		t.Fatalf("upgrade: exit %d, %q, %q", code, stdout, stderr)
	}
	if got := exe(t, pid); got != newBin {
		t.Errorf("after the upgrade the daemon runs %s, want %s", got, newBin)
	}
	d.serving(pid, newBuild)
	if code := r.exited(); code != 1 {
		t.Errorf("the relay connected during the upgrade exited %d, want 1", code)
	}

	// 20 in a row, between the two builds.
	rounds := 4 // even: the last is newBin, which the reload below runs again
	if testloop.Enabled() {
		rounds = 20
	}
	var fds0, rss0 int
	for i := range rounds {
		bin, build := plainBinary, "devel"
		if i%2 == 1 {
			bin, build = newBin, newBuild
		}
		if _, stderr, code := d.run(bin, "daemon", "upgrade", "--socket", d.socket); code != 0 {
			t.Fatalf("upgrade %d: exit %d, %s", i+1, code, stderr)
		}
		if got := exe(t, pid); got != bin {
			t.Fatalf("after upgrade %d the daemon runs %s, want %s", i+1, got, bin)
		}
		d.serving(pid, build)
		if i == 1 {
			fds0, rss0 = fdCount(t, pid), rss(t, pid)
		}
	}
	fds1, rss1 := fdCount(t, pid), rss(t, pid)

	// A reload: the same build again starts a new image all the same.
	before, err := daemon.AskStatus(d.socket, daemonHello())
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := d.run(newBin, "daemon", "upgrade", "--socket", d.socket); code != 0 {
		t.Fatalf("reload: exit %d, %s", code, stderr)
	}
	after, err := daemon.AskStatus(d.socket, daemonHello())
	if err != nil || after.Pid != pid || after.Build != before.Build || !after.Started.After(before.Started) {
		t.Errorf("after a reload, status %+v, %v; before, %+v", after, err, before)
	}
	t.Logf("after 2 upgrades: %d fds, RSS %d KiB; after %d: %d fds, RSS %d KiB", fds0, rss0>>10, rounds, fds1, rss1>>10)
	// A leak of one per upgrade would be 18; the sweep of dead agents'
	// leftovers and a status connection being closed hold one or two for
	// a moment.
	if !testloop.Enabled() {
		return
	}
	if fds1 > fds0+2 {
		t.Errorf("the daemon's descriptors went from %d to %d over 18 upgrades", fds0, fds1)
	}
	if rss1 > rss0+8<<20 {
		t.Errorf("the daemon's RSS went from %d KiB to %d KiB over 18 upgrades", rss0>>10, rss1>>10)
	}
}

// An upgrade in place keeps a detached session's "detached since" and its
// --detached-ttl: the new image closes the session a TTL after its
// connection went, not a TTL after the upgrade.
func TestDaemonUpgradeKeepsTheDetachedTTL(t *testing.T) {
	testloop.Long(t, "waits out a detached TTL, 10 s")
	t.Parallel()
	// The upgrade comes 3 s after the detach: a restarted TTL would close
	// the session 3 s late, and the upgrade has 7 s to end before the TTL
	// (on a loaded machine).
	const ttl, before = 10 * time.Second, 3 * time.Second
	d := newDaemonFixture(t, "--detached-ttl", ttl.String())
	d.startOwnDaemon(plainBinary)
	r := d.relayOf(plainBinary)
	sid := r.session(d.cwd)
	r.c.Close()
	if code := r.exited(); code != 0 {
		t.Fatalf("the relay exited %d", code)
	}
	// status returns the session's status, and whether it is listed.
	status := func() (supervisor.SessionStatus, bool) {
		st, err := daemon.AskStatus(d.socket, daemonHello())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Sessions {
			if s.ID == sid {
				return s, true
			}
		}
		return supervisor.SessionStatus{}, false
	}
	var since time.Time
	waitFor(t, "the daemon to see the session detached", func() bool {
		s, ok := status()
		since = s.Since
		return ok && !s.Attached
	})

	time.Sleep(before)
	if _, stderr, code := d.run(otherBinary, "daemon", "upgrade", "--socket", d.socket); code != 0 {
		t.Fatalf("upgrade: exit %d, %s", code, stderr)
	}
	upgraded := time.Now()
	if s, ok := status(); !ok || s.Attached || !s.Since.Equal(since) {
		t.Errorf("after the upgrade: listed %v, %+v; want detached since %v, as before it", ok, s, since)
	}
	waitFor(t, "the TTL to close the session", func() bool {
		_, ok := status()
		return !ok
	})
	if closed := time.Now(); closed.After(upgraded.Add(ttl)) || closed.Before(since.Add(ttl-100*time.Millisecond)) {
		t.Errorf("the session closed %v after its detach and %v after the upgrade; want %v after its detach",
			closed.Sub(since), closed.Sub(upgraded), ttl)
	}
}

// While daemon upgrade runs its probe, the daemon serves as before: a
// relay that connects meanwhile is served, and goes on being served when
// the probe fails (here the new binary hangs past ProbeTimeout, in a
// child); nothing of the probe is left.
func TestDaemonUpgradeServesDuringTheProbe(t *testing.T) {
	testloop.Long(t, "a probe of the new binary held for seconds")
	t.Parallel()
	d := newDaemonFixture(t)
	d.startOwnDaemon(plainBinary)
	hang := filepath.Join(t.TempDir(), "hang")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nsleep 305\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	probe := func() []int {
		return slices.DeleteFunc(d.procs(), func(pid int) bool { a := argv1(pid); return a != "305" && a != hang })
	}
	up := exec.Command(plainBinary, "daemon", "upgrade", "--socket", d.socket, "--to", hang)
	up.Env = d.env()
	var stderr strings.Builder
	up.Stderr = &stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	upgraded := make(chan error, 1)
	go func() { upgraded <- up.Wait() }()
	waitFor(t, "the probe to run", func() bool { return len(probe()) > 0 })

	r := d.relayOf(plainBinary) // initialize is answered
	sid := r.session(d.cwd)
	select {
	case err := <-upgraded:
		if code := exitCode(err); code != 1 || !strings.Contains(stderr.String(), "did not answer its probe") {
			t.Errorf("upgrade to a binary that hangs: exit %d, %q; want 1, saying it did not answer its probe", code, stderr.String())
		}
	case <-time.After(testloop.Wait):
		t.Fatal("daemon upgrade did not end")
	}
	d.waitGone(5*time.Second, "the failed probe", probe)
	r.prompt(sid, "echo still served")
	r.c.WaitFor("the command's output", func(*acptest.Msg) bool {
		return strings.Contains(string(r.c.Output(sid, "term_1")), "still served")
	})
	r.c.Close()
	if code := r.exited(); code != 0 {
		t.Errorf("the relay connected during the probe exited %d, want 0 at the end of its input", code)
	}
}

// A new binary that passes its probe and then fails to start in place of
// the daemon (here a script that execs a real build for the probe and
// exits 7 otherwise) leaves no daemon, as a crash would: daemon upgrade
// exits 1 saying that the daemon exited without an answer, and why,
// rather than blaming a build from before 'daemon upgrade'.
func TestDaemonUpgradeNewImageFailsToStart(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	daemonCmd := d.startOwnDaemon(plainBinary)
	fails := filepath.Join(t.TempDir(), "fails")
	script := "#!/bin/sh\ncase \"$2\" in --upgrade-probe) exec " + plainBinary + " \"$@\";; esac\nexit 7\n"
	if err := os.WriteFile(fails, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := d.run(plainBinary, "daemon", "upgrade", "--socket", d.socket, "--to", fails)
	if code != 1 || !strings.Contains(stderr, "exited without an answer") || !strings.Contains(stderr, fails) || strings.Contains(stderr, "from before") {
		t.Errorf("upgrade to a binary that passes its probe and fails to start: exit %d, %q; want 1, saying that the daemon exited, and naming %s", code, stderr, fails)
	}
	waitExited(t, daemonCmd)
	if code := daemonCmd.ProcessState.ExitCode(); code != 7 {
		t.Errorf("the daemon exited %d, want the new image's 7", code)
	}
}

// daemon upgrade while a session closes, its command in a kill grace
// longer than the upgrade's own bound (35 s against 30): the daemon waits
// for the close before its probe, and the command waits for the daemon's
// answer, however long its kill grace (the daemon's hello says it), then
// upgrades. Before, it gave up after 30 s with "i/o timeout", the daemon
// upgrading anyway once the close was done.
func TestDaemonUpgradeWaitsForAClosingSession(t *testing.T) {
	testloop.Long(t, "a kill grace of 35 s")
	t.Parallel()
	d := newDaemonFixture(t, "--kill-grace", "35s")
	cmd := d.startOwnDaemon(plainBinary)
	r := d.relayOf(plainBinary)
	sid := r.session(d.cwd)
	r.prompt(sid, "/bg trap 'echo termed' TERM; echo ready; while :; do sleep 0.1; done")
	r.c.WaitFor("the command's output", func(*acptest.Msg) bool {
		return strings.Contains(string(r.c.Output(sid, "term_1")), "ready")
	})
	r.c.Send("session/close", map[string]string{"sessionId": sid})
	r.c.WaitFor("the close's SIGTERM", func(*acptest.Msg) bool {
		return strings.Contains(string(r.c.Output(sid, "term_1")), "termed")
	})
	start := time.Now()
	stdout, stderr, code := d.run(plainBinary, "daemon", "upgrade", "--socket", d.socket)
	if code != 0 || !strings.Contains(stdout, "to devel") {
		t.Fatalf("upgrade while a session closes (after %v): exit %d, %q, %q; want 0", time.Since(start), code, stdout, stderr)
	}
	d.serving(cmd.Process.Pid, "devel")
	r.c.Close()
	r.exited()
	d.waitGone(5*time.Second, "the close", d.work)
}
