package supervisor

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"shellagent/acp"
	"shellagent/protocol/acptest"
)

// startWait sends a /wait prompt and returns the wait's tool call as first
// announced, after checking what every wait is announced with.
func (h *harness) startWait(sid, line string) *acptest.Msg {
	h.t.Helper()
	msg := h.run(sid, line)
	inserted := h.update(nil, sid, acp.KindUserMessage, "the prompt", func(m *acptest.Msg) bool { return m.MessageID() == msg })
	m := h.update(inserted, sid, acp.KindToolCall, "the wait's tool call", func(m *acptest.Msg) bool {
		title, _ := m.Update["title"].(string)
		return strings.HasPrefix(title, "wait for ")
	})
	term := strings.Fields(line)[1]
	if m.Status() != "in_progress" || mustJSON(m.Update["capabilities"]) != `{"cancel":{}}` ||
		!strings.Contains(mustJSON(m.Update["content"]), `{"terminalId":"`+term+`","type":"terminal"}`) {
		h.t.Errorf("wait announced as %s", m.Raw)
	}
	return m
}

// waitEnds waits for the final status of wait call and the agent message
// that follows it, and returns both.
func (h *harness) waitEnds(sid string, call *acptest.Msg, status string) (final, said *acptest.Msg) {
	h.t.Helper()
	final = h.toolStatus(call, sid, call.ToolCallID(), status)
	if caps, ok := final.Update["capabilities"]; !ok || caps != nil {
		h.t.Errorf("final wait update %s: capabilities must be cleared", final.Raw)
	}
	said = h.update(final, sid, acp.KindAgentMessage, "the wait's answer", nil)
	return final, said
}

// waitSession starts a session with a background terminal running line
// (term_1) and waits until it printed ready, if ready is not empty.
func waitSession(t *testing.T, line, ready string) (*harness, string) {
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "/bg "+line)
	h.idle(nil, sid, "end_turn")
	if ready != "" {
		h.output(sid, "term_1", ready)
	}
	return h, sid
}

func TestWaitMatchesALinePrintedBefore(t *testing.T) {
	t.Parallel()
	h, sid := waitSession(t, `printf '\033[32mready\033[0m on http://localhost:3000\n'; exec sleep 30`, "3000")
	call := h.startWait(sid, "/wait term_1 'ready on'")
	if call.Update["kind"] != "search" || call.Update["title"] != "wait for term_1: ready on" ||
		mustJSON(call.Update["rawInput"]) != `{"new":false,"pattern":"ready on","terminalId":"term_1","timeout":"5m0s"}` {
		t.Errorf("wait announced as %s", call.Raw)
	}
	final, said := h.waitEnds(sid, call, "completed")
	if !strings.HasPrefix(said.Text(), `term_1 printed "ready on http://localhost:3000", which matches "ready on"; waited `) {
		t.Errorf("the wait said %q", said.Text())
	}
	idle := h.idle(final, sid, "end_turn")
	if said.Seq > idle.Seq || !sameIDs(idle.Background(), []string{"term_1"}) {
		t.Errorf("the turn ended %s, the answer at #%d", idle.Raw, said.Seq)
	}
	h.never(sid, "term_1 was touched", func(m *acptest.Msg) bool { return m.TerminalID() == "term_1" && m.ExitStatus() != nil })
}

