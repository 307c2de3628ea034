package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// The reference client of a daemon (shellagent client --daemon), driven
// as a person would, with the daemon of a daemonFixture; a relay of the
// fixture's started it (with the fixture's flags) and watches the daemon
// as an editor would: what it receives is checked against the schema.

// tickCounter is a background loop that prints "tick N" every 100 ms.
const tickCounter = "/bg i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done"

// tickCommand is tickCounter's command, as notes show it.
const tickCommand = "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done"

// client starts "shellagent client --daemon --socket S args…" in the
// fixture's cwd.
func (d *daemonFixture) client(args ...string) *clientRun {
	d.t.Helper()
	return startClientIn(d.t, d.cwd, d.env(), append([]string{"--daemon", "--socket", d.socket}, args...)...)
}

// listedSession is an entry of session/list as the client reads it.
type listedSession struct {
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
	Title     string `json:"title"`
	UpdatedAt string `json:"updatedAt"`
	Meta      struct {
		Shellagent struct {
			State     string   `json:"state"`
			Terminals []string `json:"terminals"`
		} `json:"shellagent"`
	} `json:"_meta"`
}

// entry returns r's session/list entry of sid, or nil.
func (r *relayProc) entry(sid string) *listedSession {
	r.t.Helper()
	raw, err := r.c.Call("session/list", map[string]any{})
	if err != nil {
		r.t.Fatalf("session/list: %v", err)
	}
	var list struct{ Sessions []listedSession }
	if err := json.Unmarshal(raw, &list); err != nil {
		r.t.Fatal(err)
	}
	if i := slices.IndexFunc(list.Sessions, func(s listedSession) bool { return s.SessionID == sid }); i >= 0 {
		return &list.Sessions[i]
	}
	return nil
}

// tickPattern matches a line of tickCounter.
var tickPattern = regexp.MustCompile(`^tick (\d+)$`)

// ticks returns the numbers of the tick lines among lines, in order.
func ticks(lines []string) []int {
	var n []int
	for _, l := range lines {
		if m := tickPattern.FindStringSubmatch(l); m != nil {
			i, _ := strconv.Atoi(m[1])
			n = append(n, i)
		}
	}
	return n
}

// expectTick waits for a tick line numbered at least n and returns the
// lines read before it, and its number.
func (r *clientRun) expectTick(n int) ([]string, int) {
	r.t.Helper()
	var before []string
	for {
		line := r.next("tick " + strconv.Itoa(n))
		if m := tickPattern.FindStringSubmatch(line); m != nil {
			if i, _ := strconv.Atoi(m[1]); i >= n {
				return before, i
			}
		}
		before = append(before, line)
	}
}

// next returns the next output line; want says what the test waits for.
func (r *clientRun) next(want string) string {
	r.t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			r.t.Fatalf("the client's output ended before %s; it printed:\n%s\nstderr:\n%s", want, strings.Join(r.seen, "\n"), r.stderr)
		}
		r.seen = append(r.seen, line)
		return line
	case <-time.After(20 * time.Second):
		r.t.Fatalf("no %s; the client printed:\n%s\nstderr:\n%s", want, strings.Join(r.seen, "\n"), r.stderr)
		return ""
	}
}

// consecutive reports whether n counts up by one.
func consecutive(n []int) bool {
	for i := 1; i < len(n); i++ {
		if n[i] != n[i-1]+1 {
			return false
		}
	}
	return true
}

