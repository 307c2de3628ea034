package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shellagent/contain"
	"shellagent/daemon"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// The daemon and its relays, driven as an editor drives them: each test
// has a socket directory of its own, and a marker in the environment of
// every relay, which the daemon a relay starts inherits, and with it every
// command the daemon runs.

// daemonFixture is one test's daemon: where it listens and logs, and the
// marker that finds its processes.
type daemonFixture struct {
	t      *testing.T
	dir    string // the socket directory, 0700
	socket string
	state  string // XDG_STATE_HOME: the daemon's log is state/shellagent/daemon.log
	marker string
	scope  string // SHELLAGENT_SWEEP_SCOPE=…, the fixture's own
	cwd    string // the sessions' directory
	args   []string
}

// newDaemonFixture prepares a daemon's places; the first relay starts it.
// The cleanup stops it with daemon stop and checks that no process is
// left.
func newDaemonFixture(t *testing.T, args ...string) *daemonFixture {
	t.Helper()
	dir, err := os.MkdirTemp("", "sa") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	d := &daemonFixture{
		t: t, dir: dir, socket: filepath.Join(dir, "d.sock"), state: t.TempDir(),
		marker: "SHELLAGENT_TEST=" + rand.Text(), cwd: t.TempDir(),
		scope: contain.SweepScopeEnv + "=" + rand.Text(),
		args:  append([]string{"--shell", "/bin/sh", "--containment", testMode, "--kill-grace", "500ms"}, args...),
	}
	t.Cleanup(func() {
		d.run(binary, "daemon", "stop", "--socket", d.socket)
		d.noneLeft(5*time.Second, "the end of the test")
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(d.state, "shellagent", "daemon.log"))
			t.Logf("daemon log:\n%s", b)
		}
		os.RemoveAll(dir)
	})
	return d
}

// env is the environment of the fixture's processes: its marker, its
// state directory and a sweep scope of its own, so that its agents sweep
// only what its own dead daemons left, and no other agent sweeps that.
func (d *daemonFixture) env() []string {
	return append(os.Environ(), d.marker, noRaceExitDelay, "XDG_STATE_HOME="+d.state, d.scope)
}

// run runs the binary bin with args, with the fixture's environment, and
// returns its stdout, stderr and exit code.
func (d *daemonFixture) run(bin string, args ...string) (stdout, stderr string, code int) {
	cmd := exec.Command(bin, args...)
	cmd.Env = d.env()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), exitCode(err)
}

// procs lists the live processes of the fixture: relays, the daemon, and
// the daemon's commands.
func (d *daemonFixture) procs() []int { return acptest.ProcessesWith(d.marker) }

// argv1 returns the first argument of process pid, or "".
func argv1(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	args := strings.Split(string(b), "\x00")
	if len(args) < 2 {
		return ""
	}
	return args[1]
}

// daemons lists the live daemon processes of the fixture.
func (d *daemonFixture) daemons() []int {
	return slices.DeleteFunc(d.procs(), func(pid int) bool { return argv1(pid) != "daemon" })
}

// work lists the live processes of the daemon's commands.
func (d *daemonFixture) work() []int {
	return slices.DeleteFunc(d.procs(), func(pid int) bool { a := argv1(pid); return a == "daemon" || a == "--daemon" })
}

// noneLeft checks that, within wait, nothing of list is left, and kills
// what is.
func (d *daemonFixture) waitGone(wait time.Duration, what string, list func() []int) {
	d.t.Helper()
	deadline := time.Now().Add(wait)
	left := list()
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		left = list()
	}
	if len(left) > 0 {
		d.t.Errorf("%d processes left after %s: %v", len(left), what, describe(left))
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (d *daemonFixture) noneLeft(wait time.Duration, after string) { d.waitGone(wait, after, d.procs) }

// waitLog waits until the daemon's log holds s.
func (d *daemonFixture) waitLog(s string) {
	d.t.Helper()
	deadline := time.Now().Add(testloop.Wait)
	for {
		b, _ := os.ReadFile(filepath.Join(d.state, "shellagent", "daemon.log"))
		if bytes.Contains(b, []byte(s)) {
			return
		}
		if time.Now().After(deadline) {
			d.t.Errorf("the daemon's log does not say %q", s)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logGap is the time between the first lines of the daemon's log that
// hold from and to.
func (d *daemonFixture) logGap(from, to string) time.Duration {
	d.t.Helper()
	at := func(s string) time.Time {
		t, ok := d.logTime(s)
		if !ok {
			b, _ := os.ReadFile(filepath.Join(d.state, "shellagent", "daemon.log"))
			d.t.Fatalf("the daemon's log does not say %q:\n%s", s, b)
		}
		return t
	}
	return at(to).Sub(at(from))
}

// logTime is the time of the first line of the daemon's log that holds
// s, and whether there is one.
func (d *daemonFixture) logTime(s string) (time.Time, bool) {
	d.t.Helper()
	b, _ := os.ReadFile(filepath.Join(d.state, "shellagent", "daemon.log"))
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.Contains(line, s) {
			continue
		}
		f, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		t, err := time.Parse(time.RFC3339Nano, f)
		if err != nil {
			d.t.Fatalf("the daemon's log line %q: %v", line, err)
		}
		return t, true
	}
	return time.Time{}, false
}

// relayProc is one shellagent --daemon, as an editor starts it: in a process
// group of its own (an SSH session's), its stdout a pipe whose reading end
// the test holds.
type relayProc struct {
	t      *testing.T
	c      *acptest.Client
	cmd    *exec.Cmd
	stdout *os.File
	done   chan struct{} // closed once it has exited
	err    error         // its exit, once done
}

// relay starts a relay with the fixture's flags and initializes it in v2
// (in v1 with acptest.WithProtocolV1).
func (d *daemonFixture) relay(opts ...acptest.Option) *relayProc {
	return d.relayOf(binary, opts...)
}

// relayOf is relay with the relay bin (a build without the race detector,
// or another build for an upgrade).
func (d *daemonFixture) relayOf(bin string, opts ...acptest.Option) *relayProc {
	d.t.Helper()
	r := d.startRelay(bin, opts...)
	r.c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	return r
}

// startRelay starts the relay bin, uninitialized.
func (d *daemonFixture) startRelay(bin string, opts ...acptest.Option) *relayProc {
	d.t.Helper()
	return d.startRelayCmd(exec.Command(bin, d.relayArgs()...), opts...)
}

// relayArgs are the arguments of a relay of the fixture's daemon.
func (d *daemonFixture) relayArgs() []string {
	return append([]string{"--daemon", "--socket", d.socket}, d.args...)
}

// startRelayCmd starts cmd, a relay or what runs one (ssh), as an editor
// starts its agent; its stderr goes to the test's log unless cmd.Stderr
// is set.
func (d *daemonFixture) startRelayCmd(cmd *exec.Cmd, opts ...acptest.Option) *relayProc {
	t := d.t
	t.Helper()
	if cmd.Env == nil {
		cmd.Env = d.env()
	}
	if cmd.Stderr == nil {
		cmd.Stderr = testWriter{t}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, pr := startOwnStdout(t, cmd)
	r := &relayProc{t: t, cmd: cmd, stdout: pr, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // Best effort: it may be gone.
		<-r.done
	})
	r.c = acptest.New(t, pr, stdin, opts...)
	return r
}

// exited waits for the relay to exit and returns its exit code.
func (r *relayProc) exited() int {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		r.t.Fatalf("the relay did not exit")
	}
	if ee, ok := r.err.(*exec.ExitError); ok && !ee.Exited() {
		return -1 // killed
	}
	return exitCode(r.err)
}

func (r *relayProc) session(cwd string) string {
	r.t.Helper()
	var res struct {
		SessionID string `json:"sessionId"`
	}
	r.c.MustCall("session/new", map[string]any{"cwd": cwd}, &res)
	return res.SessionID
}

func (r *relayProc) prompt(sid, line string) {
	r.t.Helper()
	if _, err := r.c.Call("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": line}}}); err != nil {
		r.t.Fatalf("prompt %q: %v", line, err)
	}
}

