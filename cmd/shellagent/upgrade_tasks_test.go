package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// runBin runs bin with args in dir, with the fixture's environment.
func (d *daemonFixture) runBin(bin, dir string, args ...string) (stdout, stderr string, code int) {
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = d.env(), dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), exitCode(err)
}

// started is a process of the fixture's binary that runs in the
// background: its output so far, and its end once it comes.
type started struct {
	cmd         *exec.Cmd
	out, errOut *lockedBuffer
	done        <-chan error // its Wait's error, once it ended
}

// startBin starts bin with args in dir, in the fixture's environment.
func (d *daemonFixture) startBin(bin, dir string, args ...string) *started {
	d.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = d.env(), dir
	p := &started{cmd: cmd, out: new(lockedBuffer), errOut: new(lockedBuffer)}
	cmd.Stdout, cmd.Stderr = p.out, p.errOut
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	p.done = done
	return p
}

// upgrade runs bin daemon upgrade and fails the test unless it succeeds.
func (d *daemonFixture) upgrade(bin string) {
	d.t.Helper()
	if _, stderr, code := d.run(bin, "daemon", "upgrade", "--socket", d.socket); code != 0 {
		d.t.Fatalf("upgrade to %s: exit %d, %s", bin, code, stderr)
	}
}

// lastPid reads the last "pid N" of a service's logs.
func lastPid(logs string) int { return lastPidOf(logs, "pid") }

// lastPidOf reads the last "WORD N" of out.
func lastPidOf(out, word string) int {
	m := regexp.MustCompile(word+` (\d+)`).FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(m[len(m)-1][1])
	return pid
}

