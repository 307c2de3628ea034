package supervisor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"shellagent/acp"
	"shellagent/protocol/acptest"
	"shellagent/supervisor/record"
)

func TestSessionSetup(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	file := filepath.Join(h.cwd, "file")
	os.WriteFile(file, nil, 0o644)
	tests := []struct {
		cwd  string
		says string // "" = accepted
	}{
		{h.cwd, ""},
		{"relative", "absolute"},
		{filepath.Join(h.cwd, "missing"), "no such file"},
		{file, "not a directory"},
	}
	for _, tt := range tests {
		raw, err := h.c.Call("session/new", map[string]any{"cwd": tt.cwd})
		switch {
		case tt.says == "" && err != nil:
			t.Errorf("session/new %s: %v", tt.cwd, err)
		case tt.says != "" && (err == nil || err.Code != -32602 || !strings.Contains(err.Message, "cwd") || !strings.Contains(err.Message, tt.says)):
			t.Errorf("session/new %s = %s, %v; want -32602 naming cwd and %q", tt.cwd, raw, err, tt.says)
		}
	}
	a, b := h.newSession(), h.newSession()
	if a == b || !strings.HasPrefix(a, "sess_") || len(a) < 20 {
		t.Errorf("session ids %q and %q: want random and distinct", a, b)
	}
	var list struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
			Cwd       string `json:"cwd"`
		} `json:"sessions"`
	}
	h.c.MustCall("session/list", map[string]any{}, &list)
	if len(list.Sessions) != 3 {
		t.Errorf("session/list has %d sessions, want 3", len(list.Sessions))
	}
	// Only the same directory matches: not its parent, nor a
	// subdirectory (the schema's ListSessionsRequest.cwd).
	os.Mkdir(filepath.Join(h.cwd, "sub"), 0o755)
	for _, other := range []string{"/elsewhere", filepath.Dir(h.cwd), filepath.Join(h.cwd, "sub")} {
		h.c.MustCall("session/list", map[string]any{"cwd": other}, &list)
		if len(list.Sessions) != 0 {
			t.Errorf("session/list filtered by %s: %v", other, list.Sessions)
		}
	}
	h.c.MustCall("session/list", map[string]any{"cwd": h.cwd}, &list)
	if len(list.Sessions) != 3 {
		t.Errorf("session/list filtered by the sessions' cwd has %d sessions, want 3", len(list.Sessions))
	}
	if err := h.callErr("session/list", map[string]any{"cursor": "x"}); err == nil || err.Code != -32602 {
		t.Errorf("unknown cursor: %v", err)
	}
}

// TestMCPServersAreRefused: shellagent advertises no MCP transport
// (capabilities.session.mcp), so a session/new or session/resume that
// names an MCP server, of any transport, gets -32602 ("Agents MUST reject
// a request with a transport they do not support with -32602", the
// schema's McpServer), and neither makes nor resumes a session; none, or
// an empty list, is accepted.
func TestMCPServersAreRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	servers := []any{
		map[string]any{"type": "stdio", "name": "fs", "command": "/bin/true", "args": []any{}, "env": []any{}},
		map[string]any{"type": "http", "name": "web", "url": "https://example.com/mcp", "headers": []any{}},
		map[string]any{"type": "_custom", "name": "own"},
	}
	for _, server := range servers {
		if err := h.callErr("session/new", map[string]any{"cwd": h.cwd, "mcpServers": []any{server}}); err == nil || err.Code != -32602 || !strings.Contains(err.Message, "mcpServers[0]") {
			t.Errorf("session/new with MCP server %v: %v, want -32602 naming mcpServers[0]", server, err)
		}
		if err := h.callErr("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd, "mcpServers": []any{server}}); err == nil || err.Code != -32602 || !strings.Contains(err.Message, "mcpServers[0]") {
			t.Errorf("session/resume with MCP server %v: %v, want -32602 naming mcpServers[0]", server, err)
		}
	}
	var list struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	h.c.MustCall("session/list", map[string]any{}, &list)
	if len(list.Sessions) != 1 {
		t.Errorf("session/list has %d sessions after the refusals, want 1", len(list.Sessions))
	}
	h.c.MustCall("session/new", map[string]any{"cwd": h.cwd, "mcpServers": []any{}}, nil)
	h.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd, "mcpServers": []any{}}, nil)
}