// counter prints "line N" every 100 ms.
const counter = "/bg i=0; while :; do i=$((i+1)); echo line $i; sleep 0.1; done"

// counted reads a counter's output: how many lines it holds, all of them
// complete and in order from "line 1". A counter whose start the ring
// lost is not counted (-1).
func counted(out []byte) int {
	lines := strings.Split(string(out), "\r\n")
	lines = lines[:len(lines)-1] // the part after the last line break
	for i, l := range lines {
		if l != "line "+strconv.Itoa(i+1) {
			return -1
		}
	}
	return len(lines)
}

// startCounter opens a session in cwd, runs counter in it (its
// terminal is term_1) and waits for three of its lines; it returns the
// session and how many lines were seen.
func (r *relayProc) startCounter(cwd string) (sid string, seen int) {
	r.t.Helper()
	sid = r.session(cwd)
	r.prompt(sid, counter)
	return sid, r.waitLines(sid, "term_1", 3)
}

// waitLines waits until the client has at least n lines of the counter in
// terminal term and returns how many it has.
func (r *relayProc) waitLines(sid, term string, n int) int {
	r.t.Helper()
	var got int
	r.c.WaitFor(fmt.Sprintf("%s: %d lines", term, n), func(*acptest.Msg) bool {
		got = counted(r.c.Output(sid, term))
		return got >= n
	})
	return got
}

// exitSignal waits for the exitStatus of term and returns its signal.
func (r *relayProc) exitSignal(sid, term string) any {
	r.t.Helper()
	m := r.c.WaitFor(term+" exitStatus", func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.TerminalID() == term && m.ExitStatus() != nil
	})
	return m.ExitStatus()["signal"]
}

// listed reports whether session/list on r lists sid with cwd as live.
func (r *relayProc) listed(sid, cwd string) bool {
	r.t.Helper()
	// A past session (history on disk) is not live: it does not count.
	var list struct{ Sessions []listedSession }
	r.c.MustCall("session/list", map[string]any{}, &list)
	return slices.ContainsFunc(list.Sessions, func(s listedSession) bool {
		return s.SessionID == sid && s.Cwd == cwd && s.Meta.Shellagent.State != "past"
	})
}

// resumeCounter lists and resumes session sid on r, from the start, after
// a gap of half a second during which its counter in term_1 printed on:
// the replay must hold the seen lines and at least one of the gap's, then
// live lines follow. It logs what came when; before names what saw the
// seen lines. (The counter prints every 100 ms, more slowly on a loaded
// machine: three of the gap's lines in half a second was a bound tighter
// than testloop.Bound.)
func (r *relayProc) resumeCounter(sid, cwd string, seen int, before string) {
	r.t.Helper()
	if !r.listed(sid, cwd) {
		r.t.Fatalf("session/list on the next connection does not list %s", sid)
	}
	r.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": cwd, "replayFrom": map[string]string{"type": "start"}}, nil)
	replayed := counted(r.c.Output(sid, "term_1"))
	if replayed <= seen {
		r.t.Errorf("the replay of term_1 holds %d lines; %s had seen %d: none of the gap's", replayed, before, seen)
	}
	live := r.waitLines(sid, "term_1", replayed+3)
	r.t.Logf("%s saw %d lines; the replay held %d, then %d came live", before, seen, replayed, live-replayed)
}

// Whatever ends the relay, as an editor's end would, the daemon keeps its
// work: a counter started through one relay runs on, and the next relay
// resumes it with the same terminal id, the lines printed before and
// during the gap, then live output; /stop, terminal/cancel and
// session/close work on it, and nothing is left behind.
func TestDaemonKeepsWorkWhenTheRelayEnds(t *testing.T) {
	t.Parallel()
	ends := []struct {
		name string
		end  func(r *relayProc)
		code int // the relay's exit code; -1: killed
	}{
		{"SIGKILL (an editor crash)", func(r *relayProc) { r.cmd.Process.Kill() }, -1},
		{"SIGHUP to its process group (an SSH hang-up)", func(r *relayProc) { syscall.Kill(-r.cmd.Process.Pid, syscall.SIGHUP) }, 0},
		{"SIGTERM", func(r *relayProc) { r.cmd.Process.Signal(syscall.SIGTERM) }, 0},
		{"SIGINT", func(r *relayProc) { r.cmd.Process.Signal(syscall.SIGINT) }, 0},
		{"closed stdout", func(r *relayProc) { r.stdout.Close() }, 0},
		{"stdin EOF", func(r *relayProc) { r.c.Close() }, 0},
	}
	for _, tt := range ends {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDaemonFixture(t)
			a := d.relay()
			sid, seen := a.startCounter(d.cwd)
			tt.end(a)
			if code := a.exited(); code != tt.code {
				t.Errorf("the relay exited with %d, want %d", code, tt.code)
			}
			time.Sleep(500 * time.Millisecond) // the gap: the counter prints to no one

			b := d.relay()
			b.resumeCounter(sid, d.cwd, seen, "the first relay")

			b.prompt(sid, "/bg sleep 300")
			b.prompt(sid, "/stop term_1")
			if sig := b.exitSignal(sid, "term_1"); sig != "SIGTERM" {
				t.Errorf("/stop term_1: signal %v", sig)
			}
			b.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_2"}, nil)
			if sig := b.exitSignal(sid, "term_2"); sig != "SIGTERM" {
				t.Errorf("terminal/cancel term_2: signal %v", sig)
			}
			b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
			d.waitGone(2*time.Second, "session/close", d.work)
			b.c.Check()
		})
	}
}

// Eight relays started at once, with no daemon running, give one daemon,
// and each of them is served.
func TestDaemonOneForManyRelays(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	relays := make([]*relayProc, 8)
	for i := range relays {
		relays[i] = d.startRelay(binary)
	}
	for _, r := range relays {
		r.c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	}
	if ds := d.daemons(); len(ds) != 1 {
		t.Errorf("%d daemons run: %v", len(ds), describe(ds))
	}
	b, _ := os.ReadFile(filepath.Join(d.state, "shellagent", "daemon.log"))
	if n := bytes.Count(b, []byte(`msg="daemon serving"`)); n != 1 {
		t.Errorf("%d daemons started", n)
	}
}

// A daemon killed with SIGKILL leaves its socket file and its commands;
// the next relay replaces the socket with a new daemon's, whose start
// sweeps the commands, and which lists none of the dead daemon's sessions.
// Not parallel, as TestCrashSweep: an agent that another test starts
// meanwhile would sweep the leftovers first, and say so on its stderr.
func TestDaemonStaleSocketIsReplaced(t *testing.T) {
	d := newDaemonFixture(t)
	a := d.relay()
	sid := a.session(d.cwd)
	a.prompt(sid, "/bg setsid sh -c 'sleep 300' & echo ready; sleep 300")
	a.c.WaitFor("ready", func(*acptest.Msg) bool { return strings.Contains(string(a.c.Output(sid, "term_1")), "ready") })
	dead := d.daemons()
	if len(dead) != 1 {
		t.Fatalf("%d daemons", len(dead))
	}
	syscall.Kill(dead[0], syscall.SIGKILL)
	if a.exited() != 1 {
		t.Errorf("the relay whose daemon died did not exit 1")
	}
	d.waitGone(5*time.Second, "SIGKILL", d.daemons)
	left := d.work()
	if len(left) < 2 {
		t.Fatalf("the dead daemon's commands are gone already (%v): nothing to sweep", left)
	}
	if fi, err := os.Lstat(d.socket); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("no stale socket to replace: %v", err)
	}

	b := d.relay()
	if b.listed(sid, d.cwd) {
		t.Errorf("the new daemon lists the dead daemon's session")
	}
	d.waitGone(5*time.Second, "the next daemon's start", func() []int {
		return slices.DeleteFunc(d.work(), func(pid int) bool { return !slices.Contains(left, pid) })
	})
	// The fixture's sweep scope is its own: no other agent on the
	// machine sweeps the dead daemon's work, so this daemon did, and says
	// so once its sweep (in the background) is over.
	d.waitLog(`msg="swept what dead agents left"`)
	sid = b.session(d.cwd)
	b.prompt(sid, "echo served")
	b.c.WaitFor("served", func(*acptest.Msg) bool { return strings.Contains(string(b.c.Output(sid, "term_1")), "served") })
}