func TestWaitForALinePrintedLater(t *testing.T) {
	t.Parallel()
	h, sid := waitSession(t, "echo ready; while [ ! -e go ]; do sleep 0.05; done; echo ready again; exec sleep 30", "ready")
	// --new ignores the line printed before, and a line printed after the
	// wait started matches.
	call := h.startWait(sid, "/wait term_1 ^ready --new")
	time.Sleep(400 * time.Millisecond)
	h.never(sid, "--new matched a line printed before", func(m *acptest.Msg) bool {
		return m.ToolCallID() == call.ToolCallID() && m.Status() != "in_progress"
	})
	if err := os.WriteFile(filepath.Join(h.cwd, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, said := h.waitEnds(sid, call, "completed")
	if !strings.HasPrefix(said.Text(), `term_1 printed "ready again", which matches "^ready"`) {
		t.Errorf("the wait said %q", said.Text())
	}
	// The wait's end embeds the terminal, so the line it matched came
	// before it, however late the writer got to the chunk (before, CI
	// under load saw the chunk after the end).
	if got := string(h.c.Output(sid, "term_1")); !strings.Contains(got, "ready again") {
		t.Errorf("the wait ended before the client had the line it matched: term_1 printed %q so far", got)
	}
	h.idle(said, sid, "end_turn")
	// The terminal was never touched: its output is what it printed, and
	// it runs on until it is stopped.
	if got := string(h.c.Output(sid, "term_1")); got != "ready\r\nready again\r\n" {
		t.Errorf("term_1 printed %q", got)
	}
	h.callErr("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"})
	if exit := h.exit(nil, sid, "term_1"); signalOf(exit) != "SIGTERM" {
		t.Errorf("term_1 ended %s", exit.Raw)
	}
}

// A line the command ends with "\r\n" (HTTP headers, a file with CRLF
// line ends) reaches the PTY as "\r\r\n": it is a line like any other
// for /wait and /tail. Before, the second carriage return erased it.
func TestWaitAndTailReadCRLFLines(t *testing.T) {
	t.Parallel()
	h, sid := waitSession(t, `printf 'HTTP/1.1 200 OK\r\nready\r\n'; exec sleep 30`, "ready")
	call := h.startWait(sid, "/wait term_1 ^ready$")
	if _, said := h.waitEnds(sid, call, "completed"); !strings.HasPrefix(said.Text(), `term_1 printed "ready", which matches "^ready$"`) {
		t.Errorf("the wait said %q", said.Text())
	}
	h.run(sid, "/tail term_1")
	if said := h.update(nil, sid, acp.KindAgentMessage, "the tail", func(m *acptest.Msg) bool {
		return strings.Contains(m.Text(), "Output of term_1")
	}); !strings.Contains(said.Text(), "HTTP/1.1 200 OK\nready\n") {
		t.Errorf("/tail said %q", said.Text())
	}
}

// A partial last line counts once the terminal has been quiet.
func TestWaitMatchesAPartialLineOnceQuiet(t *testing.T) {
	t.Parallel()
	h, sid := waitSession(t, "printf 'Password: '; exec sleep 30", "Password")
	call := h.startWait(sid, "/wait term_1 'Password: $'")
	_, said := h.waitEnds(sid, call, "completed")
	if !strings.HasPrefix(said.Text(), `term_1 printed "Password:", which matches "Password: $"`) {
		t.Errorf("the wait said %q", said.Text())
	}
}

func TestWaitForAPort(t *testing.T) {
	t.Parallel()
	// A free port, which the test listens on a while after the wait starts.
	port := freePort(t)
	h, sid := waitSession(t, "sleep 30", "")
	call := h.startWait(sid, "/wait term_1 :"+strconv.Itoa(port))
	if call.Update["kind"] != "other" || call.Update["title"] != "wait for term_1: port "+strconv.Itoa(port) {
		t.Errorf("wait announced as %s", call.Raw)
	}
	time.Sleep(600 * time.Millisecond)
	h.never(sid, "the wait ended before the port listened", func(m *acptest.Msg) bool {
		return m.ToolCallID() == call.ToolCallID() && m.Status() != "in_progress"
	})
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, said := h.waitEnds(sid, call, "completed")
	if want := "Port " + strconv.Itoa(port) + " accepts connections (on 127.0.0.1); waited "; !strings.HasPrefix(said.Text(), want) {
		t.Errorf("the wait said %q, want %q…", said.Text(), want)
	}
}

func TestWaitForAURL(t *testing.T) {
	t.Parallel()
	// The server listens from the start but answers only once started: a
	// connection alone does not count, an HTTP response does.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	url := "http://" + srv.Listener.Addr().String() + "/health"
	h, sid := waitSession(t, "sleep 30", "")
	call := h.startWait(sid, "/wait term_1 "+url)
	time.Sleep(1500 * time.Millisecond)
	h.never(sid, "the wait ended before the server answered", func(m *acptest.Msg) bool {
		return m.ToolCallID() == call.ToolCallID() && m.Status() != "in_progress"
	})
	srv.Start()
	_, said := h.waitEnds(sid, call, "completed")
	if want := url + " answered 418 I'm a teapot; waited "; !strings.HasPrefix(said.Text(), want) {
		t.Errorf("the wait said %q, want %q…", said.Text(), want)
	}
}

func TestWaitEndsWithTheTerminal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, wait, status, says string
		// early: the wait may also end before the exit, by another rule
		// (a partial last line counts after partialQuiet without output:
		// on a loaded machine the exit can take longer than that).
		early bool
	}{
		{"pattern", "/wait term_1 never", "failed", `term_1 exited with code 3 before it printed a line that matches "never"; waited `, false},
		{"last line", "/wait term_1 bye", "completed", `term_1 printed "bye", which matches "bye"`, true},
		{"port", "/wait term_1 :1", "failed", "term_1 exited with code 3 before port 1 accepted a connection; waited ", false},
		{"exit", "/wait term_1", "completed", "term_1 exited with code 3; waited ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, sid := waitSession(t, "while [ ! -e go ]; do sleep 0.05; done; printf bye; exit 3", "")
			call := h.startWait(sid, tt.wait)
			if err := os.WriteFile(filepath.Join(h.cwd, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			exit := h.exit(nil, sid, "term_1")
			final, said := h.waitEnds(sid, call, tt.status)
			if !strings.HasPrefix(said.Text(), tt.says) || final.Seq < exit.Seq && !tt.early {
				t.Errorf("the wait said %q at #%d (the exit at #%d), want %q…", said.Text(), final.Seq, exit.Seq, tt.says)
			}
			h.idle(said, sid, "end_turn")
		})
	}
}