// A stack's service under restart = "always" outlives the daemon's
// upgrade in place: its process runs on with the same pid, a child of the
// new image; killed after the upgrade, it is restarted by the new image
// (a new terminal, a notice, its restart counted), and status and down
// work on it through the new build. It failed before services were
// handed over: the upgrade was refused, naming the service.
func TestDaemonUpgradeKeepsServices(t *testing.T) {
	t.Parallel()
	newBin := otherBinary
	d := newDaemonFixture(t)
	const file = `
[services.web]
command = "echo pid $$; exec sleep 300"
ready = "pid"
restart = "always"
backoff = "200ms"
`
	if err := os.WriteFile(filepath.Join(d.cwd, "shellagent.toml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	daemonPid := d.startOwnDaemon(plainBinary).Process.Pid
	sock := []string{"--socket", d.socket}
	if out, errOut, code := d.runBin(plainBinary, d.cwd, append([]string{"up"}, sock...)...); code != 0 || !strings.Contains(out, "Ready: web.") {
		t.Fatalf("shellagent up: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	logs, _, _ := d.runBin(plainBinary, d.cwd, append([]string{"logs", "web"}, sock...)...)
	pid := lastPid(logs)
	if pid == 0 {
		t.Fatalf("shellagent logs web: %q, want its pid", logs)
	}

	d.upgrade(newBin)
	if ppid := parentOf(t, pid); ppid != daemonPid {
		t.Fatalf("after the upgrade the service %d has parent %d, want the daemon %d", pid, ppid, daemonPid)
	}
	out, errOut, code := d.runBin(newBin, d.cwd, append([]string{"status"}, sock...)...)
	if code != 0 || !regexp.MustCompile(`web\s+ready\s+`+strconv.Itoa(pid)+`\s`).MatchString(out) {
		t.Fatalf("shellagent status after the upgrade: exit %d, stdout %q, stderr %q; want web ready with pid %d", code, out, errOut, pid)
	}

	// An editor follows the session; the service is killed: the new
	// image restarts it.
	r := d.relayOf(newBin)
	sid := stackSession(t, r, d.cwd)
	r.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": d.cwd}, nil)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.c.WaitFor("the notice of web's restart", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindNotice && m.SessionID == sid && strings.Contains(title(m), "service web restarts")
	})
	r.c.WaitFor("web's next run, term_2", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindTerminal && m.TerminalID() == "term_2"
	})
	var again int
	waitFor(t, "web's next run to print its pid", func() bool {
		logs, _, _ := d.runBin(newBin, d.cwd, append([]string{"logs", "web"}, sock...)...)
		again = lastPid(logs)
		return again != 0 && again != pid
	})
	restarted := regexp.MustCompile(`web\s+ready\s+` + strconv.Itoa(again) + `\s+\S+\s+1\s`)
	waitFor(t, "status: web ready again, with its new pid and 1 restart", func() bool {
		out, _, _ = d.runBin(newBin, d.cwd, append([]string{"status"}, sock...)...)
		return restarted.MatchString(out)
	})
	out, errOut, code = d.runBin(newBin, d.cwd, append([]string{"down"}, sock...)...)
	if code != 0 || !strings.Contains(out, "Stopped: web.") {
		t.Errorf("shellagent down: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	d.waitGone(testloop.Bound(5*time.Second), "shellagent down", d.work)
	r.c.Close()
	r.exited()
}

// The rest of a session's work outlives the daemon's upgrade in place,
// or ends as the end of its connection would end it: a /wait for a
// pattern, in the foreground at the upgrade, goes on in the background
// and completes when the line comes after it; a wakeup (/after) fires on
// schedule in the new image; a watch runs its command on a change made
// after it; a foreground command moves to the background and runs on; a
// command that waits for permission is not run; a terminal being stopped
// is stopped again by the new image (SIGKILL after its grace, as it
// ignores SIGTERM). The upgrade succeeds.
// Each of these failed before the upgrade handed them over: it was
// refused, naming the work.
func TestDaemonUpgradeHandsOverEveryKindOfWork(t *testing.T) {
	t.Parallel()
	newBin := otherBinary
	d := newDaemonFixture(t, "--foreground-timeout", "0") // the foreground command stays there until the upgrade
	d.startOwnDaemon(plainBinary)
	r := d.relayOf(plainBinary)

	// Session A: a terminal that prints a line once told to; a wait for
	// it in the foreground; a wakeup; a watch.
	go1, go2 := filepath.Join(d.cwd, "go1"), filepath.Join(d.cwd, "watched")
	if err := os.Mkdir(go2, 0o700); err != nil {
		t.Fatal(err)
	}
	a := r.session(d.cwd)
	r.prompt(a, "/bg while [ ! -e go1 ]; do sleep 0.05; done; echo the-line-came; exec sleep 300")
	r.prompt(a, "/watch watched echo watch-ran")
	const due, grace = 10 * time.Second, 10 * time.Second
	r.prompt(a, "/after "+due.String()+" echo wakeup-fired")
	scheduled := time.Now()
	r.prompt(a, "/wait term_1 the-line-came --timeout 5m")
	wait := r.c.WaitFor("the wait's tool call", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindToolCall && m.SessionID == a && strings.HasPrefix(title(m), "wait for term_1")
	}).ToolCallID()

	// Session B: a foreground command. Session C: one that waits for
	// permission.
	b := r.session(d.cwd)
	r.prompt(b, "echo fg-started; exec sleep 300")
	r.c.WaitFor("the foreground command's output", func(*acptest.Msg) bool { return bytes.Contains(r.c.Output(b, "term_1"), []byte("fg-started")) })
	c := r.session(d.cwd)
	r.c.MustCall("session/set_config_option", map[string]any{"sessionId": c, "configId": "permission", "type": "id", "value": "ask"}, nil)
	r.prompt(c, "echo never")
	r.c.WaitFor("the permission request", func(m *acptest.Msg) bool { return m.Method == "session/request_permission" })
	// Session E: a terminal being stopped, which ignores SIGTERM, with a
	// kill grace of 10 s.
	e := r.session(d.cwd)
	r.c.MustCall("session/set_config_option", map[string]any{"sessionId": e, "configId": "kill_grace", "type": "id", "value": grace.String()}, nil)
	r.prompt(e, "/bg trap '' TERM; echo stubborn $$; while :; do sleep 0.1; done")
	var stubborn int
	r.c.WaitFor("the stubborn terminal's pid", func(*acptest.Msg) bool {
		stubborn = lastPidOf(string(r.c.Output(e, "term_1")), "stubborn")
		return stubborn != 0
	})
	r.prompt(e, "/stop term_1")
	stopped := time.Now()

	// On a loaded machine the setup and the upgrade can outlast the
	// wakeup's delay or the stop's grace (14.5 s from the wakeup's
	// scheduling to the upgrade's end was seen at load 45): what was due
	// then happened in the old image, as it should, and the handover of
	// that piece of work is not checked by this run. The rest is.
	d.upgrade(newBin)
	if took := time.Since(scheduled); took >= due {
		t.Logf("the upgrade ended %s after the wakeup was scheduled: it was due before; its handover is not checked", took)
	}
	r.exited()
	if took := time.Since(stopped); took >= grace {
		t.Logf("the upgrade ended %s after the stop: its grace was over before; the stop's handover is not checked", took)
	} else if err := syscall.Kill(stubborn, 0); err != nil {
		t.Errorf("the terminal being stopped (%d) is gone right after the upgrade: %v; want it to have ignored SIGTERM", stubborn, err)
	}

	n := d.relayOf(newBin)
	resume := func(sid string) {
		n.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": d.cwd, "replayFrom": map[string]string{"type": "start"}}, nil)
	}
	resume(b)
	final := n.c.WaitFor("the foreground command's tool call, final", func(m *acptest.Msg) bool {
		return m.SessionID == b && m.ToolCallID() == "call_1" && m.Status() != "" && m.Status() != acp.StatusInProgress
	})
	if final.Status() != acp.StatusCompleted || !strings.Contains(final.Text(), "upgrade") {
		t.Errorf("the foreground command at the upgrade: %s; want completed, moved to the background", final.Raw)
	}
	var state *acptest.Msg
	for _, m := range n.c.Updates(b) {
		if m.Kind == acp.KindState {
			state = m
		}
	}
	if state == nil {
		t.Fatal("no state_update for b after its resume")
	}
	if bg := state.Background(); len(bg) != 1 || bg[0].ID != "term_1" || state.State() != acp.StateIdle {
		t.Errorf("after the upgrade session b is %s with %v listed; want idle, term_1 listed", state.State(), bg)
	}
	resume(c)
	asked := n.c.WaitFor("the asking command's tool call, final", func(m *acptest.Msg) bool {
		return m.SessionID == c && m.ToolCallID() == "call_1" && m.Status() != "" && m.Status() != acp.StatusPending
	})
	if asked.Status() != acp.StatusFailed || !strings.Contains(asked.Text(), "Not run") {
		t.Errorf("the command that waited for permission at the upgrade: %s; want failed, not run", asked.Raw)
	}
	if out := n.c.Output(c, "term_1"); len(out) > 0 {
		t.Errorf("the command that waited for permission ran: %q", out)
	}

	resume(a)
	if err := os.WriteFile(go1, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done := n.c.WaitFor("the wait's end", func(m *acptest.Msg) bool {
		return m.SessionID == a && m.ToolCallID() == wait && (m.Status() == acp.StatusCompleted || m.Status() == acp.StatusFailed || m.Status() == acp.StatusCancelled)
	})
	if done.Status() != acp.StatusCompleted || !strings.Contains(done.Text(), "the-line-came") {
		t.Errorf("the wait across the upgrade ended %s", done.Raw)
	}
	n.c.WaitFor("the wakeup's run", func(*acptest.Msg) bool {
		return terminalPrinted(n.c, a, "wakeup-fired")
	})
	if err := os.WriteFile(filepath.Join(go2, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.c.WaitFor("the watch's run", func(*acptest.Msg) bool {
		return terminalPrinted(n.c, a, "watch-ran")
	})
	// The new image stops the terminal again: SIGKILL after its grace.
	resume(e)
	if sig := n.c.WaitFor("the stopped terminal's exitStatus", func(m *acptest.Msg) bool {
		return m.SessionID == e && m.TerminalID() == "term_1" && m.ExitStatus() != nil
	}).ExitStatus()["signal"]; sig != "SIGKILL" {
		t.Errorf("the terminal being stopped at the upgrade ended with signal %v, want SIGKILL", sig)
	}
	for _, sid := range []string{a, b, c, e} {
		n.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	}
	n.c.Close()
	n.exited()
	n.c.Check()
}

// terminalPrinted reports whether a terminal of session sid (term_1 to
// term_9) printed text, as c shows it.
func terminalPrinted(c *acptest.Client, sid, text string) bool {
	for i := 1; i < 10; i++ {
		if bytes.Contains(c.Output(sid, "term_"+strconv.Itoa(i)), []byte(text)) {
			return true
		}
	}
	return false
}

// title is the title of a tool call update, or "".
func title(m *acptest.Msg) string {
	s, _ := m.Update["title"].(string)
	return s
}

// shellagent up, waiting for a service to be ready, follows its daemon
// through an upgrade in place: the upgrade closes its connection, the
// services go on in the new image, and up, connected again, waits for
// them there and exits 0 once they are ready. It exited 1 before, saying
// that the daemon closed the connection, while the stack came up. To
// another build, whose daemon serves only its own clients, up goes on as
// that build (an exec of the daemon's executable); it exited 1 before,
// naming the two builds.
func TestDaemonUpgradeWhileUpWaits(t *testing.T) {
	t.Parallel()
	const file = `
[services.slow]
command = "while [ ! -e go ]; do sleep 0.05; done; echo slow ready; exec sleep 300"
ready = "slow ready"

[services.web]
command = "echo web listening; exec sleep 300"
depends_on = ["slow"]
ready = "listening"
`
	for _, to := range []struct{ name, bin string }{{"the same build", plainBinary}, {"another build", otherBinary}} {
		t.Run(to.name, func(t *testing.T) {
			t.Parallel()
			d, sock := newStackFixture(t, file)
			d.startOwnDaemon(plainBinary)
			up := d.startBin(plainBinary, d.cwd, append([]string{"up"}, sock...)...)
			waitFor(t, "slow to start", func() bool {
				status, _, _ := d.runBin(plainBinary, d.cwd, append([]string{"status"}, sock...)...)
				return regexp.MustCompile(`slow\s+starting\s+\d+`).MatchString(status)
			})
			d.upgrade(to.bin)
			if err := os.WriteFile(filepath.Join(d.cwd, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-up.done:
				if code := exitCode(err); code != 0 || !strings.Contains(up.out.String(), "Ready: slow, web.") {
					t.Errorf("up across the upgrade: exit %d, stdout %q, stderr %q; want 0, both ready", code, up.out.String(), up.errOut.String())
				}
			case <-time.After(testloop.Bound(30 * time.Second)):
				up.cmd.Process.Kill()
				t.Fatalf("up did not return after the services became ready: stdout %q, stderr %q", up.out.String(), up.errOut.String())
			}
			if _, _, code := d.runBin(to.bin, d.cwd, append([]string{"down"}, sock...)...); code != 0 {
				t.Errorf("down: exit %d", code)
			}
		})
	}
}

// shellagent logs -f follows a service through an upgrade in place of
// its daemon: the lines printed after the upgrade follow those before it,
// none lost or repeated, and logs -f goes on until interrupted. It exited
// 1 before, saying that the daemon closed the connection. To another
// build, whose daemon serves only its own clients, logs -f goes on as
// that build (an exec of the daemon's executable, told where it was): it
// exited 1 before, naming the command of the new build, which would have
// printed the last lines again.
func TestDaemonUpgradeWhileLogsFollows(t *testing.T) {
	t.Parallel()
	for _, to := range []struct{ name, bin string }{{"the same build", plainBinary}, {"another build", otherBinary}} {
		t.Run(to.name, func(t *testing.T) {
			t.Parallel()
			d, sock, follow := followTicks(t)
			out, errOut, done := follow.out, follow.errOut, follow.done
			ticks := func() []string { return regexp.MustCompile(`tick (\d+)`).FindAllString(out.String(), -1) }
			d.upgrade(to.bin)
			before := len(ticks())
			waitFor(t, "ticks after the upgrade", func() bool {
				select {
				case err := <-done:
					t.Fatalf("logs -f ended at the upgrade: %v, stderr %q", err, errOut.String())
				default:
				}
				return len(ticks()) >= before+5
			})
			follow.cmd.Process.Signal(syscall.SIGINT)
			if err := <-done; exitCode(err) != 0 {
				t.Errorf("logs -f after SIGINT: %v, stderr %q", err, errOut.String())
			}
			got := ticks()
			first, _ := strconv.Atoi(strings.TrimPrefix(got[0], "tick "))
			for i, tk := range got {
				if want := "tick " + strconv.Itoa(first+i); tk != want {
					t.Fatalf("logs -f printed %q where %q was due: lines lost or repeated across the upgrade\nstdout %q", tk, want, out.String())
				}
			}
			if n := strings.Count(errOut.String(), "Service tick, in "); n != 1 {
				t.Errorf("logs -f said which terminal %d times, want once: stderr %q", n, errOut.String())
			}
			if _, _, code := d.runBin(to.bin, d.cwd, append([]string{"down"}, sock...)...); code != 0 {
				t.Errorf("down: exit %d", code)
			}
		})
	}
}

// followTicks starts a stack with a service tick that prints "tick N"
// every 100 ms, under a daemon of its own (plainBinary), and shellagent
// logs tick -f, and returns once that has printed three ticks.
func followTicks(t *testing.T) (*daemonFixture, []string, *started) {
	t.Helper()
	const file = `
[services.tick]
command = "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done"
ready = "tick 1"
`
	d, sock := newStackFixture(t, file)
	d.startOwnDaemon(plainBinary)
	if out, errOut, code := d.runBin(plainBinary, d.cwd, append([]string{"up"}, sock...)...); code != 0 {
		t.Fatalf("up: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	follow := d.startBin(plainBinary, d.cwd, append([]string{"logs", "tick", "-f"}, sock...)...)
	waitFor(t, "logs -f to print ticks", func() bool { return strings.Contains(follow.out.String(), "tick 3") })
	return d, sock, follow
}