// A socket directory that another user could reach or replace is refused,
// by the daemon and by the relay, with a message that says why.
func TestDaemonRefusesAnUnsafeSocketDirectory(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o755) // past the umask
	private := filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ dir, says string }{
		{open, "has mode 0755"},
		{link, "is a symlink"},
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		if err := os.Mkdir(other, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct{ dir, says string }{other, "owned by uid 65534"})
	} else {
		t.Log("not root: the directory owned by another user is not tried")
	}
	d := &daemonFixture{t: t, state: t.TempDir(), marker: "SHELLAGENT_TEST=" + rand.Text()}
	for _, tt := range tests {
		socket := filepath.Join(tt.dir, "d.sock")
		for _, args := range [][]string{{"daemon", "--socket", socket}, {"--daemon", "--socket", socket}} {
			_, stderr, code := d.run(binary, args...)
			if code != 1 || !strings.Contains(stderr, tt.says) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("shellagent %s: exit %d, stderr %q; want 1 and one line that says %q", strings.Join(args, " "), code, stderr, tt.says)
			}
		}
		if _, err := os.Lstat(socket); err == nil {
			t.Errorf("%s was created", socket)
		}
	}
	d.noneLeft(time.Second, "refusals")
}

// Something at the socket path that is not a socket (a regular file, a
// FIFO, a symlink, a directory) is refused, with the path and what it
// is, by --daemon, daemon, daemon status and daemon stop, and left as it
// was. Issue 22's repro: `echo precious > DIR/daemon.sock; shellagent
// --daemon --socket DIR/daemon.sock </dev/null` exited 0 and the file
// was gone, replaced by a socket; a FIFO and a symlink went the same way.
func TestDaemonRefusesANonSocketAtItsPath(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	target := filepath.Join(d.dir, "target")
	if err := os.WriteFile(target, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []struct {
		name, is string
		make     func(path string) error
	}{
		{"file.sock", "a regular file", func(p string) error { return os.WriteFile(p, []byte("precious\n"), 0o600) }},
		{"fifo.sock", "a named pipe (FIFO)", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"link.sock", "a symlink", func(p string) error { return os.Symlink(target, p) }},
		{"dir.sock", "a directory", func(p string) error { return os.Mkdir(p, 0o700) }},
	}
	for _, f := range files {
		path := filepath.Join(d.dir, f.name)
		if err := f.make(path); err != nil {
			t.Fatal(err)
		}
		before, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"--daemon", "--socket", path}, {"daemon", "--socket", path},
			{"daemon", "status", "--socket", path}, {"daemon", "stop", "--socket", path},
		} {
			_, stderr, code := d.run(binary, args...)
			want := path + " is " + f.is + ", not a socket"
			if code != 1 || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("shellagent %s: exit %d, stderr %q; want 1 and one line that says %q", strings.Join(args, " "), code, stderr, want)
			}
		}
		after, err := os.Lstat(path)
		if err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
			t.Errorf("%s: %v, %v; want it left as it was (%v)", path, after, err, before.Mode())
		}
		if _, err := os.Lstat(path + ".lock"); err == nil {
			t.Errorf("%s.lock was created", path)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "precious\n" {
		t.Errorf("the symlink's target: %q, %v", b, err)
	}
	d.noneLeft(time.Second, "refusals")
}

// Without $HOME and $XDG_STATE_HOME, --daemon starts its daemon, which
// logs to the relay's stderr, and serves. Issue 22's repro: --daemon
// could not start without $HOME ("daemon log: $HOME is not defined")
// although only its log needs a place.
func TestDaemonWithoutHome(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	env := slices.DeleteFunc(d.env(), func(kv string) bool {
		return strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_STATE_HOME=")
	})
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd := exec.Command(binary, d.relayArgs()...)
	cmd.Env, cmd.Stderr = env, stderr
	r := d.startRelayCmd(cmd)
	if _, err := r.c.Call("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}); err != nil {
		b, _ := os.ReadFile(stderr.Name())
		t.Fatalf("initialize: %v; the relay's stderr:\n%s", err, b)
	}
	sid := r.session(d.cwd)
	r.prompt(sid, "echo served")
	r.c.WaitFor("served", func(*acptest.Msg) bool { return strings.Contains(string(r.c.Output(sid, "term_1")), "served") })
	waitFor(t, "the daemon's log on the relay's stderr", func() bool {
		b, _ := os.ReadFile(stderr.Name())
		return bytes.Contains(b, []byte(`msg="daemon serving"`))
	})
}

// The relay leaves the stdout it shares with the commands after it as it
// found it, blocking, however it ends: the next writer's output all
// arrives. Issue 22's repro: `( shellagent --daemon </dev/null; head -c
// 1000000 /dev/zero ) | (sleep 1; wc -c)` lost all but 65,536 bytes to
// EAGAIN: the daemon's O_NONBLOCK stayed on the pipe.
func TestDaemonRelayLeavesStdoutBlocking(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	ends := []struct{ name, script string }{
		{"stdin EOF", `( "$0" --daemon --socket "$1" </dev/null; head -c 1000000 /dev/zero ) | (sleep 1; wc -c)`},
		{"SIGTERM", `( sleep 3 | "$0" --daemon --socket "$1" & r=$!; sleep 1; kill $r; wait $r; head -c 1000000 /dev/zero ) | (sleep 2; wc -c)`},
	}
	for _, tt := range ends {
		cmd := exec.Command("/bin/sh", "-c", tt.script, binary, d.socket)
		cmd.Env = d.env()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != "1000000" {
			t.Errorf("%s: %q bytes arrived (%v), want 1000000; stderr:\n%s", tt.name, got, err, stderr.String())
		}
	}
}

// connectEnv makes the test binary a bare client of the daemon socket it
// names (connectAndRead), for a test that connects as another user.
const connectEnv = "SHELLAGENT_TEST_CONNECT"

// connectAndRead connects to socket, says hello as a relay would, and
// prints what came back: "closed" when the daemon closed the connection
// without a byte. The exit code is 0 for closed, 1 for an answer, 2 when
// it could not connect.
func connectAndRead(socket string) int {
	nc, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Println("connect:", err)
		return 2
	}
	fmt.Fprintf(nc, `{"shellagent":1,"build":"test","pid":%d,"want":"status"}`+"\n", os.Getpid())
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(nc)
	if len(b) == 0 && (err == nil || errors.Is(err, syscall.ECONNRESET)) {
		fmt.Println("closed")
		return 0
	}
	fmt.Printf("answered %q (%v)\n", b, err)
	return 1
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testloop.Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// v1Relay is a relay initialized in ACP v1, with the terminal output
// capability, as today's editors are.
func (d *daemonFixture) v1Relay() (*relayProc, *v1Agent) {
	r := d.startRelay(binary, acptest.WithProtocolV1())
	caps := map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false, "_meta": map[string]any{"terminal_output": true}}
	r.c.MustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": map[string]string{"name": "v1test", "version": "1"}}, nil)
	return r, &v1Agent{agent: &agent{t: d.t, c: r.c, cmd: r.cmd, marker: d.marker, cwd: d.cwd}, meta: true}
}