func TestPromptForms(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	os.WriteFile(filepath.Join(h.cwd, "it's here.txt"), []byte("linked file\n"), 0o644)
	tests := []struct {
		name   string
		prompt []map[string]any
		code   int    // 0 = inserted
		out    string // expected terminal output, or the field the error names
	}{
		{"text blocks joined", []map[string]any{{"type": "text", "text": "echo"}, {"type": "text", "text": "two blocks"}}, 0, "two blocks\r\n"},
		{"resource link is a quoted path", []map[string]any{
			{"type": "text", "text": "cat"},
			{"type": "resource_link", "name": "it's here.txt", "uri": "file://" + filepath.Join(h.cwd, "it's here.txt")},
		}, 0, "linked file\r\n"},
		{"absolute path is a command", []map[string]any{{"type": "text", "text": "/bin/echo path"}}, 0, "path\r\n"},
		{"empty", []map[string]any{{"type": "text", "text": "  \n "}}, -32602, "prompt: "},
		{"no blocks", []map[string]any{}, -32602, "prompt: "},
		{"image", []map[string]any{{"type": "image", "data": "", "mimeType": "image/png"}}, -32602, "prompt[0].type: "},
	}
	term := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := h.c.Call("session/prompt", map[string]any{"sessionId": sid, "prompt": tt.prompt})
			if tt.code != 0 {
				if err == nil || err.Code != tt.code || !strings.HasPrefix(err.Message, tt.out) {
					t.Fatalf("answered %s, %v; want %d naming %q", raw, err, tt.code, tt.out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			term++
			id := "term_" + string(rune('0'+term))
			h.idle(h.exit(nil, sid, id), sid, "end_turn")
			if got := string(h.c.Output(sid, id)); got != tt.out {
				t.Errorf("output %q, want %q", got, tt.out)
			}
		})
	}
	// Refused prompts were not inserted: one user_message per command.
	users := 0
	for _, m := range h.c.Updates(sid) {
		if m.Kind == acp.KindUserMessage {
			users++
		}
	}
	if users != term {
		t.Errorf("%d user messages for %d inserted prompts", users, term)
	}
}

func TestUnknownSlashCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "/frobnicate now")
	msg := h.update(nil, sid, acp.KindAgentMessage, "agent message", nil)
	if !strings.Contains(msg.Text(), "Unknown command /frobnicate") {
		t.Errorf("agent message %q", msg.Text())
	}
	h.idle(msg, sid, "end_turn")
	h.never(sid, "an unknown slash command started a terminal", func(m *acptest.Msg) bool { return m.Kind == acp.KindTerminal })
}

func TestResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "/bg echo bg-output; sleep 30")
	h.output(sid, "term_1", "bg-output")
	h.run(sid, "echo fg-output; sleep 30")
	h.output(sid, "term_2", "fg-output")
	var cursor *acptest.Msg = h.c.Transcript()[len(h.c.Transcript())-1]

	raw, err := h.c.Call("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd + "/"})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	var resp struct {
		ConfigOptions     []json.RawMessage `json:"configOptions"`
		AvailableCommands []json.RawMessage `json:"availableCommands"`
	}
	json.Unmarshal(raw, &resp)
	if len(resp.ConfigOptions) != 5 || len(resp.AvailableCommands) != len(commands) {
		t.Errorf("resume response %s", raw)
	}
	// Before the response: a current terminal_update with an output
	// snapshot for the listed terminal (and the foreground one), then the
	// current state with the list.
	var snap1, snap2, state, call1 *acptest.Msg
	for _, m := range h.c.Transcript() {
		if m.Seq <= cursor.Seq || m.SessionID != sid {
			continue
		}
		switch {
		case m.Kind == acp.KindToolCall && m.ToolCallID() == "call_1":
			call1 = m
		case m.Kind == acp.KindTerminal && m.TerminalID() == "term_1" && m.HasKey("output"):
			snap1 = m
		case m.Kind == acp.KindTerminal && m.TerminalID() == "term_2" && m.HasKey("output"):
			snap2 = m
		case m.Kind == acp.KindState:
			state = m
		}
	}
	if call1 == nil || call1.Status() != "completed" || !strings.Contains(call1.Text(), "Started in the background") {
		t.Errorf("resume re-sent the background command's tool call as %v", call1)
	}
	if snap1 == nil || snap2 == nil || state == nil {
		t.Fatalf("resume sent snapshot term_1=%v term_2=%v state=%v\n%s", snap1 != nil, snap2 != nil, state != nil, h.c.Dump())
	}
	if snap1.Update["command"] == nil || snap1.Update["cwd"] == nil || snap1.Update["size"] == nil || mustJSON(snap1.Update["capabilities"]) != `{"cancel":{}}` {
		t.Errorf("resume terminal_update %s lacks command, cwd, size or capabilities", snap1.Raw)
	}
	if state.State() != "running" || !sameIDs(state.Background(), []string{"term_1"}) {
		t.Errorf("resume state %s", state.Raw)
	}
	if !strings.Contains(string(h.c.Output(sid, "term_1")), "bg-output") {
		t.Errorf("after the snapshot term_1 holds %q", h.c.Output(sid, "term_1"))
	}
	// Output keeps flowing after the snapshot.
	h.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	h.idle(state, sid, "cancelled")

	tests := []struct {
		params map[string]any
		code   int
	}{
		{map[string]any{"sessionId": sid, "cwd": "/tmp"}, -32602},
		{map[string]any{"sessionId": "sess_unknown", "cwd": h.cwd}, -32002},
		{map[string]any{"sessionId": sid, "cwd": h.cwd, "replayFrom": map[string]string{"type": "_later"}}, -32602},
	}
	for _, tt := range tests {
		if err := h.callErr("session/resume", tt.params); err == nil || err.Code != tt.code {
			t.Errorf("resume %v: %v, want %d", tt.params, err, tt.code)
		}
	}
}

// Not parallel, as it bounds delays. The settings start far from the
// values the test sets, so that the bounds can be generous.
func TestSettingsChangeTheNextCommand(t *testing.T) {
	h := newHarness(t, Config{ForegroundTimeout: time.Minute, KillGrace: 30 * time.Second})
	sid := h.newSession()
	var res struct {
		ConfigOptions []struct {
			ConfigID     string `json:"configId"`
			CurrentValue string `json:"currentValue"`
		} `json:"configOptions"`
	}
	h.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "foreground_timeout", "type": "id", "value": "1s"}, &res)
	if len(res.ConfigOptions) != 5 || res.ConfigOptions[0].CurrentValue != "1s" {
		t.Errorf("set_config_option answered %+v", res.ConfigOptions)
	}
	start := time.Now()
	h.run(sid, "sleep 30")
	done := h.toolStatus(nil, sid, "call_1", "completed")
	if d := done.At.Sub(start); d < 900*time.Millisecond || d > 5*time.Second {
		t.Errorf("detached after %v with a 1s foreground timeout", d)
	}
	for _, bad := range []map[string]any{
		{"sessionId": sid, "configId": "nope", "type": "id", "value": "1s"},
		{"sessionId": sid, "configId": "foreground_timeout", "type": "id", "value": "7 seconds"},
		{"sessionId": sid, "configId": "kill_grace", "type": "boolean", "value": true},
		{"sessionId": sid, "configId": "permission", "type": "id", "value": 3},
	} {
		if err := h.callErr("session/set_config_option", bad); err == nil || err.Code != -32602 {
			t.Errorf("set_config_option %v: %v, want -32602", bad, err)
		}
	}
	// kill_grace applies to the next stop.
	h.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "kill_grace", "type": "id", "value": "1s"}, nil)
	h.run(sid, "/bg trap '' TERM; echo ready; sleep 30")
	h.output(sid, "term_2", "ready")
	start = time.Now()
	if err := h.callErr("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_2"}); err != nil {
		t.Fatal(err)
	}
	if exit := h.exit(nil, sid, "term_2"); signalOf(exit) != "SIGKILL" || exit.At.Sub(start) < 900*time.Millisecond || exit.At.Sub(start) > 10*time.Second {
		t.Errorf("exit %v after %v with a 1s kill grace", exit.ExitStatus(), exit.At.Sub(start))
	}
	h.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "kill_grace", "type": "id", "value": "3s"}, nil)
	// The bad values changed nothing.
	h.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd}, &res)
	if res.ConfigOptions[0].CurrentValue != "1s" || res.ConfigOptions[1].CurrentValue != "3s" || res.ConfigOptions[2].CurrentValue != "allow" {
		t.Errorf("options after bad sets: %+v", res.ConfigOptions)
	}
}