// A wait on a terminal that exited already reads what it printed.
func TestWaitOnAnExitedTerminal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "echo done")
	h.idle(h.exit(nil, sid, "term_1"), sid, "end_turn")
	call := h.startWait(sid, "/wait term_1 done")
	h.waitEnds(sid, call, "completed")
	call = h.startWait(sid, "/wait term_1 other")
	_, said := h.waitEnds(sid, call, "failed")
	if !strings.HasPrefix(said.Text(), `term_1 exited with code 0 before it printed a line that matches "other"`) {
		t.Errorf("the wait said %q", said.Text())
	}
	// A last line that no line break ended counts once the terminal has
	// exited.
	h.idle(said, sid, "end_turn")
	h.run(sid, "printf partial")
	h.idle(h.exit(said, sid, "term_2"), sid, "end_turn")
	call = h.startWait(sid, "/wait term_2 partial")
	_, said = h.waitEnds(sid, call, "completed")
	if !strings.HasPrefix(said.Text(), `term_2 printed "partial", which matches "partial"`) {
		t.Errorf("the wait on a partial last line said %q", said.Text())
	}
}

func TestWaitTimesOut(t *testing.T) {
	t.Parallel()
	h, sid := waitSession(t, "echo something; exec sleep 30", "something")
	call := h.startWait(sid, "/wait term_1 never --timeout 300ms")
	_, said := h.waitEnds(sid, call, "failed")
	if said.Text() != `term_1 printed no line that matches "never" within 300ms.` {
		t.Errorf("the wait said %q", said.Text())
	}
	h.idle(said, sid, "end_turn")
	call = h.startWait(sid, "/wait term_1 --timeout=300ms")
	_, said = h.waitEnds(sid, call, "failed")
	if said.Text() != "term_1 was still running after 300ms." {
		t.Errorf("the exit wait said %q", said.Text())
	}
	h.idle(said, sid, "end_turn")
	// A port nobody listens on: the last try was refused. The timeout is a
	// multiple of the polls' 250 ms, so that the last tick comes with the
	// deadline: a try it starts then fails with "i/o timeout", which is
	// not why the port accepted nothing.
	port := strconv.Itoa(freePort(t))
	call = h.startWait(sid, "/wait term_1 :"+port+" --timeout 500ms")
	_, said = h.waitEnds(sid, call, "failed")
	if want := "Port " + port + " accepted no connection within 500ms (the last try: dial tcp "; !strings.HasPrefix(said.Text(), want) || !strings.HasSuffix(said.Text(), ": connect: connection refused).") {
		t.Errorf("the port wait said %q, want %q…: connect: connection refused).", said.Text(), want)
	}
}