// A v1 client reattaches as a v2 one does: session/list on a new relay
// lists the session, session/resume brings its terminal back (the ring,
// then live); after that relay's end too, session/load on the next one
// replays the history (the prompt that started it) and the terminal
// again, then live output; /stop works on it.
func TestDaemonV1Reattach(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	ra, a := d.v1Relay()
	sid := a.session()
	a.turn(sid, counter, "end_turn")
	a.c.WaitFor("3 lines", func(*acptest.Msg) bool { return strings.Contains(string(a.c.Output(sid, "term_1")), "line 3\r\n") })
	ra.cmd.Process.Kill()
	seen := counted(a.c.Output(sid, "term_1"))
	ra.exited()
	time.Sleep(300 * time.Millisecond)

	rb, b := d.v1Relay()
	var list struct {
		Sessions []struct{ SessionID, Cwd string }
	}
	b.c.MustCall("session/list", map[string]any{}, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != sid || list.Sessions[0].Cwd != d.cwd {
		t.Fatalf("session/list on the next relay: %+v", list.Sessions)
	}
	resp := b.c.Wait(b.c.Send("session/resume", map[string]any{"sessionId": sid, "cwd": d.cwd, "mcpServers": []any{}}))
	if resp.Error != nil {
		t.Fatalf("session/resume: %v", resp.Error)
	}
	// A client that had nothing of the terminal gets the ring as it is,
	// from line 1, then live output.
	var replayed int
	b.c.WaitFor("the ring", func(*acptest.Msg) bool {
		replayed = counted(b.c.Output(sid, "term_1"))
		return replayed >= seen+2 // and the lines of the gap
	})
	b.c.WaitFor("live lines", func(*acptest.Msg) bool { return counted(b.c.Output(sid, "term_1")) >= replayed+3 })
	rb.cmd.Process.Signal(syscall.SIGHUP)
	rb.exited()

	_, c := d.v1Relay()
	resp = c.c.Wait(c.c.Send("session/load", map[string]any{"sessionId": sid, "cwd": d.cwd, "mcpServers": []any{}}))
	if resp.Error != nil {
		t.Fatalf("session/load: %v", resp.Error)
	}
	var prompted bool
	for _, m := range c.c.Transcript()[:resp.Seq] {
		prompted = prompted || m.Kind == "user_message_chunk" && strings.Contains(m.Text(), "echo line $i")
	}
	if !prompted {
		t.Errorf("session/load did not replay the prompt that started the counter")
	}
	replayed = counted(c.c.Output(sid, "term_1"))
	c.c.WaitFor("live lines after session/load", func(*acptest.Msg) bool { return counted(c.c.Output(sid, "term_1")) >= replayed+3 })
	c.turn(sid, "/stop term_1", "end_turn")
	exit := c.c.WaitAfter(resp, "term_1's exit", func(m *acptest.Msg) bool { return m.Meta("terminal_exit") != nil })
	if sig := exit.Meta("terminal_exit")["signal"]; sig != "SIGTERM" {
		t.Errorf("/stop term_1: terminal_exit %v", exit.Meta("terminal_exit"))
	}
	c.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	d.waitGone(2*time.Second, "session/close", d.work)
	b.c.Check()
	c.c.Check()
}

// daemon status shows each session, attached or detached and since when,
// its running terminals with their pids, and the daemon's memory; daemon
// stop closes every session with its kill grace, says what it stopped,
// and returns once the daemon has exited, leaving no process. Both exit 1
// with one line when no daemon runs.
func TestDaemonStatusAndStop(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	for _, cmd := range []string{"status", "stop"} {
		_, stderr, code := d.run(binary, "daemon", cmd, "--socket", d.socket)
		if want := "shellagent: no daemon is running at " + d.socket + "\n"; code != 1 || stderr != want {
			t.Errorf("daemon %s without a daemon: exit %d, %q; want 1, %q", cmd, code, stderr, want)
		}
	}
	a := d.relay()
	gone := a.session(d.cwd)
	a.prompt(gone, "/bg trap '' TERM; echo ready; sleep 300")
	a.c.WaitFor("ready", func(*acptest.Msg) bool { return strings.Contains(string(a.c.Output(gone, "term_1")), "ready") })
	a.c.Close()
	b := d.relay()
	here := b.session(d.cwd)
	b.prompt(here, "/bg setsid sh -c 'sleep 300' & sleep 300")

	if _, stderr, code := d.run(binary, "daemon", "--socket", d.socket); code != 1 || !strings.Contains(stderr, "another daemon is running") {
		t.Errorf("a second daemon for the same socket: exit %d, %q", code, stderr)
	}
	// $SHELLAGENT_DAEMON=1 is --daemon: a relay to the same daemon.
	viaEnv := exec.Command(binary, "--socket", d.socket, "--shell", "/bin/sh")
	viaEnv.Env = append(d.env(), "SHELLAGENT_DAEMON=1")
	viaEnv.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}` + "\n")
	if out, err := viaEnv.Output(); err != nil || !strings.Contains(string(out), gone) || !strings.Contains(string(out), here) {
		t.Errorf("SHELLAGENT_DAEMON=1 shellagent: %v, %q; want both sessions listed", err, out)
	}
	stdout, stderr, code := d.run(binary, "daemon", "status", "--socket", d.socket)
	t.Logf("daemon status:\n%s", stdout)
	for _, want := range []string{
		"socket " + d.socket, "RSS ", "1 connection",
		fmt.Sprintf(", Go on %d of %d CPUs, ", sharedProcs(), runtime.NumCPU()),
		gone + "  detached since ", here + "  attached since ",
		"term_1  background  up ", "trap '' TERM; echo ready; sleep 300  (pids ",
	} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("daemon status: exit %d, stderr %q; no %q in its output", code, stderr, want)
		}
	}

	start := time.Now()
	stdout, stderr, code = d.run(binary, "daemon", "stop", "--socket", d.socket)
	took := time.Since(start)
	t.Logf("daemon stop (%v):\n%s", took, stdout)
	for _, want := range []string{
		"closed " + gone + " (" + d.cwd + "): term_1 trap '' TERM; echo ready; sleep 300\n",
		"closed " + here + " (" + d.cwd + "): term_1 setsid sh -c 'sleep 300' & sleep 300\n",
		" exited\n",
	} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("daemon stop: exit %d, stderr %q; no %q in its output", code, stderr, want)
		}
	}
	if took < 500*time.Millisecond {
		t.Errorf("daemon stop took %v: the command that ignores SIGTERM had a kill grace of 500ms", took)
	}
	if sig := b.exitSignal(here, "term_1"); sig != "SIGTERM" {
		t.Errorf("the attached relay saw term_1 end with %v", sig)
	}
	if code := b.exited(); code != 1 {
		t.Errorf("the relay exited %d when the daemon stopped, want 1", code)
	}
	if left := d.procs(); len(left) > 0 {
		t.Errorf("daemon stop returned with processes left: %v", describe(left))
	}
}

// While a daemon stops (its socket gone, a command still in its kill
// grace), daemon status says that a daemon is starting or stopping, as a
// relay does, and exits 1; daemon stop says so too and waits for it to
// exit (here hurried by a SIGTERM), then exits 0, with nothing left.
func TestDaemonStatusAndStopWhileStopping(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t, "--kill-grace", "60s")
	a := d.relay()
	sid := a.session(d.cwd)
	a.prompt(sid, "/bg trap '' TERM; echo ready; sleep 300")
	a.c.WaitFor("ready", func(*acptest.Msg) bool { return strings.Contains(string(a.c.Output(sid, "term_1")), "ready") })
	daemons := d.daemons()
	if len(daemons) != 1 {
		t.Fatalf("%d daemons", len(daemons))
	}
	// daemons counts the daemon stop commands too.
	alive := func() bool { return slices.Contains(d.procs(), daemons[0]) }
	first := make(chan int, 1)
	go func() {
		_, _, code := d.run(binary, "daemon", "stop", "--socket", d.socket)
		first <- code
	}()
	waitFor(t, "the daemon to stop, its socket gone", func() bool {
		_, err := os.Lstat(d.socket)
		return errors.Is(err, os.ErrNotExist)
	})
	if !alive() {
		t.Fatal("the daemon exited within the 60 s kill grace")
	}
	_, stderr, code := d.run(binary, "daemon", "status", "--socket", d.socket)
	if code != 1 || !strings.Contains(stderr, "a daemon is starting or stopping at "+d.socket) {
		t.Errorf("daemon status while the daemon stops: exit %d, %q; want 1, saying that a daemon is starting or stopping", code, stderr)
	}

	second := exec.Command(binary, "daemon", "stop", "--socket", d.socket)
	second.Env = d.env()
	var stdout, errOut syncBuffer
	second.Stdout, second.Stderr = &stdout, &errOut
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	secondDone := make(chan error, 1)
	go func() { secondDone <- second.Wait() }()
	waitFor(t, "the second daemon stop to wait", func() bool { return strings.Contains(errOut.String(), "starting or stopping") })
	select {
	case err := <-secondDone:
		t.Fatalf("the second daemon stop exited (%v) while the daemon stopped: %q, %q", err, stdout.String(), errOut.String())
	default:
	}
	if !alive() {
		t.Fatal("the daemon exited before its kill grace was hurried")
	}
	syscall.Kill(daemons[0], syscall.SIGTERM) // a second stop: everything left is killed at once
	select {
	case err := <-secondDone:
		if code := exitCode(err); code != 0 || !strings.Contains(stdout.String(), "has exited") {
			t.Errorf("daemon stop while the daemon stops: exit %d, %q, %q; want 0, once it has exited", code, stdout.String(), errOut.String())
		}
	case <-time.After(testloop.Wait):
		second.Process.Kill() // Best effort: the test fails.
		t.Fatal("the second daemon stop did not return once the daemon had exited")
	}
	if alive() {
		t.Errorf("daemon stop returned with the daemon running: %v", describe(daemons))
	}
	if code := <-first; code != 0 {
		t.Errorf("the first daemon stop exited %d, want 0", code)
	}
	d.noneLeft(5*time.Second, "the stop")
}

// A command that waits for permission when its relay goes away is refused
// (no one is left to ask), and the next relay sees it so.
func TestDaemonDetachRefusesAWaitingPermission(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	a := d.relay()
	sid := a.session(d.cwd)
	a.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "permission", "type": "id", "value": "ask"}, nil)
	a.prompt(sid, "echo never")
	a.c.WaitFor("the permission request", func(m *acptest.Msg) bool { return m.Method == "session/request_permission" })
	a.cmd.Process.Kill()
	a.exited()

	b := d.relay()
	b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": d.cwd, "replayFrom": map[string]string{"type": "start"}}, nil)
	m := b.c.WaitFor("call_1 final", func(m *acptest.Msg) bool { return m.ToolCallID() == "call_1" && m.Status() != "" })
	if m.Status() != "failed" || !strings.Contains(m.Text(), "Not run") {
		t.Errorf("the command that waited for permission: %s", m.Raw)
	}
	if out := b.c.Output(sid, "term_1"); len(out) > 0 {
		t.Errorf("it ran: %q", out)
	}
	b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	b.c.Check()
}

// --detached-ttl closes a detached session once its work has ended and
// the TTL has passed; --idle-exit then ends the daemon, once it has had no
// session and no connection for that long.
func TestDaemonDetachedTTLAndIdleExit(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t, "--detached-ttl", "1s", "--idle-exit", "2s")
	a := d.relay()
	sid := a.session(d.cwd)
	// The command runs until the test ends it, however slow the machine:
	// a sleep of a fixed length was seen to end, with the TTL after it,
	// before a status run under load had listed the session.
	ended := filepath.Join(d.cwd, "ended")
	a.prompt(sid, "/bg while [ ! -e "+ended+" ]; do sleep 0.05; done")
	a.c.Close()
	daemons := d.daemons()
	if len(daemons) != 1 {
		t.Fatalf("%d daemons", len(daemons))
	}
	sessions := func() string {
		stdout, _, _ := d.run(binary, "daemon", "status", "--socket", d.socket)
		return stdout
	}
	time.Sleep(time.Second)
	if st := sessions(); !strings.Contains(st, sid) {
		t.Fatalf("after 1 s detached, with its command running, the session is gone:\n%s", st)
	}
	detached := time.Now() // detached and, from now, with its work ending
	if err := os.WriteFile(ended, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The session closes after the start of the last status that lists
	// it (listedLast) and before the end of the first that does not
	// (closed): a status run can take a good part of a second under -race.
	listedLast := time.Now()
	waitFor(t, "the TTL to close the session", func() bool {
		asked := time.Now()
		if strings.Contains(sessions(), sid) {
			listedLast = asked
			return false
		}
		return true
	})
	closed := time.Now()
	if took := closed.Sub(detached); took < time.Second-200*time.Millisecond {
		t.Errorf("the session closed %v after its detached work ended; the TTL is 1 s", took)
	}
	d.waitGone(10*time.Second, "--idle-exit", d.daemons)
	if took := time.Since(listedLast); took < 2*time.Second-200*time.Millisecond {
		t.Errorf("the daemon exited at most %v after its last session closed, with --idle-exit 2s", took)
	}
	if took := time.Since(closed); took > 6*time.Second {
		t.Errorf("the daemon exited at least %v after its last session closed, with --idle-exit 2s", took)
	}
	d.waitLog(`msg="exiting: no session and no connection"`)
	if _, err := os.Lstat(d.socket); err == nil {
		t.Errorf("the socket file outlived the daemon")
	}
}

// daemonConn is a bare connection to the daemon's socket past the hellos,
// read by the strict client: what a relay would copy.
func (d *daemonFixture) daemonConn() *acptest.Client {
	d.t.Helper()
	nc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: d.socket, Net: "unix"})
	if err != nil {
		d.t.Fatal(err)
	}
	r := bufio.NewReader(nc)
	line, err := r.ReadBytes('\n')
	var hello struct{ Build string }
	if err != nil || json.Unmarshal(line, &hello) != nil {
		d.t.Fatalf("the daemon's hello: %q, %v", line, err)
	}
	fmt.Fprintf(nc, `{"shellagent":1,"build":%q,"pid":%d}`+"\n", hello.Build, os.Getpid())
	c := acptest.New(d.t, r, halfCloser{nc})
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	return c
}

// halfCloser's Close ends only what the client writes, as a relay's stdin
// EOF does; the daemon closes the rest.
type halfCloser struct{ *net.UnixConn }

func (h halfCloser) Close() error { return h.CloseWrite() }

// fdCount counts the open descriptors of process pid.
func fdCount(t *testing.T, pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// 20 sessions, each with a live terminal, detached and reattached 50
// times each: the daemon's memory and descriptors stay flat. A soak
// (SHELLAGENT_LONG=1); the quick run reattaches in
// TestClientDaemonDetachAndResume and TestDaemonV1Reattach.
func TestDaemonReattachKeepsMemoryFlat(t *testing.T) {
	testloop.Long(t, "soak: a thousand reattachments")
	t.Parallel()
	sessions, rounds, warmup := 20, 50, 10
	d := newDaemonFixture(t, "--scrollback", "64KiB")
	a := d.relayOf(plainBinary) // the daemon without the race detector: its memory is the figure
	var sids []string
	for range sessions {
		sid := a.session(d.cwd)
		a.prompt(sid, "/bg i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.2; done")
		sids = append(sids, sid)
	}
	a.c.Close()
	pid := d.daemons()[0]
	var rss0, fds0 int
	for round := range rounds {
		c := d.daemonConn()
		for i, sid := range sids {
			params := map[string]any{"sessionId": sid, "cwd": d.cwd}
			if (round+i)%2 == 0 {
				params["replayFrom"] = map[string]string{"type": "start"}
			}
			c.MustCall("session/resume", params, nil)
		}
		c.WaitFor("live output", func(m *acptest.Msg) bool { return m.Kind == "terminal_output_chunk" })
		c.Close()
		if round == rounds-1 {
			c.Check()
		}
		if round == warmup-1 {
			rss0, fds0 = rss(t, pid), fdCount(t, pid)
		}
	}
	time.Sleep(200 * time.Millisecond) // the last connection's end
	rss1, fds1 := rss(t, pid), fdCount(t, pid)
	t.Logf("after %d reattachments: RSS %d KiB, %d fds; after %d: RSS %d KiB, %d fds", warmup*sessions, rss0>>10, fds0, rounds*sessions, rss1>>10, fds1)
	if rss1-rss0 > 8<<20 {
		t.Errorf("the daemon's RSS grew by %d KiB over %d reattachments", (rss1-rss0)>>10, (rounds-warmup)*sessions)
	}
	if fds1 > fds0+2 {
		t.Errorf("the daemon's descriptors went from %d to %d", fds0, fds1)
	}
	if st := d.daemons(); len(st) != 1 {
		t.Fatalf("daemons: %v", st)
	}
	b := d.relayOf(plainBinary)
	for _, sid := range sids {
		b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	}
	d.waitGone(2*time.Second, "session/close", d.work)
}

// Under systemd socket activation (shellagent.socket), the daemon serves
// the listening socket it is passed as descriptor 3 when LISTEN_PID is its
// pid; relays connect to it and start no daemon of their own.
func TestDaemonSocketActivation(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: d.socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false) // the daemon owns it now, as it would systemd's
	f, err := l.File()
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	// $$ is the pid the daemon will have: sh execs it.
	cmd := exec.Command("/bin/sh", append([]string{"-c", `export LISTEN_PID=$$ LISTEN_FDS=1; exec "$@"`, "sh", binary, "daemon", "--socket", d.socket}, d.args...)...)
	cmd.Env = d.env()
	cmd.ExtraFiles = []*os.File{f}
	var log syncBuffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() {
		d.run(binary, "daemon", "stop", "--socket", d.socket)
		waitExited(t, cmd)
		t.Logf("the activated daemon:\n%s", log.String())
	})
	waitFor(t, "the daemon to serve", func() bool { return strings.Contains(log.String(), "daemon serving") })
	if !strings.Contains(log.String(), "activated=true") {
		t.Errorf("the daemon did not take the socket it was passed")
	}
	r := d.relay()
	sid := r.session(d.cwd)
	r.prompt(sid, "echo activated")
	r.c.WaitFor("output", func(*acptest.Msg) bool { return strings.Contains(string(r.c.Output(sid, "term_1")), "activated") })
	if ds := d.daemons(); len(ds) != 1 || ds[0] != cmd.Process.Pid {
		t.Errorf("daemons %v, want only the activated one (%d)", ds, cmd.Process.Pid)
	}
	if _, err := os.Stat(filepath.Join(d.state, "shellagent", "daemon.log")); err == nil {
		t.Errorf("a relay started a daemon of its own")
	}
}

// waitExited waits for cmd, started by the test, to exit, and kills it
// after 10 s.
func waitExited(t *testing.T, cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("%s did not exit; killing it", cmd.Path)
		cmd.Process.Kill()
		<-done
	}
}

// otherBuild returns a shellagent binary of another build than binary:
// under -race the plain one, otherwise otherBinary.
func otherBuild(*testing.T) string {
	if raceEnabled {
		return plainBinary
	}
	return otherBinary
}

// otherBinary is a copy of plainBinary whose Go build ID, everywhere the
// linker wrote it, ends in another character (TestMain makes it with
// copyOtherBuild, before any test starts a process: a file this process
// has just written can be held open by a concurrent fork, and its exec
// then fails with ETXTBSY). The build ID is what the daemon and the relay
// compare, and the copy costs no second go build (12 s of the quick run
// under load).
var otherBinary string

func copyOtherBuild(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return err
	}
	s := f.Section(".note.go.buildid")
	if s == nil {
		return errors.New(src + ": no .note.go.buildid")
	}
	note, err := s.Data()
	if err != nil || len(note) <= 16 {
		return fmt.Errorf("%s: the build ID note: %v (%d bytes)", src, err, len(note))
	}
	id := bytes.TrimRight(note[16:], "\x00")
	other := bytes.Clone(id)
	other[len(other)-1] ^= 1 // another base64 character
	return os.WriteFile(dst, bytes.ReplaceAll(b, id, other), 0o755)
}

// A relay that finds a daemon of another build refuses every request with
// an error that names both builds and the way out, and relays nothing;
// daemon stop, of either build, stops the old daemon.
func TestDaemonOfAnotherBuildIsRefused(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	old := exec.Command(otherBuild(t), append([]string{"daemon", "--socket", d.socket}, d.args...)...)
	old.Env = d.env()
	var log syncBuffer
	old.Stderr = &log
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waitExited(t, old) })
	waitFor(t, "the old daemon to serve", func() bool { return strings.Contains(log.String(), "daemon serving") })

	r := d.startRelay(binary)
	builds := regexp.MustCompile(`is build (\S+ \([^)]*\))`)
	for _, tt := range []struct {
		method string
		params map[string]any
	}{
		{"initialize", map[string]any{"protocolVersion": 2}},
		{"session/new", map[string]any{"cwd": d.cwd}},
		{"session/prompt", map[string]any{"sessionId": "sess_1", "prompt": []map[string]any{{"type": "text", "text": strings.Repeat("x", 100<<10)}}}},
	} {
		method := tt.method
		_, err := r.c.Call(method, tt.params)
		if err == nil {
			t.Fatalf("%s through the relay was served by a daemon of another build", method)
		}
		m := builds.FindAllStringSubmatch(err.Message, -1)
		if err.Code != -32603 || len(m) != 2 || m[0][1] == m[1][1] || !strings.Contains(err.Message, "shellagent daemon upgrade") || !strings.Contains(err.Message, "shellagent daemon stop") {
			t.Errorf("%s: %v; want -32603 naming two builds, 'shellagent daemon upgrade' and 'shellagent daemon stop'", method, err)
		}
	}
	// A line that is not JSON-RPC is answered as the agent answers it.
	r.c.SendRaw([]byte("not json"))
	if m := r.c.WaitFor("the -32700 for a line that is not JSON", func(m *acptest.Msg) bool { return m.Error != nil && string(m.ID) == "null" }); m.Error.Code != -32700 {
		t.Errorf("a line that is not JSON: %v; want -32700", m.Error)
	}
	r.c.Close()
	if code := r.exited(); code != 1 {
		t.Errorf("the refusing relay exited %d, want 1", code)
	}
	if !strings.Contains(log.String(), "refused a client of another build") {
		t.Errorf("the old daemon did not log the refusal")
	}
	stdout, stderr, code := d.run(binary, "daemon", "stop", "--socket", d.socket)
	if code != 0 || !strings.Contains(stdout, "exited") {
		t.Errorf("daemon stop of another build's daemon: exit %d, %q, %q", code, stdout, stderr)
	}
}

// The systemd user units in contrib/systemd parse without a warning, and
// the socket unit listens where the daemon looks by default, with the
// modes the daemon requires.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze here")
	}
	dir := t.TempDir()
	units := map[string]string{}
	for _, name := range []string{"shellagent.socket", "shellagent.service"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "contrib", "systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		units[name] = string(b)
		// verify wants the command to exist.
		b = bytes.ReplaceAll(b, []byte("/usr/local/bin/shellagent"), []byte(binary))
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runtime := t.TempDir()
	cmd := exec.Command(analyze, "verify", "--user", filepath.Join(dir, "shellagent.socket"), filepath.Join(dir, "shellagent.service"))
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	sock := units["shellagent.socket"]
	for _, line := range []string{"ListenStream=%t/shellagent/daemon.sock", "SocketMode=0600", "DirectoryMode=0700"} {
		if !strings.Contains(sock, "\n"+line+"\n") {
			t.Errorf("shellagent.socket has no %q", line)
		}
	}
	// %t is $XDG_RUNTIME_DIR: the daemon, given no --socket, listens there.
	d := &daemonFixture{t: t, marker: "SHELLAGENT_TEST=" + rand.Text(), state: t.TempDir()}
	env := append(slices.DeleteFunc(d.env(), func(kv string) bool { return strings.HasPrefix(kv, "SHELLAGENT_SOCKET=") }), "XDG_RUNTIME_DIR="+runtime)
	daemon := exec.Command(binary, "daemon", "--shell", "/bin/sh")
	daemon.Env = env
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the socket in $XDG_RUNTIME_DIR", func() bool {
		fi, err := os.Stat(filepath.Join(runtime, "shellagent", "daemon.sock"))
		return err == nil && fi.Mode().Type() == os.ModeSocket && fi.Mode().Perm() == 0o600
	})
	stop := exec.Command(binary, "daemon", "stop")
	stop.Env = env
	if out, err := stop.CombinedOutput(); err != nil {
		t.Errorf("daemon stop: %v\n%s", err, out)
	}
	waitExited(t, daemon)
	if !strings.Contains(units["shellagent.service"], "\nExecStart=/usr/local/bin/shellagent daemon\n") {
		t.Errorf("shellagent.service does not start the daemon")
	}
	if !strings.Contains(units["shellagent.service"], "\nExecReload=/usr/local/bin/shellagent daemon upgrade\n") {
		t.Errorf("shellagent.service does not upgrade the daemon in place on reload")
	}
}

// SIGTERM to the daemon (what systemctl stop sends) closes every session
// with its kill grace, as daemon stop does, and the daemon exits leaving
// nothing behind; a second SIGTERM while the commands stop kills them at
// once. Either way the command, which outlives SIGTERM, ends with SIGKILL,
// the last signal the daemon sent it: live, and in the history that the
// next daemon replays.
func TestDaemonSIGTERM(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		grace       string
		stopFirst   bool // daemon stop first, the signals once the command has its SIGTERM
		signals     int
		least, most time.Duration // from the first signal to nothing left
	}{
		{"once", "500ms", false, 1, 500 * time.Millisecond, 500*time.Millisecond + 2*time.Second},
		{"twice", "30s", false, 2, 0, 3 * time.Second},
		{"after daemon stop", "30s", true, 1, 0, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDaemonFixture(t, "--kill-grace", tt.grace)
			a := d.relay()
			sid := a.session(d.cwd)
			a.prompt(sid, "/bg trap 'echo got TERM' TERM; echo ready; while :; do sleep 1; done")
			a.c.WaitFor("ready", func(*acptest.Msg) bool { return strings.Contains(string(a.c.Output(sid, "term_1")), "ready") })
			daemons := d.daemons()
			if len(daemons) != 1 {
				t.Fatalf("%d daemons", len(daemons))
			}
			stopped := make(chan int, 1)
			if tt.stopFirst {
				go func() {
					_, _, code := d.run(binary, "daemon", "stop", "--socket", d.socket)
					stopped <- code
				}()
				a.c.WaitFor("got TERM", func(*acptest.Msg) bool { return strings.Contains(string(a.c.Output(sid, "term_1")), "got TERM") })
			}
			start := time.Now()
			for range tt.signals {
				syscall.Kill(daemons[0], syscall.SIGTERM)
				time.Sleep(200 * time.Millisecond)
			}
			d.noneLeft(tt.most, "SIGTERM to the daemon")
			if took := time.Since(start); took < tt.least {
				t.Errorf("everything ended %v after SIGTERM, within the kill grace %s", took, tt.grace)
			}
			if code := a.exited(); code != 1 {
				t.Errorf("the relay exited %d once its daemon was gone, want 1", code)
			}
			if tt.stopFirst {
				if code := <-stopped; code != 0 {
					t.Errorf("daemon stop exited %d, want 0", code)
				}
			}
			if sig := a.exitSignal(sid, "term_1"); sig != "SIGKILL" {
				t.Errorf("the relay saw term_1 end with signal %v, want SIGKILL", sig)
			}
			b := d.relay() // the next daemon
			b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": d.cwd, "replayFrom": map[string]string{"type": "start"}}, nil)
			if sig := b.exitSignal(sid, "term_1"); sig != "SIGKILL" {
				t.Errorf("the history replays term_1's end with signal %v, want SIGKILL", sig)
			}
		})
	}
}

// A relay's stdout and stdin that are not pipes or sockets (here files)
// stay with it: the daemon's output comes on the connection and the relay
// copies it to stdout, and the relay copies stdin to the connection. A
// pipe or a socket is handed to the daemon, which writes the output to
// it, or reads the requests from it, directly: a socket that is both
// stdin and stdout too (as libuv gives a child its stdio). In each case
// the relay exits 0 at the end of its input, once the answers are out.
func TestDaemonRelayStdioPaths(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	d.relay() // pipes: handed over
	d.waitLog(`"output to its stdout"=true "input from its stdin"=true`)

	requests := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + d.cwd + `"}}` + "\n"
	for _, tt := range []struct {
		name string
		run  func(cmd *exec.Cmd) (answers []byte, err error)
		log  string // the daemon's line for the connection
	}{
		{"stdin a pipe, stdout a file", func(cmd *exec.Cmd) ([]byte, error) {
			cmd.Stdin = strings.NewReader(requests)
			return runToFile(t, cmd)
		}, `"output to its stdout"=false "input from its stdin"=true`},
		{"stdin and stdout files", func(cmd *exec.Cmd) ([]byte, error) {
			in := filepath.Join(t.TempDir(), "in")
			if err := os.WriteFile(in, []byte(requests), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd.Stdin = f
			return runToFile(t, cmd)
		}, `"output to its stdout"=false "input from its stdin"=false`},
		{"stdin and stdout one socket", func(cmd *exec.Cmd) ([]byte, error) {
			return runOnSocket(t, cmd, requests)
		}, `"output to its stdout"=true "input from its stdin"=true`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := os.ReadFile(filepath.Join(d.state, "shellagent", "daemon.log"))
			cmd := exec.Command(binary, append([]string{"--daemon", "--socket", d.socket}, d.args...)...)
			cmd.Env, cmd.Stderr = d.env(), testWriter{t}
			b, err := tt.run(cmd)
			if err != nil {
				t.Fatalf("the relay: %v", err)
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"id":1,"result":{"protocolVersion":2`) || !strings.HasPrefix(lines[1], `{"id":2,"result":{"sessionId":"sess_`) {
				t.Errorf("the client got %q, want the answers to initialize and session/new", b)
			}
			after, _ := os.ReadFile(filepath.Join(d.state, "shellagent", "daemon.log"))
			if !bytes.Contains(after[len(before):], []byte(tt.log)) {
				t.Errorf("the daemon's log for the connection does not say %s:\n%s", tt.log, after[len(before):])
			}
		})
	}
}

// runToFile runs cmd with its stdout a file, and returns what it wrote.
func runToFile(t *testing.T, cmd *exec.Cmd) ([]byte, error) {
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		return nil, err
	}
	return os.ReadFile(out.Name())
}

// runOnSocket runs cmd with its stdin and stdout one end of a socket pair,
// writes requests to the other, shuts down its writes, and returns what
// came back until the socket's end.
func runOnSocket(t *testing.T, cmd *exec.Cmd, requests string) ([]byte, error) {
	// Close-on-exec under ForkLock, as package net does where there is no
	// SOCK_CLOEXEC (macOS): no child of a test beside this one may inherit
	// an end and hold the socket open.
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	theirs, ours := os.NewFile(uintptr(fds[0]), "relay stdio"), os.NewFile(uintptr(fds[1]), "client")
	defer ours.Close()
	nc, err := net.FileConn(ours)
	if err != nil {
		theirs.Close()
		t.Fatal(err)
	}
	defer nc.Close()
	cmd.Stdin, cmd.Stdout = theirs, theirs
	err = cmd.Start()
	theirs.Close() // the relay has its copy; ours must go for the end
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(testloop.Wait))
	if _, err := io.WriteString(nc, requests); err != nil {
		t.Error(err)
	}
	nc.(*net.UnixConn).CloseWrite()
	b, rerr := io.ReadAll(nc)
	if err := cmd.Wait(); err != nil {
		return b, err
	}
	return b, rerr
}