// Issue 24: input that ends while a counter runs detaches: the counter
// runs on in the daemon and the client says how to come back. --resume
// (the newest session of the directory) shows the tail of the counter's
// output, then its live ticks, past what was seen before, and detaches
// again at the end of its input, even before the session is resumed;
// --resume ID comes back once more, /sessions lists the session, and
// /close closes it: not listed, its process gone. Before, the end of the
// input closed the session, which stopped the counter.
func TestClientDaemonDetachAndResume(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	v := d.relay()

	a := d.client()
	a.send(tickCounter)
	a.expect("[background: term_1 (" + tickCommand + ")]")
	a.expectTick(3)
	a.stdin.Close()
	a.wait()
	var sid string
	for _, line := range a.seen {
		if rest, ok := strings.CutPrefix(line, "[to come back: shellagent client --daemon --socket "+d.socket+" --resume "); ok {
			sid = strings.TrimSuffix(rest, "]")
		}
	}
	detached := "[detached: the session runs on in the daemon, with 1 background item: term_1 (" + tickCommand + ")]"
	if sid == "" || !slices.Contains(a.seen, detached) {
		t.Fatalf("the client did not say that it detached and how to come back (%q); it printed:\n%s", detached, strings.Join(a.seen, "\n"))
	}
	seen := slices.Max(ticks(a.seen))
	e := v.entry(sid)
	if e == nil || e.Cwd != d.cwd || e.Meta.Shellagent.State != "detached" || !slices.Equal(e.Meta.Shellagent.Terminals, []string{"term_1"}) {
		t.Fatalf("session/list after the client detached: %+v, want %s in %s, detached, running term_1", e, sid, d.cwd)
	}
	if len(d.work()) == 0 {
		t.Fatal("the counter does not run after the client detached")
	}
	time.Sleep(300 * time.Millisecond) // the counter prints to no one

	b := d.client("--resume")
	b.expect("[term_1 runs: " + tickCommand + "]")
	from := len(b.seen)
	listed := "[background: term_1 (" + tickCommand + ")]"
	tail := ticks(b.expect(listed)) // the resume's updates end with the list
	if len(tail) == 0 || len(tail) > 20 || tail[len(tail)-1] < seen {
		t.Fatalf("--resume showed the tail %v; want at most 20 lines, up to at least tick %d, which the first client saw", tail, seen)
	}
	b.expectTick(tail[len(tail)-1] + 3) // live
	if got := ticks(b.seen[from:]); !consecutive(got) {
		t.Errorf("after --resume, the tail and the live ticks %v do not count up by one", got)
	}
	if !slices.Contains(b.seen, "[reattaching to "+sid+" ("+tickCommand+") in "+d.cwd+"]") {
		t.Errorf("--resume did not say which session it reattached to:\n%s", strings.Join(b.seen, "\n"))
	}
	b.stdin.Close()
	b.expect(detached)
	b.wait()
	seen = slices.Max(ticks(b.seen))

	// Input that ends before the session is resumed detaches once it is.
	early := d.client("--resume", sid)
	early.stdin.Close()
	early.expect(detached)
	early.wait()

	c := d.client("--resume", sid)
	c.expect("[term_1 runs: " + tickCommand + "]")
	c.expect(listed)
	c.expectTick(seen + 2)
	c.send("/sessions")
	c.expect("Sessions:")
	line := c.next("the session's line")
	for _, want := range []string{sid + "  ", "  " + d.cwd + "  ", "  attached (here)  ", "  running term_1  ", "  updated "} {
		if !strings.Contains(line, want) {
			t.Errorf("/sessions lists %q, which lacks %q", line, want)
		}
	}
	c.send("/close")
	c.expect("[closing the session will stop 1 background item: term_1 (" + tickCommand + ")]")
	c.expect("[term_1 ended: signal SIGTERM]")
	c.expect("[session closed]")
	c.wait()
	// A closed session is history: listed as past (its history is kept),
	// never as live.
	if e := v.entry(sid); e != nil && (e.Meta.Shellagent.State != "past" || len(e.Meta.Shellagent.Terminals) != 0) {
		t.Errorf("session/list after /close lists %+v, want it past or gone", e)
	}
	d.waitGone(2*time.Second, "/close", d.work)
	v.c.Check()
}

// --resume without a session to come back to ends with status 1 and
// says why: none in the directory, or no such id.
func TestClientDaemonResumeNothing(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	d.relay() // the daemon, with the fixture's flags
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--resume"}, "[no session of " + d.cwd + " in the daemon to reattach to (shellagent client --daemon starts one there; --resume ID names another)]"},
		{[]string{"--resume", "sess_NOPE"}, "[no session sess_NOPE in the daemon (shellagent daemon status lists them)]"},
	} {
		r := d.client(tt.args...) // its input stays open: it ends of itself
		r.expect(tt.want)
		for range r.lines {
		}
		if err := r.cmd.Wait(); exitCode(err) != 1 || r.stderr.String() != "" {
			t.Errorf("%v: exit %v, stderr %q; want exit status 1 and nothing on stderr", tt.args, err, r.stderr)
		}
	}
}