// TestTheActorEndsWithItsSession: a session's goroutine ends once the
// session has closed, and what comes for it afterwards (a late timer, an
// answer) still runs, in order, on the goroutine that brings it.
func TestTheActorEndsWithItsSession(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	sv := New(Config{Launcher: failLauncher{}, Log: discardLog})
	c := newQuietClient()
	sid := must(sv.NewSession(c, &acp.NewSessionRequest{Cwd: t.TempDir()})).SessionID
	s := must(sv.live.get(sid))
	if err := sv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.actor.Ended():
	case <-time.After(20 * time.Second):
		t.Fatal("the actor of a closed session did not end")
	}
	var log []string
	s.do(func(st *state) { log = append(log, "late") })
	s.doWait(func(st *state) {
		if st.life != sessionClosed {
			t.Errorf("a late entry saw the session %v, want closed", st.life)
		}
		log = append(log, "late wait")
	})
	if want := []string{"late", "late wait"}; !slices.Equal(log, want) {
		t.Errorf("late entries ran %v, want %v", log, want)
	}
	if got := s.peek().title; got != "" {
		t.Errorf("peek of a closed session: title %q", got)
	}
}

// session/list answers a page at a time: nextCursor leads to the rest,
// each session once, the most recently updated first.
func TestSessionListPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	for range record.ListPage + 1 {
		h.newSession()
	}
	var first, second acp.ListSessionsResponse
	h.c.MustCall("session/list", map[string]any{}, &first)
	if first.NextCursor == nil {
		t.Fatalf("the first page has %d sessions and no cursor", len(first.Sessions))
	}
	h.c.MustCall("session/list", map[string]any{"cursor": *first.NextCursor}, &second)
	if all, err := record.CheckPages(&first, &second); err != nil || len(all) != record.ListPage+1 {
		t.Fatalf("two pages of %d sessions: %d sessions, %v", record.ListPage+1, len(all), err)
	}
}

// TestShutdownSaysWhatItWaitsFor: a Shutdown that runs out of time names
// the sessions it still waits for and the terminals each still runs (a
// daemon's log says what did not stop); the close goes on after it.
func TestShutdownSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{KillGrace: time.Second})
	sid := h.newSession()
	h.run(sid, "/bg trap '' TERM; echo ready; sleep 30")
	h.output(sid, "term_1", "ready")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	want := "shutdown: context deadline exceeded; still waiting for " + sid + " (running: term_1)"
	if err := h.sup.Shutdown(ctx); err == nil || err.Error() != want {
		t.Errorf("Shutdown = %v, want %q", err, want)
	}
	if exit := h.exit(nil, sid, "term_1"); signalOf(exit) != "SIGKILL" {
		t.Errorf("term_1 ended %v, want SIGKILL once its grace was over", exit.ExitStatus())
	}
}