// A relay whose stdin is a regular file copies it to the daemon, and after
// its end passes on every answer until the daemon closes the connection,
// however long the daemon takes: here it is stopped (SIGSTOP) for longer
// than the second the relay once gave it, right after the relay connected.
// The relay waits, then exits 0 with every answer, each line whole.
func TestDaemonRelayFileStdinGetsEveryAnswer(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	a := d.relay()
	for range 30 {
		a.session(d.cwd)
	}
	daemons := d.daemons()
	if len(daemons) != 1 {
		t.Fatalf("%d daemons", len(daemons))
	}
	const lists = 300
	var requests strings.Builder
	requests.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}` + "\n")
	for id := 1; id <= lists; id++ {
		fmt.Fprintf(&requests, `{"jsonrpc":"2.0","id":%d,"method":"session/list","params":{}}`+"\n", id)
	}
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, []byte(requests.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	stdin, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()

	logPath := filepath.Join(d.state, "shellagent", "daemon.log")
	connected := func() int {
		b, _ := os.ReadFile(logPath)
		return bytes.Count(b, []byte("msg=connected"))
	}
	before := connected()
	cmd := exec.Command(binary, d.relayArgs()...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = d.env(), stdin, stdout, testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(daemons[0], syscall.SIGCONT) // Best effort: continued below, unless the test failed first.
		cmd.Process.Kill()                        // Best effort: it may be gone.
	})
	deadline := time.Now().Add(testloop.Wait)
	for connected() == before {
		if time.Now().After(deadline) {
			t.Fatal("the daemon's log does not say that the relay connected")
		}
		time.Sleep(time.Millisecond)
	}
	syscall.Kill(daemons[0], syscall.SIGSTOP)
	time.Sleep(2 * time.Second) // the relay once gave the daemon 1 s after the end of its stdin
	select {
	case err = <-done:
		t.Errorf("the relay exited (%v) while the daemon was stopped, before its answers", err)
		syscall.Kill(daemons[0], syscall.SIGCONT)
	default:
		syscall.Kill(daemons[0], syscall.SIGCONT)
		select {
		case err = <-done:
		case <-time.After(testloop.Wait):
			t.Fatal("the relay did not exit once the daemon went on")
		}
	}
	if err != nil {
		t.Errorf("the relay: %v, want exit 0", err)
	}
	b, err := os.ReadFile(stdout.Name())
	if err != nil {
		t.Fatal(err)
	}
	ids := make(map[int]bool)
	for line := range strings.Lines(string(b)) {
		var m struct {
			ID     *int            `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || m.ID == nil || m.Result == nil || !strings.HasSuffix(line, "\n") {
			t.Errorf("a line of the relay's output is not a whole answer (%v): %.200q", err, line)
			continue
		}
		ids[*m.ID] = true
	}
	if len(ids) != lists+1 {
		t.Errorf("the relay's output holds %d answers of %d (%d bytes)", len(ids), lists+1, len(b))
	}
}