// In terminal mode, Ctrl-D asks: Enter detaches (the server runs on, and
// the client says how to come back); after --resume ID, Ctrl-D then c
// closes the session, which stops the server.
func TestTerminalDaemonCtrlD(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	v := d.relay()
	r := startTTYIn(t, d.cwd, d.env(), "--daemon", "--socket", d.socket)
	r.waitPrompt(1)
	r.press("/bg sleep 60\r")
	r.waitCount("[background: term_1 (sleep 60)]", 1)
	r.waitPrompt(2)
	question := "[closing the session will stop 1 background item: term_1 (sleep 60)]\n[detach (the session runs on in the daemon) or close the session? D/c]"
	r.press("\x04") // Ctrl-D
	r.waitCount(question, 1)
	r.press("\r")
	r.waitCount("[detached: the session runs on in the daemon, with 1 background item: term_1 (sleep 60)]", 1)
	// The next line, which the terminal may show a moment later; it is
	// wider than the terminal.
	comeBack := regexp.MustCompile(`\[to come back: shellagent client --daemon --socket ` + regexp.QuoteMeta(d.socket) + ` --resume (sess_[A-Z0-9]+)\]`)
	unwrap := func(all string) string { return strings.ReplaceAll(all, "\n", "") }
	all := r.waitScreen("how to come back", func(all string) bool { return comeBack.MatchString(unwrap(all)) })
	if err := r.exit(); err != nil {
		t.Errorf("client exit: %v", err)
	}
	m := comeBack.FindStringSubmatch(unwrap(all))
	if e := v.entry(m[1]); e == nil || e.Meta.Shellagent.State != "detached" || len(d.work()) == 0 {
		t.Fatalf("after Ctrl-D and Enter: %+v, %d processes of work; want the session detached, the sleep running", e, len(d.work()))
	}

	r = startTTYIn(t, d.cwd, d.env(), "--daemon", "--socket", d.socket, "--resume", m[1])
	r.waitCount("[term_1 runs: sleep 60]", 1)
	r.waitPrompt(1)
	r.press("\x04")
	r.waitCount(question, 1)
	r.press("c")
	all = r.waitCount("[session closed]", 1)
	if !strings.Contains(all, "[term_1 ended: signal SIGTERM]") {
		t.Errorf("Ctrl-D then c did not stop the server:\n%s", all)
	}
	if err := r.exit(); err != nil {
		t.Errorf("client exit: %v", err)
	}
	d.waitGone(2*time.Second, "the close", d.work)
	v.c.Check()
}

// lineWith waits for an output line that starts with prefix, and returns
// the rest of it.
func (r *clientRun) lineWith(prefix string) string {
	r.t.Helper()
	for {
		if rest, ok := strings.CutPrefix(r.next("a line "+prefix+"…"), prefix); ok {
			return rest
		}
	}
}

// The client of a daemon stays through the daemon's upgrade in place,
// which ends every connection: it reconnects, resumes its session, shows
// what the counter printed meanwhile (every tick once: none lost, none
// printed twice) and goes on, with prompts and a detach at the end of
// its input. Before, it said that the agent closed its output and exited
// 1, its session left behind. To another build, whose daemon the
// client's own relay cannot talk to, it reconnects through the new
// build's relay (the daemon's executable); before, initialize was
// refused, naming the two builds. Upgraded to another build and back to
// the client's own, it reconnects through its own relay again; before,
// it started the other build's relay once more, which the daemon, back
// on the client's build, refused.
func TestClientDaemonReconnectsThroughAnUpgrade(t *testing.T) {
	t.Parallel()
	for _, to := range []struct {
		name string
		bins []string // the upgrades, in order
	}{
		{"the same build", []string{binary}},
		{"another build", []string{otherBinary}},
		{"another build and back", []string{otherBinary, binary}},
	} {
		t.Run(to.name, func(t *testing.T) {
			t.Parallel()
			d := newDaemonFixture(t)
			d.startOwnDaemon(binary)
			a := d.client()
			a.send(tickCounter)
			a.expect("[background: term_1 (" + tickCommand + ")]")
			a.expectTick(3)
			for _, bin := range to.bins {
				d.upgrade(bin)
				sid := strings.TrimSuffix(a.lineWith("[the connection to the daemon ended (an upgrade in place ends it): reconnecting to "), "]")
				a.expect("[reattached to " + sid + "]")
				_, last := a.expectTick(0)
				a.expectTick(last + 3)
			}
			a.send("echo after-the-upgrade")
			a.expect("term_2| after-the-upgrade")
			a.stdin.Close()
			a.expect("[detached: the session runs on in the daemon, with 1 background item: term_1 (" + tickCommand + ")]")
			a.wait()
			if got := ticks(a.seen); !consecutive(got) {
				t.Errorf("the ticks the client printed across the upgrade do not count up by one: %v", got)
			}
		})
	}
}

// A daemon that dies takes its sessions' work with it: the client of one
// says that its session is no longer live and exits 1, without starting
// another daemon (the next daemon, started here, sweeps what the dead
// one left).
func TestClientDaemonDoesNotReconnectToADeadDaemon(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	daemon := d.startOwnDaemon(binary)
	a := d.client()
	a.send("/bg sleep 300")
	a.expect("[background: term_1 (sleep 300)]")
	daemon.Process.Kill()
	waitExited(t, daemon)
	sid := strings.TrimSuffix(a.lineWith("[the connection to the daemon ended (an upgrade in place ends it): reconnecting to "), "]")
	a.expect("[" + sid + " is no longer live in the daemon]")
	for range a.lines {
	}
	if err := a.cmd.Wait(); exitCode(err) != 1 {
		t.Errorf("the client's exit: %v, want status 1", err)
	}
	if pids := d.daemons(); len(pids) != 0 {
		t.Errorf("daemons %v run after the client gave up; want none started", pids)
	}
	d.relay()
}

