package main

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// runIn runs the binary with args in dir, with the fixture's environment.
func (d *daemonFixture) runIn(dir string, args ...string) (stdout, stderr string, code int) {
	return d.runBin(binary, dir, args...)
}

// newStackFixture is a daemon fixture whose directory's shellagent.toml
// is file, and the --socket flag of its commands.
func newStackFixture(t *testing.T, file string) (d *daemonFixture, sock []string) {
	t.Helper()
	d = newDaemonFixture(t)
	if err := os.WriteFile(filepath.Join(d.cwd, "shellagent.toml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return d, []string{"--socket", d.socket}
}

const stackFile = `
[services.db]
command = "echo db starting; sleep 0.2; echo db accepting connections; exec sleep 300"
ready = "accepting connections"

[services.web]
command = "echo web listening; exec sleep 300"
depends_on = ["db"]
ready = "listening"
log = true

[services.broken]
command = "echo broken output; exit 4"
ready = "never printed"
`

// TestStackCommandLine: shellagent up starts the daemon on demand and the
// stack in its session for the directory, and returns once all are ready;
// status and logs answer; an editor's relay that resumes the session sees
// the services, and its kill -9 leaves them running, there for the next
// relay; up of a service that fails exits 1 with its last lines; down
// stops them all, and nothing is left.
func TestStackCommandLine(t *testing.T) {
	t.Parallel()
	d, sock := newStackFixture(t, stackFile)
	state := t.TempDir()

	out, errOut, code := d.runIn(d.cwd, append([]string{"up", "web", "--state-dir", state}, sock...)...)
	if code != 0 || !strings.Contains(out, "Ready: db, web.") {
		t.Fatalf("shellagent up: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if len(d.daemons()) != 1 {
		t.Fatalf("daemons %v after up, want the one it started", d.daemons())
	}
	// status and logs print plain text, without the Markdown fences an
	// editor gets; logs prints the lines alone on stdout.
	out, errOut, code = d.runIn(d.cwd, append([]string{"status"}, sock...)...)
	for _, want := range []string{"\nNAME ", "\ndb ", "\nweb ", " ready "} {
		if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "```") {
			t.Errorf("shellagent status: exit %d, stdout %q (want %q, no fence), stderr %q", code, out, want, errOut)
		}
	}
	out, errOut, code = d.runIn(d.cwd, append([]string{"logs", "db", "5"}, sock...)...)
	if code != 0 || out != "db starting\ndb accepting connections\n" || !strings.Contains(errOut, "Output of term_") {
		t.Errorf("shellagent logs db 5: exit %d, stdout %q (want its two lines), stderr %q (want the heading)", code, out, errOut)
	}
	// logs -f of a name no service has says what logs says.
	noSuch := `No service "nosuch" has run in this session: /status lists them.` + "\n"
	for _, args := range [][]string{{"logs", "nosuch"}, {"logs", "nosuch", "-f"}, {"logs", "-f", "nosuch", "3"}} {
		if out, errOut, code := d.runIn(d.cwd, append(args, sock...)...); code != 1 || out != "" || errOut != noSuch {
			t.Errorf("shellagent %v: exit %d, stdout %q, stderr %q; want 1, %q on stderr", args, code, out, errOut, noSuch)
		}
	}
	waitFor(t, "web's log file", func() bool {
		files, _ := filepath.Glob(filepath.Join(state, "logs", "*", "web.log"))
		if len(files) != 1 {
			return false
		}
		b, _ := os.ReadFile(files[0])
		return bytes.Contains(b, []byte("web listening"))
	})

	// An editor resumes the session and sees the services; its relay's
	// kill -9 leaves them running.
	a := d.relay()
	sid := stackSession(t, a, d.cwd)
	a.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": d.cwd}, nil)
	listed := a.c.WaitFor("the state after the resume", func(m *acptest.Msg) bool { return m.Kind == acp.KindState && m.SessionID == sid })
	if n := len(listed.Background()); n != 2 {
		t.Errorf("the resumed session lists %v, want the two services' terminals", listed.Background())
	}
	for _, name := range []string{"db", "web"} {
		a.c.WaitFor("service "+name, func(m *acptest.Msg) bool {
			return m.Kind == acp.KindToolCall && m.Update["title"] == "service "+name && m.Status() == acp.StatusInProgress
		})
	}
	lookWhileTheEditorHasIt(t, d, a, sid)
	a.cmd.Process.Kill()
	a.exited()
	time.Sleep(200 * time.Millisecond)
	b := d.relay()
	b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": d.cwd}, nil)
	again := b.c.WaitFor("the state after the second resume", func(m *acptest.Msg) bool { return m.Kind == acp.KindState && m.SessionID == sid })
	if len(again.Background()) != 2 || again.Background()[0] != listed.Background()[0] {
		t.Errorf("after the relay's kill -9 the session lists %v, want %v", again.Background(), listed.Background())
	}
	b.c.Close()
	b.exited()
	b.c.Check()

	out, errOut, code = d.runIn(d.cwd, append([]string{"up", "broken"}, sock...)...)
	if code != 1 || !strings.Contains(out, "Failed: broken failed") || !strings.Contains(errOut, "Its last lines:\nbroken output\n") {
		t.Errorf("shellagent up broken: exit %d (want 1), stdout %q, stderr %q (want its last lines)", code, out, errOut)
	}
	if n := strings.Count(strings.ToLower(errOut), "service broken failed"); n != 1 {
		t.Errorf("shellagent up broken: stderr %q says that broken failed %d times, want once", errOut, n)
	}

	out, errOut, code = d.runIn(d.cwd, append([]string{"down"}, sock...)...)
	if code != 0 || !strings.Contains(out, "Stopped: web, db.") {
		t.Errorf("shellagent down: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	d.waitGone(5*time.Second, "shellagent down", d.work)
}

// lookWhileTheEditorHasIt: while editor a has the stack's session sid,
// status and logs look at it without taking it, as another client's
// _shellagent/session/look does, which takes only the commands that
// read; none of them reaches the editor: the only user message it sees
// is its own.
func lookWhileTheEditorHasIt(t *testing.T, d *daemonFixture, a *relayProc, sid string) {
	t.Helper()
	sock := []string{"--socket", d.socket}
	if out, errOut, code := d.runIn(d.cwd, append([]string{"status"}, sock...)...); code != 0 || !strings.Contains(out, "\ndb ") {
		t.Errorf("shellagent status beside the editor: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := d.runIn(d.cwd, append([]string{"logs", "db", "5"}, sock...)...); code != 0 || out != "db starting\ndb accepting connections\n" {
		t.Errorf("shellagent logs db 5 beside the editor: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	o := d.relay()
	var looked acp.LookSessionResponse
	o.c.MustCall(acp.MethodLookSession, acp.LookSessionRequest{SessionID: sid, Command: "/logs web 1"}, &looked)
	if !strings.Contains(looked.Text, "web listening") {
		t.Errorf("a look at /logs web 1 answered %q, want web's line", looked.Text)
	}
	for _, tt := range []struct {
		sid, command string
		code         int
	}{
		{sid, "/down", acp.CodeInvalidParams},
		{sid, "echo hi", acp.CodeInvalidParams},
		{sid, "/logs", acp.CodeInvalidParams},
		{"sess_none", "/ps", acp.CodeNotFound},
	} {
		if _, rerr := o.c.Call(acp.MethodLookSession, acp.LookSessionRequest{SessionID: tt.sid, Command: tt.command}); rerr == nil || rerr.Code != tt.code {
			t.Errorf("a look at %q in %s: error %v, want code %d", tt.command, tt.sid, rerr, tt.code)
		}
	}
	o.c.Close()
	o.exited()
	o.c.Check()

	a.c.MustCall("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": "/ps"}}}, nil)
	a.c.WaitFor("the answer to the editor's /ps", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindAgentMessage && strings.HasPrefix(m.Text(), "Background work:")
	})
	var said []string
	for _, m := range a.c.Updates(sid) {
		if m.Kind == acp.KindUserMessage {
			said = append(said, m.Text())
		}
	}
	if !slices.Equal(said, []string{"/ps"}) {
		t.Errorf("the editor saw the user messages %q, want its own /ps only", said)
	}
}

// stackSession returns the session the daemon has for cwd.
func stackSession(t *testing.T, r *relayProc, cwd string) string {
	t.Helper()
	var list acp.ListSessionsResponse
	r.c.MustCall("session/list", map[string]any{"cwd": cwd}, &list)
	if len(list.Sessions) != 1 {
		t.Fatalf("sessions of %s: %v, want the stack's", cwd, list.Sessions)
	}
	return list.Sessions[0].SessionID
}

// lockedBuffer is a bytes.Buffer a process writes while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStackLogsFollow: shellagent logs NAME -f prints the last lines,
// then the lines the service prints after it started, and goes on with
// its next run when it restarts, saying so on stderr; SIGINT or SIGTERM
// ends it at once with exit 0. It takes nothing: the editor that has the
// session keeps it, and sees nothing of it. It leaves nothing behind: the
// service runs on, and down then leaves no process.
func TestStackLogsFollow(t *testing.T) {
	t.Parallel()
	const file = `
[services.ticker]
command = "echo started; while :; do if [ -e go ]; then cat go; rm -f go; fi; if [ -e crash ]; then rm -f crash; exit 7; fi; sleep 0.05; done"
restart = "always"
backoff = "0s"
`
	d, sock := newStackFixture(t, file)
	if out, errOut, code := d.runIn(d.cwd, append([]string{"up"}, sock...)...); code != 0 {
		t.Fatalf("shellagent up: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	editor := d.relay()
	sid := stackSession(t, editor, d.cwd)
	editor.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": d.cwd}, nil)
	// put writes what the service prints next, or makes it exit 7.
	put := func(name, text string) {
		if err := os.WriteFile(filepath.Join(d.cwd, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		follow := d.startBin(binary, d.cwd, append([]string{"logs", "ticker", "-f"}, sock...)...)
		cmd, out, errOut, done := follow.cmd, follow.out, follow.errOut, follow.done
		waitFor(t, "the last lines", func() bool { return strings.Contains(out.String(), "started") })
		want := fmt.Sprintf("printed-%d", i+1)
		put("go", want+"\n")
		waitFor(t, want+" through -f", func() bool { return strings.Contains(out.String(), want) })
		if i == 0 {
			put("crash", "")
			waitFor(t, "the next run through -f", func() bool { return strings.Count(out.String(), "started") == 2 })
			put("go", "after the restart\n")
			waitFor(t, "the next run's line through -f", func() bool { return strings.Contains(out.String(), "after the restart") })
			for _, want := range []string{"Service ticker, in term_1:", "[term_1 ended: exited with code 7]", "Service ticker, in term_2:"} {
				if !strings.Contains(errOut.String(), want) {
					t.Errorf("logs -f across a restart: stderr %q, want %q", errOut.String(), want)
				}
			}
		}
		cmd.Process.Signal(sig)
		select {
		case err := <-done:
			if code := exitCode(err); code != 0 {
				t.Errorf("logs -f after %v: exit %d, stderr %q", sig, code, errOut.String())
			}
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("logs -f did not end within 5s of %v; stdout %q", sig, out.String())
		}
		if strings.Count(out.String(), want) != 1 {
			t.Errorf("logs -f printed %q, want %s once", out.String(), want)
		}
	}
	// The editor kept the session: its prompt is answered, and the only
	// user message it saw is its own.
	editor.c.MustCall("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": "/status"}}}, nil)
	editor.c.WaitFor("the answer to the editor's /status", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindAgentMessage && strings.Contains(m.Text(), "ticker")
	})
	for _, m := range editor.c.Updates(sid) {
		if m.Kind == acp.KindUserMessage && m.Text() != "/status" {
			t.Errorf("the editor saw the user message %q, want its own /status only", m.Text())
		}
	}
	editor.c.Close()
	editor.exited()
	editor.c.Check()
	if out, errOut, code := d.runIn(d.cwd, append([]string{"down"}, sock...)...); code != 0 {
		t.Errorf("shellagent down: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	d.waitGone(5*time.Second, "shellagent down", d.work)
}

// startIn starts the binary with args in dir, with the fixture's
// environment; the test's cleanup kills it if it still runs. Its done
// is closed once it has exited, with its state.
func (d *daemonFixture) startIn(dir string, args ...string) *bgRun {
	d.t.Helper()
	r := &bgRun{done: make(chan struct{})}
	cmd := exec.Command(binary, args...)
	cmd.Env, cmd.Dir = d.env(), dir
	cmd.Stdout, cmd.Stderr = &r.out, &r.errOut
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	r.proc = cmd.Process
	go func() {
		cmd.Wait() // its state is cmd.ProcessState
		r.state = cmd.ProcessState
		close(r.done)
	}()
	d.t.Cleanup(func() {
		r.proc.Kill() // Best effort: it has exited unless the test failed.
		<-r.done
	})
	return r
}

// A bgRun is a command started by startIn.
type bgRun struct {
	proc        *os.Process
	out, errOut lockedBuffer
	done        chan struct{}
	state       *os.ProcessState // once done
}

// signalled sends sig to r, waits for its end, and reports whether sig
// ended it (with the default effect of the signal, which a shell reports
// as 128+sig).
func (r *bgRun) signalled(t *testing.T, sig syscall.Signal) bool {
	t.Helper()
	r.proc.Signal(sig)
	select {
	case <-r.done:
	case <-time.After(testloop.Wait):
		t.Fatalf("still running %v after %v; stdout %q, stderr %q", testloop.Wait, sig, r.out.String(), r.errOut.String())
	}
	ws, ok := r.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// Ctrl-C on shellagent up while it waits for a service that is never
// ready: up stops the wait (session/cancel), says so and that the service
// goes on, and ends by SIGINT (a shell's status 130); the service still
// starts. down then stops it at once, not once the ready timeout has
// ended the /up turn (before, up died at once and its /up held the
// session's turn until then: down waited behind it).
func TestStackUpInterrupted(t *testing.T) {
	t.Parallel()
	const file = `
[services.a]
command = "echo waiting; exec sleep 300"
ready = "never"
ready_timeout = "60s"
`
	d, sock := newStackFixture(t, file)
	up := d.startIn(d.cwd, append([]string{"up"}, sock...)...)
	starting := regexp.MustCompile(`(?m)^a +starting `)
	status := func() string {
		out, _, _ := d.runIn(d.cwd, append([]string{"status"}, sock...)...)
		return out
	}
	waitFor(t, "up to start the service", func() bool { return starting.MatchString(status()) })
	if !up.signalled(t, syscall.SIGINT) {
		t.Errorf("up after SIGINT: %v, want it ended by SIGINT", up.state)
	}
	want := "shellagent up: interrupted: no longer waiting. The services go on as they are: shellagent status shows where they stand.\n"
	if up.out.String() != "" || up.errOut.String() != want {
		t.Errorf("up after SIGINT: stdout %q, stderr %q; want %q on stderr", up.out.String(), up.errOut.String(), want)
	}
	if out := status(); !starting.MatchString(out) {
		t.Errorf("status after up's SIGINT: %q, want a still starting", out)
	}
	start := time.Now()
	out, errOut, code := d.runIn(d.cwd, append([]string{"down"}, sock...)...)
	if code != 0 || out != "Stopped: a.\n" {
		t.Errorf("down: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("down took %v: it waited for the ready timeout (60s) of the /up that up left", took)
	}
	d.waitGone(5*time.Second, "down", d.work)
}

// SIGTERM to shellagent down while it waits for a service that ignores
// SIGTERM to stop (a kill grace of a minute): down stops the wait, says
// that the stop goes on, and ends by SIGTERM. The session's turn is free:
// up of another service answers at once (before, down died at once and
// its /down held the turn for the whole grace: up waited behind it).
func TestStackDownInterrupted(t *testing.T) {
	t.Parallel()
	const file = `
[services.stubborn]
command = "trap 'echo term > termed' TERM; trap '' HUP; echo up; while [ ! -e quit ]; do sleep 0.1; done"
ready = "up"

[services.other]
command = "echo up; exec sleep 300"
ready = "up"
`
	d := newDaemonFixture(t, "--kill-grace", "60s")
	if err := os.WriteFile(filepath.Join(d.cwd, "shellagent.toml"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := []string{"--socket", d.socket}
	starter := d.relay() // the daemon, with its kill grace
	starter.c.Close()
	starter.exited()
	if out, errOut, code := d.runIn(d.cwd, append([]string{"up", "stubborn"}, sock...)...); code != 0 || out != "Ready: stubborn.\n" {
		t.Fatalf("up stubborn: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	down := d.startIn(d.cwd, append([]string{"down", "stubborn"}, sock...)...)
	waitFor(t, "the service to get SIGTERM", func() bool {
		_, err := os.Stat(filepath.Join(d.cwd, "termed"))
		return err == nil
	})
	if !down.signalled(t, syscall.SIGTERM) {
		t.Errorf("down after SIGTERM: %v, want it ended by SIGTERM", down.state)
	}
	want := "shellagent down: interrupted: no longer waiting. The services being stopped go on stopping: shellagent status shows where they stand.\n"
	if down.out.String() != "" || down.errOut.String() != want {
		t.Errorf("down after SIGTERM: stdout %q, stderr %q; want %q on stderr", down.out.String(), down.errOut.String(), want)
	}
	start := time.Now()
	if out, errOut, code := d.runIn(d.cwd, append([]string{"up", "other"}, sock...)...); code != 0 || out != "Ready: other.\n" {
		t.Errorf("up other: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("up other took %v: it waited for the kill grace (60s) of the /down that down left", took)
	}
	if err := os.WriteFile(filepath.Join(d.cwd, "quit"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := d.runIn(d.cwd, append([]string{"down"}, sock...)...); code != 0 || !strings.HasPrefix(out, "Stopped: ") {
		t.Errorf("down: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	d.waitGone(5*time.Second, "down", d.work)
}

// runAt runs the binary with args in dir as a shell there runs it: with
// $PWD set to dir as written, through a symbolic link if dir is one (so
// that os.Getwd returns the link).
func (d *daemonFixture) runAt(dir string, args ...string) (stdout, stderr string, code int) {
	cmd := exec.Command(binary, args...)
	cmd.Env, cmd.Dir = append(d.env(), "PWD="+dir), dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), exitCode(err)
}

// The project's directory reached through a symbolic link is the same
// project: up through the directory, then status, logs, up and down
// through the link see and stop the same services, and the reverse; no
// second copy runs. The stack's session has the resolved directory as its
// cwd. An editor's session opened through the link is the directory's
// too: the commands in the directory find it, and down stops its
// services. (Before, a session was the directory's only as the shell's
// $PWD named it, and up through the link started a second copy.)
func TestStackThroughASymlink(t *testing.T) {
	t.Parallel()
	const file = `
[services.srv]
command = "echo srv up; exec sleep 300"
ready = "srv up"
`
	d, sock := newStackFixture(t, file)
	dir, err := filepath.EvalSymlinks(d.cwd)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "plink")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	run := func(where string, args ...string) (string, string, int) {
		return d.runAt(where, append(args, sock...)...)
	}
	ready := regexp.MustCompile(`(?m)^srv +ready `)
	for _, tt := range []struct{ name, up, then string }{
		{"up in the directory, the rest through the link", dir, link},
		{"up through the link, the rest in the directory", link, dir},
	} {
		if out, errOut, code := run(tt.up, "up"); code != 0 || out != "Ready: srv.\n" {
			t.Fatalf("%s: up: exit %d, stdout %q, stderr %q", tt.name, code, out, errOut)
		}
		running := d.work()
		if out, errOut, code := run(tt.then, "status"); code != 0 || !ready.MatchString(out) {
			t.Errorf("%s: status: exit %d, stdout %q, stderr %q; want srv ready", tt.name, code, out, errOut)
		}
		if out, errOut, code := run(tt.then, "logs", "srv"); code != 0 || out != "srv up\n" {
			t.Errorf("%s: logs srv: exit %d, stdout %q, stderr %q", tt.name, code, out, errOut)
		}
		if out, errOut, code := run(tt.then, "up"); code != 0 || out != "Ready: srv.\n" {
			t.Errorf("%s: up again: exit %d, stdout %q, stderr %q", tt.name, code, out, errOut)
		}
		if now := d.work(); !slices.Equal(now, running) {
			t.Errorf("%s: processes after up again: %v, want the first up's %v alone", tt.name, describe(now), describe(running))
		}
		if out, errOut, code := run(tt.then, "down"); code != 0 || out != "Stopped: srv.\n" {
			t.Errorf("%s: down: exit %d, stdout %q, stderr %q", tt.name, code, out, errOut)
		}
		d.waitGone(5*time.Second, tt.name+": down", d.work)
	}
	editor := d.relay()
	var list acp.ListSessionsResponse
	editor.c.MustCall("session/list", map[string]any{}, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].Cwd != dir {
		t.Errorf("sessions after up in the directory and through the link: %+v, want one, of %s", list.Sessions, dir)
	}

	// An editor's session, opened through the link.
	sid := editor.session(link)
	editor.prompt(sid, "/up")
	editor.c.WaitFor("the editor's /up", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindAgentMessage && m.SessionID == sid && strings.HasPrefix(m.Text(), "Ready: srv.")
	})
	if out, errOut, code := run(dir, "status"); code != 0 || !ready.MatchString(out) {
		t.Errorf("status of the editor's session: exit %d, stdout %q, stderr %q; want srv ready", code, out, errOut)
	}
	if out, errOut, code := run(dir, "down"); code != 0 || out != "Stopped: srv.\n" {
		t.Errorf("down of the editor's session: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	d.waitGone(5*time.Second, "down of the editor's session", d.work)
	editor.c.Close()
	editor.exited()
}

// TestStackArgs: flags come before, between or after the other
// arguments; for logs, a negative number is its count, not a flag.
func TestStackArgs(t *testing.T) {
	tests := []struct {
		args   []string
		counts bool
		rest   []string
		follow bool
		err    string
	}{
		{[]string{"web"}, true, []string{"web"}, false, ""},
		{[]string{"-f", "web", "5"}, true, []string{"web", "5"}, true, ""},
		{[]string{"web", "-f", "5"}, true, []string{"web", "5"}, true, ""},
		{[]string{"web", "5", "-f"}, true, []string{"web", "5"}, true, ""},
		{[]string{"web", "-3"}, true, []string{"web", "-3"}, false, ""},
		{[]string{"web", "-f", "-3"}, true, []string{"web", "-3"}, true, ""},
		{[]string{"-3", "web", "-f"}, true, []string{"-3", "web"}, true, ""},
		{[]string{"web", "-0.5", "-f"}, true, []string{"web", "-0.5"}, true, ""},
		{[]string{"web", "--3"}, true, nil, false, "unknown flag --3"},
		{[]string{"web", "-x"}, true, nil, false, "unknown flag --x"},
		{[]string{"db", "-3"}, false, nil, false, "unknown flag --3"},
		{nil, true, nil, false, ""},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		follow := fs.Bool("f", false, "")
		rest, err := stackArgs(fs, tt.args, tt.counts)
		if fmt.Sprint(err) != cmp.Or(tt.err, "<nil>") || !slices.Equal(rest, tt.rest) || *follow != tt.follow {
			t.Errorf("stackArgs(%q, %v) = %q, %v, -f %v; want %q, %q, -f %v", tt.args, tt.counts, rest, err, *follow, tt.rest, tt.err, tt.follow)
		}
	}
}

// TestNoticeText: the command line prints a notice's title once, its
// description's fenced lines unfenced, and no empty line.
func TestNoticeText(t *testing.T) {
	tests := []struct{ title, desc, want string }{
		{"service api failed: exit 1", "Service api failed: exit 1.\nIts last lines:\n```\nboom\n```", "Service api failed: exit 1.\nIts last lines:\nboom"},
		{"service api ended: exit 0", "Service api ended: exit 0.", "Service api ended: exit 0."},
		{"Input wait", "term_1 waits for input.", "Input wait\nterm_1 waits for input."},
		{"Its output", "```\nonly lines\n```", "Its output\nonly lines"},
		{"no description", "", "no description"},
	}
	for _, tt := range tests {
		if got := noticeText(tt.title, tt.desc); got != tt.want {
			t.Errorf("noticeText(%q, %q) = %q, want %q", tt.title, tt.desc, got, tt.want)
		}
	}
}

// A daemon killed with SIGKILL: logs -f, which followed a service, says
// that the daemon closed the connection and exits 1; the services run on
// until the next daemon sweeps them. shellagent up, run again at once,
// starts the services only once they are gone: the new run of a service
// never meets the old one (here, its pid file names a live process; a
// dev server would find its port taken).
func TestStackUpAgainAfterADaemonCrash(t *testing.T) {
	t.Parallel()
	const srv = `
[services.srv]
command = 'p=$(cat srv.pid 2>/dev/null); if [ -n "$p" ] && read -r _ _ s _ < /proc/$p/stat && [ "$s" != Z ]; then echo the old run is alive; fi; echo $$ > srv.pid; echo started; exec sleep 300'
ready = "started"
`
	d, sock := newStackFixture(t, srv)
	if out, errOut, code := d.runIn(d.cwd, append([]string{"up"}, sock...)...); code != 0 || !strings.Contains(out, "Ready: srv.") {
		t.Fatalf("up: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	b, err := os.ReadFile(filepath.Join(d.cwd, "srv.pid"))
	first, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !slices.Contains(d.work(), first) {
		t.Fatalf("the first run's pid file: %q, %v; want a running pid", b, err)
	}
	follow := exec.Command(binary, append([]string{"logs", "srv", "-f"}, sock...)...)
	follow.Env, follow.Dir = d.env(), d.cwd
	var followErr lockedBuffer
	follow.Stderr = &followErr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "logs -f to follow", func() bool { return strings.Contains(followErr.String(), "Service srv, in ") })
	daemons := d.daemons()
	if len(daemons) != 1 {
		t.Fatalf("daemons: %v, want one", describe(daemons))
	}
	syscall.Kill(daemons[0], syscall.SIGKILL)
	d.waitGone(5*time.Second, "the SIGKILL", d.daemons)
	if err := follow.Wait(); exitCode(err) != 1 || !strings.HasSuffix(followErr.String(), "shellagent logs: _shellagent/service/read: the daemon closed the connection\n") {
		t.Errorf("logs -f when its daemon died: %v, stderr %q; want exit 1, saying the daemon closed the connection", err, followErr.String())
	}
	if !slices.Contains(d.work(), first) {
		t.Fatalf("the first run ended with its daemon: nothing to sweep")
	}

	out, errOut, code := d.runIn(d.cwd, append([]string{"up"}, sock...)...)
	if code != 0 || !strings.Contains(out, "Ready: srv.") {
		t.Fatalf("up again: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if slices.Contains(d.work(), first) {
		t.Errorf("the first run (pid %d) outlived the second up", first)
	}
	if logs, errOut, code := d.runIn(d.cwd, append([]string{"logs", "srv"}, sock...)...); code != 0 || logs != "started\n" {
		t.Errorf("logs srv: exit %d, stdout %q, stderr %q; want the new run's start alone", code, logs, errOut)
	}
	if out, errOut, code := d.runIn(d.cwd, append([]string{"down"}, sock...)...); code != 0 || out != "Stopped: srv.\n" {
		t.Errorf("down: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A daemon killed with SIGKILL leaves its services running until an agent
// starts and sweeps them. Meanwhile status, logs and down in the project
// say so and name what was left there; down without names stops it, that
// of this project only, and the dead daemon's cgroup goes with the last of
// its terminals.
func TestStackStatusAndDownAfterADaemonCrash(t *testing.T) {
	t.Parallel()
	const file = `
[services.web]
command = "echo up; exec sleep 300"
ready = "up"

[services.worker]
command = "sleep 301 & echo up; wait"
ready = "up"
cwd = "sub"
`
	d, sock := newStackFixture(t, file)
	other := t.TempDir()
	if err := os.Mkdir(filepath.Join(d.cwd, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "shellagent.toml"), []byte("[services.other]\ncommand = \"echo up; exec sleep 302\"\nready = \"up\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{d.cwd, other} {
		if out, errOut, code := d.runIn(dir, append([]string{"up"}, sock...)...); code != 0 || !strings.HasPrefix(out, "Ready: ") {
			t.Fatalf("up in %s: exit %d, stdout %q, stderr %q", dir, code, out, errOut)
		}
	}
	in := func(dir string) []int {
		return slices.DeleteFunc(d.work(), func(pid int) bool {
			wd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
			return err != nil || wd != dir && !strings.HasPrefix(wd, dir+"/")
		})
	}
	here, there := in(d.cwd), in(other)
	if len(here) != 3 || len(there) != 1 { // sleep 300, the worker's shell and its sleep 301; sleep 302
		t.Fatalf("processes: %v in the project, %v in the other; want 3 and 1", describe(here), describe(there))
	}
	instanceCgroup := ""
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", here[0]))
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok && strings.HasPrefix(path.Base(path.Dir(p)), "shellagent-") {
			instanceCgroup = filepath.Join(cgroup2Mount(t), path.Dir(p)) // cgroup mode
		}
	}
	daemons := d.daemons()
	if len(daemons) != 1 {
		t.Fatalf("daemons: %v, want one", describe(daemons))
	}
	syscall.Kill(daemons[0], syscall.SIGKILL)
	d.waitGone(5*time.Second, "the SIGKILL", d.daemons)

	named := func(out string, pids []int) bool {
		for _, pid := range pids {
			if !strings.Contains(out, fmt.Sprintf("\n  %d  ", pid)) {
				return false
			}
		}
		return strings.Count(out, "\n  ") == len(pids)
	}
	left := fmt.Sprintf("No daemon session runs the stack of %s, but a shellagent no longer running (killed or crashed) left 3 processes running there:\n", d.cwd)
	tell := "shellagent down (without names) stops them, as does the next shellagent up.\n"
	tests := []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"status"}, 0, left, ""},
		{[]string{"logs", "web"}, 1, "", left},
		{[]string{"down", "web"}, 1, "", left},
	}
	for _, tt := range tests {
		out, errOut, code := d.runIn(d.cwd, append(tt.args, sock...)...)
		said := out + errOut
		if code != tt.code || !strings.HasPrefix(out, tt.out) || !strings.HasPrefix(errOut, tt.err) || !named(said, here) || !strings.HasSuffix(said, tell) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d naming %v", tt.args, code, out, errOut, tt.code, describe(here))
		}
	}
	if got := in(d.cwd); !slices.Equal(got, here) {
		t.Fatalf("after status, logs and down web: %v in the project, want the 3 left running", describe(got))
	}

	out, errOut, code := d.runIn(d.cwd, append([]string{"down"}, sock...)...)
	stopped := fmt.Sprintf("Stopped what a shellagent no longer running (killed or crashed) had left running in %s: 3 processes.\n", d.cwd)
	if code != 0 || !strings.HasPrefix(out, stopped) || !named(out, here) || errOut != "" {
		t.Errorf("down: exit %d, stdout %q, stderr %q; want %q naming %v", code, out, errOut, stopped, describe(here))
	}
	d.waitGone(5*time.Second, "down", func() []int { return in(d.cwd) })
	if got := in(other); !slices.Equal(got, there) {
		t.Errorf("the other project's processes after down here: %v, want %v", describe(got), describe(there))
	}
	if out, _, code := d.runIn(d.cwd, append([]string{"status"}, sock...)...); code != 0 || !strings.HasPrefix(out, "No services run in ") {
		t.Errorf("status after down: exit %d, stdout %q", code, out)
	}
	if instanceCgroup != "" {
		if _, err := os.Stat(instanceCgroup); err != nil {
			t.Errorf("the dead daemon's cgroup went while the other project's service ran in it: %v", err)
		}
	}
	if out, errOut, code := d.runIn(other, append([]string{"down"}, sock...)...); code != 0 || !named(out, there) {
		t.Errorf("down in the other project: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if instanceCgroup != "" {
		if _, err := os.Stat(instanceCgroup); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the dead daemon's cgroup %s after down of its last terminal: %v, want it removed", instanceCgroup, err)
		}
	}
	if len(d.daemons()) != 0 {
		t.Errorf("daemons after status and down: %v, want none started", describe(d.daemons()))
	}
}

// Two shellagent up at once in one directory: the second takes the
// session from the first (session/resume), and the first exits 1 saying
// so, instead of waiting for an answer that now goes to the second; the
// second answers once the service is ready.
func TestStackUpTakenByAnother(t *testing.T) {
	t.Parallel()
	const slow = `
[services.slow]
command = "while [ ! -e go ]; do sleep 0.05; done; echo ready now; exec sleep 300"
ready = "ready now"
`
	d, sock := newStackFixture(t, slow)
	type run struct {
		out, errOut lockedBuffer
		done        chan struct{} // closed once it exited, with err
		err         error
	}
	up := func() *run {
		r := &run{done: make(chan struct{})}
		cmd := exec.Command(binary, append([]string{"up"}, sock...)...)
		cmd.Env, cmd.Dir = d.env(), d.cwd
		cmd.Stdout, cmd.Stderr = &r.out, &r.errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.err = cmd.Wait(); close(r.done) }()
		t.Cleanup(func() {
			cmd.Process.Kill() // Best effort: it has exited unless the test failed.
			<-r.done
		})
		return r
	}
	first := up()
	starting := regexp.MustCompile(`(?m)^slow +starting `)
	waitFor(t, "the first up to start the service", func() bool {
		out, _, _ := d.runIn(d.cwd, append([]string{"status"}, sock...)...)
		return starting.MatchString(out)
	})
	second := up()
	select {
	case <-first.done:
		if exitCode(first.err) != 1 || first.out.String() != "" || !strings.Contains(first.errOut.String(), "shellagent up: another client took the session") {
			t.Errorf("the first up, whose session was taken: %v, stdout %q, stderr %q; want exit 1, saying so", first.err, first.out.String(), first.errOut.String())
		}
	case <-time.After(testloop.Wait):
		t.Fatalf("the first up still waits %v after another took its session; stderr %q", testloop.Wait, first.errOut.String())
	}
	if err := os.WriteFile(filepath.Join(d.cwd, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.done:
		if second.err != nil || second.out.String() != "Ready: slow.\n" {
			t.Errorf("the second up: %v, stdout %q, stderr %q; want Ready: slow.", second.err, second.out.String(), second.errOut.String())
		}
	case <-time.After(testloop.Wait):
		t.Errorf("the second up still waits %v after the service is ready; stderr %q", testloop.Wait, second.errOut.String())
	}
}

// Two shellagent up at once, in a directory where no daemon runs yet,
// share one session: the service runs once (the up whose session the
// other took exits 1 saying so, as TestStackUpTakenByAnother), and down
// stops it, leaving nothing. Before, each found no session of the
// directory and opened one of its own, in which its /up started the
// service again: down stopped one of the two, and the other ran on,
// which status and down no longer saw.
func TestStackUpTwiceAtOnce(t *testing.T) {
	t.Parallel()
	d, sock := newStackFixture(t, `
[services.web]
command = "sleep 0.5; echo web up; exec sleep 300"
ready = "web up"
`)
	ups := []*bgRun{d.startIn(d.cwd, append([]string{"up"}, sock...)...), d.startIn(d.cwd, append([]string{"up"}, sock...)...)}
	ready := 0
	for i, up := range ups {
		select {
		case <-up.done:
		case <-time.After(testloop.Wait):
			t.Fatalf("up %d still waits after %v; stderr %q", i, testloop.Wait, up.errOut.String())
		}
		switch code, out, errOut := up.state.ExitCode(), up.out.String(), up.errOut.String(); {
		case code == 0 && out == "Ready: web.\n":
			ready++
		case code != 1 || !strings.Contains(errOut, "another client took the session"):
			t.Errorf("up %d: exit %d, stdout %q, stderr %q; want Ready: web., or exit 1 as its session was taken", i, code, out, errOut)
		}
	}
	if ready == 0 {
		t.Error("neither up said Ready: web.")
	}
	if work := d.work(); len(work) != 1 {
		t.Errorf("%d processes run after the two ups: %v; want web's, once", len(work), describe(work))
	}
	if out, errOut, code := d.runIn(d.cwd, append([]string{"down"}, sock...)...); code != 0 || out != "Stopped: web.\n" {
		t.Errorf("shellagent down: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	d.waitGone(5*time.Second, "shellagent down", d.work)
}

// An editor that opens a session of its own in the project's directory,
// after shellagent up, does not hide the stack from the command line:
// status, logs, up and down go to the session that runs it, though the
// editor's is more recent. Before, they went to the editor's: status said
// that no services ran, a second up started web again there, down said
// that there was nothing to stop, and web ran on.
func TestStackCommandLineBesideAnEditorsSession(t *testing.T) {
	t.Parallel()
	d, sock := newStackFixture(t, `
[services.web]
command = "echo web up; exec sleep 300"
ready = "web up"
`)
	if out, errOut, code := d.runIn(d.cwd, append([]string{"up"}, sock...)...); code != 0 || out != "Ready: web.\n" {
		t.Fatalf("shellagent up: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	editor := d.relay()
	var res acp.NewSessionResponse
	editor.c.MustCall("session/new", map[string]any{"cwd": d.cwd}, &res)
	editor.c.MustCall("session/prompt", map[string]any{"sessionId": res.SessionID, "prompt": []map[string]any{{"type": "text", "text": "echo editing"}}}, nil)
	editor.c.WaitFor("the editor's command", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindState && m.SessionID == res.SessionID && m.Update["state"] == "idle"
	})
	out, errOut, code := d.runIn(d.cwd, append([]string{"status"}, sock...)...)
	if code != 0 || !regexp.MustCompile(`(?m)^web +ready `).MatchString(out) {
		t.Errorf("shellagent status: exit %d, stdout %q, stderr %q; want web ready", code, out, errOut)
	}
	if out, errOut, code := d.runIn(d.cwd, append([]string{"logs", "web"}, sock...)...); code != 0 || out != "web up\n" {
		t.Errorf("shellagent logs web: exit %d, stdout %q, stderr %q; want its line", code, out, errOut)
	}
	// up again goes to the stack's session too, where web runs already:
	// it is left as it is, not started a second time in the editor's.
	if out, errOut, code := d.runIn(d.cwd, append([]string{"up"}, sock...)...); code != 0 || out != "Ready: web.\n" {
		t.Errorf("shellagent up again: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if work := d.work(); len(work) != 1 {
		t.Errorf("%d processes run after up again: %v; want web's, once", len(work), describe(work))
	}
	if out, errOut, code := d.runIn(d.cwd, append([]string{"down"}, sock...)...); code != 0 || out != "Stopped: web.\n" {
		t.Errorf("shellagent down: exit %d, stdout %q, stderr %q; want Stopped: web.", code, out, errOut)
	}
	d.waitGone(5*time.Second, "shellagent down", d.work)
	editor.c.Close()
	editor.exited()
	editor.c.Check()
}

// up, status, logs, logs -f and down against a daemon of another build
// (shellagent was rebuilt while the stack ran): each exits 1 and says so,
// naming both builds and both ways out, the upgrade in place (which keeps
// the services) first; none of them asks the old daemon anything or
// starts another, and the old daemon's services run on.
func TestStackCommandLineAgainstAnotherBuild(t *testing.T) {
	t.Parallel()
	d, sock := newStackFixture(t, stackFile)
	old := otherBuild(t)
	if out, errOut, code := d.runBin(old, d.cwd, append([]string{"up", "db"}, sock...)...); code != 0 || !strings.Contains(out, "Ready: db.") {
		t.Fatalf("up db, by the other build: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	builds := regexp.MustCompile(`is build (\S+ \([^)]*\))`)
	for _, args := range [][]string{{"up"}, {"status"}, {"logs", "db"}, {"logs", "db", "-f"}, {"down"}} {
		out, errOut, code := d.runIn(d.cwd, append(args, sock...)...)
		m := builds.FindAllStringSubmatch(errOut, -1)
		upgrade, stop := strings.Index(errOut, "'shellagent daemon upgrade'"), strings.Index(errOut, "'shellagent daemon stop'")
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "shellagent "+args[0]+": ") || len(m) != 2 || m[0][1] == m[1][1] || upgrade < 0 || stop < upgrade {
			t.Errorf("shellagent %v against the other build's daemon: exit %d, stdout %q, stderr %q; want exit 1 and, on stderr, both builds, the upgrade, then the stop", args, code, out, errOut)
		}
	}
	if pids := d.daemons(); len(pids) != 1 {
		t.Errorf("daemons: %v, want the other build's alone", describe(pids))
	}
	if out, errOut, code := d.runBin(old, d.cwd, append([]string{"status"}, sock...)...); code != 0 || !regexp.MustCompile(`(?m)^db +ready `).MatchString(out) {
		t.Errorf("status, by the other build, after: exit %d, stdout %q, stderr %q; want db ready", code, out, errOut)
	}
}

// TestStackCommandLineWhereNothingRuns: status and down where no daemon
// session of the directory is live say that nothing runs and exit 0, logs
// and logs -f say so on stderr and exit 1, and none of them starts a
// daemon or makes a past session of the directory live again (an
// editor's, or the stack's before the daemon stopped).
func TestStackCommandLineWhereNothingRuns(t *testing.T) {
	t.Parallel()
	d, sock := newStackFixture(t, stackFile)
	nothing := "No services run in " + d.cwd + ": shellagent up starts the stack of shellagent.toml (or the Procfile) there.\n"
	check := func(when, logsSaid, followSaid string) {
		t.Helper()
		for _, tt := range []struct {
			args           []string
			code           int
			stdout, stderr string
		}{
			{[]string{"status"}, 0, nothing, ""},
			{[]string{"logs", "db"}, 1, "", logsSaid},
			{[]string{"logs", "db", "-f"}, 1, "", followSaid},
			{[]string{"down"}, 0, "Nothing to stop: no service of the stack runs.\n", ""},
		} {
			if out, errOut, code := d.runIn(d.cwd, append(tt.args, sock...)...); code != tt.code || out != tt.stdout || errOut != tt.stderr {
				t.Errorf("%s: shellagent %v: exit %d, stdout %q, stderr %q; want %d, %q, %q", when, tt.args, code, out, errOut, tt.code, tt.stdout, tt.stderr)
			}
		}
	}
	check("no daemon", nothing, nothing)
	if pids := d.daemons(); len(pids) != 0 {
		t.Errorf("status, logs and down started a daemon: %v", describe(pids))
	}

	// A session of the directory, past once the daemon stopped.
	a := d.relay()
	sid := a.session(d.cwd)
	a.c.Close()
	a.exited()
	if _, errOut, code := d.runIn(d.cwd, "daemon", "stop", "--socket", d.socket); code != 0 {
		t.Fatalf("daemon stop: exit %d, stderr %q", code, errOut)
	}
	b := d.relay() // a daemon runs again
	check("a past session", nothing, nothing)
	if e := b.entry(sid); e == nil || e.Meta.Shellagent.State != "past" {
		t.Errorf("the directory's session after status, logs and down: %+v, want it listed, past", e)
	}

	// An editor's session of the directory, live, that ran no stack:
	// status's answer is the command line's, not the prompt's (which names
	// /up). status and logs look at it, down resumes it, as up does
	// (docs/stacks.md), and it stays live.
	live := b.session(d.cwd)
	noDB := `No service "db" has run in this session: /status lists them.` + "\n"
	check("a live session without services", noDB, noDB)
	if e := b.entry(live); e == nil || e.Meta.Shellagent.State == "past" {
		t.Errorf("the editor's session after status, logs and down: %+v, want it listed, live", e)
	}
	b.c.Close()
	b.exited()
}