// A relay whose daemon is out of file descriptors (it accepts nothing:
// the relay's connection waits in its listener's queue) exits 1 saying
// what it waited for, how long, why that may be and where the daemon's
// log is. Before, it said only "hello: i/o timeout". Long: the relay
// waits its 5 s, and the test as long to find the daemon full.
func TestRelayOfADaemonOutOfDescriptors(t *testing.T) {
	testloop.Long(t, "a relay waits 5 s for a daemon out of file descriptors")
	t.Parallel()
	d := newDaemonFixture(t)
	cmd := d.startOwnDaemonUnder([]string{"/bin/sh", "-c", `ulimit -n 64 && exec "$@"`, "sh"}, binary)
	// ACP connections, each a descriptor of the daemon's, until it takes
	// no more: with the daemon's build in the hello, or it closes them.
	st, err := daemon.AskStatus(d.socket, daemonHello())
	if err != nil {
		t.Fatal(err)
	}
	hello := daemonHello()
	hello.Build = st.Build
	var conns []*daemon.Client
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for {
		c, err := daemon.Dial(d.socket, hello, daemon.Stdio{})
		if errors.Is(err, os.ErrDeadlineExceeded) { // no hello: it is full
			break
		}
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns)+1, err)
		}
		if conns = append(conns, c); len(conns) > 64 {
			t.Fatalf("the daemon took %d connections under ulimit -n 64", len(conns))
		}
	}
	// Its stdout a file, which it does not hand the daemon: a pipe handed
	// would wait in the daemon's queue, unaccepted, and the test's read
	// of it would never end.
	relay := exec.Command(binary, "--daemon", "--socket", d.socket)
	relay.Env = d.env()
	var out bytes.Buffer
	if relay.Stdout, err = os.Create(filepath.Join(t.TempDir(), "stdout")); err != nil {
		t.Fatal(err)
	}
	relay.Stderr = &out
	code := exitCode(relay.Run())
	stderr := out.String()
	want := regexp.MustCompile(`^shellagent --daemon: the daemon at ` + regexp.QuoteMeta(d.socket) + ` \(pid ` + strconv.Itoa(cmd.Process.Pid) +
		`\) did not answer within 5s \(it may be out of file descriptors or hung: see ` + regexp.QuoteMeta(filepath.Join(d.state, "shellagent", "daemon.log")) +
		`, or 'journalctl --user -u shellagent' if systemd started it\)\n$`)
	if code != 1 || !want.MatchString(stderr) {
		t.Errorf("the relay exited %d saying %q; want 1 and %s", code, stderr, want)
	}
}