func TestWaitIsCancelled(t *testing.T) {
	t.Parallel()
	h, sid := waitSession(t, "sleep 30", "")
	call := h.startWait(sid, "/wait term_1 never")
	if err := h.callErr("tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": call.ToolCallID()}); err != nil {
		t.Fatalf("tool_call/cancel: %v", err)
	}
	cancelled := h.toolStatus(call, sid, call.ToolCallID(), "cancelled")
	h.idle(cancelled, sid, "end_turn")

	call = h.startWait(sid, "/wait term_1 never")
	h.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	cancelled = h.toolStatus(call, sid, call.ToolCallID(), "cancelled")
	idle := h.idle(cancelled, sid, "cancelled")
	if !sameIDs(idle.Background(), []string{"term_1"}) {
		t.Errorf("after session/cancel: %s", idle.Raw)
	}
	h.never(sid, "a cancelled wait answered, or touched term_1", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindAgentMessage || m.TerminalID() == "term_1" && m.ExitStatus() != nil
	})
	if err := h.callErr("tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": call.ToolCallID()}); err == nil || err.Code != -32602 {
		t.Errorf("cancelling a cancelled wait: %v", err)
	}
}

// /bg moves a wait to the background list; it ends there, while idle.
func TestWaitMovesToTheBackground(t *testing.T) {
	t.Parallel()
	h, sid := waitSession(t, "while [ ! -e go ]; do sleep 0.05; done; echo go-ready; exec sleep 30", "")
	call := h.startWait(sid, "/wait term_1 go-ready")
	id := call.ToolCallID()
	h.run(sid, "/bg")
	moved := h.update(call, sid, acp.KindToolCall, "the wait moved", func(m *acptest.Msg) bool { return m.ToolCallID() == id })
	if moved.Status() != "in_progress" || strings.Contains(mustJSON(moved.Update["content"]), "terminalId") {
		t.Errorf("the wait moved to the background as %s; it must not reference the listed terminal", moved.Raw)
	}
	listed := h.idle(moved, sid, "end_turn")
	if !sameIDs(listed.Background(), []string{"term_1", id}) {
		t.Fatalf("after /bg: %s", listed.Raw)
	}
	h.run(sid, "/ps")
	ps := h.update(listed, sid, acp.KindAgentMessage, "/ps", nil)
	if !strings.Contains(ps.Text(), id+`  wait  for a line of term_1 that matches "go-ready"  age `) {
		t.Errorf("/ps:\n%s", ps.Text())
	}
	if err := os.WriteFile(filepath.Join(h.cwd, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	final, said := h.waitEnds(sid, call, "completed")
	removal := h.listed(said, sid, "term_1")
	if removal.State() != "idle" || removal.StopReason() != "" {
		t.Errorf("the removal %s: want a repeated idle", removal.Raw)
	}
	// Listed throughout, from the snapshot after /bg to the removal.
	for _, m := range h.c.Updates(sid) {
		if m.Kind == acp.KindState && m.Seq >= listed.Seq && m.Seq < final.Seq && !sameIDs(m.Background(), []string{"term_1", id}) {
			t.Errorf("while the wait ran in the background: %s", m.Raw)
		}
	}
}

func TestWaitRefusesBadInput(t *testing.T) {
	t.Parallel()
	h, sid := waitSession(t, "sleep 30", "")
	tests := []struct{ line, says string }{
		{"/wait", "/wait needs a terminal id."},
		{`/wait ""`, "/wait needs a terminal id."}, // FuzzPrompt: it waited for terminal ""
		{"/wait term_9 x", `Cannot wait for term_9: there is no terminal "term_9" in this session`},
		{"/wait term_1 x --timeout 2h", "/wait: the timeout must be at most 1h0m0s, got 2h."},
		{"/wait term_1 x --timeout 0s", "/wait: the timeout must be more than 0, got 0s."},
		{"/wait term_1 x --timeout soon", `/wait: "soon" is not a duration.`},
		{"/wait term_1 x --timeout", "/wait: --timeout needs a duration."},
		{"/wait term_1 '(ready'", `/wait: "(ready" is not a regular expression (missing closing ): ` + "`(ready`)."},
		{"/wait term_1 :70000", "/wait: :70000 is not a port (1 to 65535; a pattern that starts with ':' is written \\:)."},
		// Issue 22: "/wait ID :-1" was read as a regular expression and
		// waited 5 minutes; "/wait ID http://127.0.0.1:99999/" was accepted.
		{"/wait term_1 :-1", "/wait: :-1 is not a port (1 to 65535"},
		{"/wait term_1 :0", "/wait: :0 is not a port (1 to 65535"},
		{"/wait term_1 :3000x", "/wait: :3000x is not a port (1 to 65535"},
		{"/wait term_1 http://127.0.0.1:99999/", `/wait: "http://127.0.0.1:99999/" is not a URL: its port 99999 is not 1 to 65535.`},
		{"/wait term_1 http://127.0.0.1:-1/", `/wait: "http://127.0.0.1:-1/" is not a URL`},
		{"/wait term_1 http://localhost:/", `/wait: "http://localhost:/" is not a URL: its port is empty.`},
		{"/wait term_1 :3000 --new", "/wait: --new applies to a pattern"},
		{"/wait term_1 x --fast", "/wait: unknown option --fast"},
		{"/wait term_1 'x", "/wait: a ' quote is not closed."},
	}
	for _, tt := range tests {
		h.run(sid, tt.line)
		said := h.update(nil, sid, acp.KindAgentMessage, "the answer to "+tt.line, func(m *acptest.Msg) bool {
			return strings.Contains(m.Text(), tt.says)
		})
		h.idle(said, sid, "end_turn")
	}
	h.never(sid, "a refused wait made a tool call", func(m *acptest.Msg) bool { return m.Kind == acp.KindToolCall && m.ToolCallID() != "call_1" })
}

// A closing session cancels its waits, in the foreground and listed.
func TestCloseCancelsWaits(t *testing.T) {
	t.Parallel()
	h, sid := waitSession(t, "sleep 30", "")
	listed := h.startWait(sid, "/wait term_1 never")
	h.run(sid, "/bg")
	h.listed(nil, sid, "term_1", listed.ToolCallID())
	fg := h.startWait(sid, "/wait term_1 :1")
	h.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	h.toolStatus(listed, sid, listed.ToolCallID(), "cancelled")
	h.toolStatus(fg, sid, fg.ToolCallID(), "cancelled")
	last := h.c.Updates(sid)
	if end := last[len(last)-1]; end.State() != "idle" || end.StopReason() != "cancelled" || len(end.Background()) != 0 {
		t.Errorf("the close ended with %s", end.Raw)
	}
}

// No goroutine of a wait outlives it: of the output, port and URL kinds,
// ended by a match, a timeout, a cancel and the close. Not parallel, so
// that only this test's goroutines run.
func TestWaitsLeaveNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := httptest.NewServer(http.NotFoundHandler())
	h, sid := waitSession(t, "echo up; exec sleep 30", "up")
	for _, tt := range []struct{ line, status string }{
		{"/wait term_1 up", "completed"},
		{"/wait term_1 :1 --timeout 300ms", "failed"},
		{"/wait term_1 " + srv.URL + "/404", "completed"}, // any answer counts
	} {
		_, said := h.waitEnds(sid, h.startWait(sid, tt.line), tt.status)
		h.idle(said, sid, "end_turn")
	}
	call := h.startWait(sid, "/wait term_1 never")
	h.callErr("tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": call.ToolCallID()})
	h.toolStatus(call, sid, call.ToolCallID(), "cancelled")
	h.startWait(sid, "/wait term_1 :1")
	h.close()
	srv.Close()
}