// In terminal mode too: cat has the keyboard when the daemon is upgraded
// in place; the client reconnects, the keys typed after it still reach
// cat (the upgrade moved it to the background; the screen is still
// its), Ctrl-B c stops it, and the notes held meanwhile and the prompt
// come back.
func TestTerminalDaemonReconnectsThroughAnUpgrade(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	d.startOwnDaemon(binary)
	r := startTTYIn(t, d.cwd, d.env(), "--daemon", "--socket", d.socket)
	r.waitPrompt(1)
	r.press("cat\r")
	r.waitCount("[term_1: keys go to the command", 1)
	r.press("before\r")
	r.waitCount("before", 2) // the echo, and cat's line
	d.upgrade(binary)
	for deadline := time.Now().Add(testloop.Wait); ; time.Sleep(20 * time.Millisecond) {
		out, _, _ := d.run(binary, "daemon", "status", "--socket", d.socket)
		if regexp.MustCompile(`(?m)^sess_\S+\s+attached`).MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			r.press("\x02c")
			time.Sleep(time.Second)
			t.Fatalf("the client did not reattach; status:\n%s\nscreen:\n%s", out, r.scr.all())
		}
	}
	r.press("after\r")
	r.waitCount("after", 2)
	r.press("\x02c") // Ctrl-B c
	r.waitCount("[term_1 ended: signal SIGTERM]", 1)
	r.waitCount("[reattached to sess_", 1) // held while cat had the screen
	r.waitPrompt(2)
	r.press("\x04") // Ctrl-D
	r.waitCount("[detach (the session runs on in the daemon) or close the session? D/c]", 1)
	r.press("c")
	r.waitCount("[session closed]", 1)
	if err := r.exit(); err != nil {
		t.Errorf("client exit: %v", err)
	}
}

// Of two clients of one session, the one whose session the other took
// (--resume) does not take it back by reconnecting after an upgrade in
// place: it ends, saying so; the other reconnects and keeps it.
func TestClientDaemonTakenSessionStaysTakenThroughAnUpgrade(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	d.startOwnDaemon(binary)
	a := d.client()
	a.send("/bg sleep 300")
	a.expect("[background: term_1 (sleep 300)]")
	b := d.client("--resume")
	b.expect("[term_1 runs: sleep 300]")
	a.expect("[warning: Another client took this session]")
	d.upgrade(binary)
	a.expect("[another client has the session: not reconnecting]")
	for range a.lines {
	}
	if err := a.cmd.Wait(); exitCode(err) != 1 {
		t.Errorf("the client whose session was taken: exit %v, want status 1", err)
	}
	b.lineWith("[reattached to ")
	b.send("echo still-mine")
	b.expect("term_2| still-mine")
	b.stdin.Close()
	b.wait()
	if slices.Contains(b.seen, "[warning: Another client took this session]") {
		t.Errorf("the first client took the session back:\n%s", strings.Join(b.seen, "\n"))
	}
}

// In terminal mode, what the relay logs to the terminal while it is in
// raw mode (here "the daemon closed the connection", when the daemon is
// killed) ends its lines with CRLF: the next text starts at the start of
// a line. Before, raw mode did not return the carriage after the
// relay's "\n", and the text after it started where the log line ended.
func TestTerminalAgentStderrEndsLinesInRawMode(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	daemonCmd := d.startOwnDaemon(binary)
	r := startTTYIn(t, d.cwd, d.env(), "--daemon", "--socket", d.socket)
	r.waitPrompt(1)
	if err := daemonCmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	const logged = `msg="the daemon closed the connection"`
	r.waitCount(logged, 1)
	_ = r.exit() // it cannot reconnect: the daemon is gone
	lines := strings.Split(r.scr.all(), "\n")
	for i, l := range lines {
		if !strings.Contains(l, logged) {
			continue
		}
		if i+1 == len(lines) {
			t.Fatalf("nothing after the relay's log line:\n%s", r.scr.all())
		}
		// Whatever comes next (the client's note that it reconnects, or
		// that the agent exited: the relay's stderr and the client's
		// screen are written apart), it starts at the start of its line.
		if next := lines[i+1]; strings.HasPrefix(next, " ") || strings.TrimSpace(next) == "" {
			t.Errorf("the line after the relay's log line is %q, want text at its start:\n%s", next, r.scr.all())
		}
	}
}