// A session/resume that comes while another connection's session/close
// stops the session's work (its kill grace: here a command that ignores
// SIGTERM) is answered -32002 saying so, with data the client can act
// on: closing, and retryAfterMs, the kill grace; once the close is
// answered, the same resume succeeds, the session a past one. Before, it
// was a bare "session not found", though the session was resumable
// moments later. The reference client's --resume then waits for the
// close and resumes the session.
func TestResumeDuringAnotherConnectionsClose(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	a := d.relay()
	sid := a.session(d.cwd)
	a.prompt(sid, "/bg trap '' TERM; echo ready; sleep 60")
	a.c.WaitFor("term_1 says ready", func(*acptest.Msg) bool { // SIGTERM is ignored from now on
		return strings.Contains(string(a.c.Output(sid, "term_1")), "ready")
	})
	b := d.relay()
	closed := a.c.Send("session/close", map[string]any{"sessionId": sid})
	// Answered after the close was queued on the session, on a's read
	// loop: b's resume comes after it.
	a.c.MustCall("session/list", map[string]any{}, nil)
	resume := map[string]any{"sessionId": sid, "cwd": d.cwd}
	m := b.c.Wait(b.c.Send("session/resume", resume))
	var data struct {
		SessionID    string `json:"sessionId"`
		Closing      bool   `json:"closing"`
		RetryAfterMs int64  `json:"retryAfterMs"`
	}
	if m.Error == nil {
		t.Fatalf("session/resume during the close succeeded: %s", m.Raw)
	}
	_ = json.Unmarshal(m.Error.Data, &data)
	if m.Error.Code != -32002 || !strings.Contains(m.Error.Message, "is closing") || !strings.Contains(m.Error.Message, "resume it again once it has closed") ||
		data.SessionID != sid || !data.Closing || data.RetryAfterMs != 500 {
		t.Errorf("session/resume during the close: %d %q %s; want -32002 saying it is closing, with closing and retryAfterMs 500", m.Error.Code, m.Error.Message, m.Error.Data)
	}
	if m := a.c.Wait(closed); m.Error != nil {
		t.Fatalf("session/close: %v", m.Error)
	}
	b.c.MustCall("session/resume", resume, nil)

	// The reference client, --resume during such a close, waits for it
	// and comes back to the session, now past. The close takes the kill
	// grace: 3 s, not the fixture's 500 ms, for the client to start and
	// ask within it on a loaded machine (under load 40 it did not, and
	// resumed the session already closed).
	sid = a.session(d.cwd)
	a.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "kill_grace", "type": "id", "value": "3s"}, nil)
	a.prompt(sid, "/bg trap '' TERM; echo ready; sleep 60")
	a.c.WaitFor("term_1 says ready", func(*acptest.Msg) bool {
		return strings.Contains(string(a.c.Output(sid, "term_1")), "ready")
	})
	closed = a.c.Send("session/close", map[string]any{"sessionId": sid})
	a.c.MustCall("session/list", map[string]any{}, nil)
	r := d.client("--resume", sid)
	r.expect("[" + sid + " is closing (another client closed it): resuming it again in 3.25s, once it has closed]")
	r.expect("[Session resumed from its history]")
	if m := a.c.Wait(closed); m.Error != nil {
		t.Fatalf("session/close: %v", m.Error)
	}
	r.send("/close")
	r.wait()
}
