package supervisor

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/protocol/acptest"
)

// TestATakenConnectionIsRefusedAndTold: when another client takes a
// session (session/resume on another connection while the first is
// attached), the first connection is told so in a notice, the prompt it
// had held is answered -32800 and never inserted, and each request it
// makes for the session is answered -32002 (not active on this
// connection): a prompt, terminal/cancel, tool_call/cancel, typing into
// and resizing a terminal, a config option. Its session/cancel does
// nothing and its session/close succeeds without closing: the session and
// its work go on for the client that took it. Resuming it again takes it
// back, and then the other client is the one refused.
//
// Issue 22 (Low), which this test reproduced: after a takeover, the
// released connection could still prompt, type into and cancel in the
// session it lost, and never heard back (its turn never ended from its
// side).
func TestATakenConnectionIsRefusedAndTold(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Detached: KeepDetached})
	a := h.on(h.connect())
	sid := a.busySession()
	held := a.prompt(sid, "echo never")
	a.waitHeld(sid, 1)

	b := h.on(h.connect())
	b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd}, nil)
	if m := a.c.Wait(held); m.Error == nil || m.Error.Code != acp.CodeRequestCancelled {
		t.Errorf("A's held prompt, after B took the session: %s, want -32800", m.Raw)
	}
	notice := a.c.WaitFor("the notice that B took the session", func(m *acptest.Msg) bool {
		return m.SessionID == sid && isTakenNotice(m)
	})
	if sev, _ := notice.Update["severity"].(string); sev != acp.NoticeWarning {
		t.Errorf("the notice: %s, want a warning", notice.Raw)
	}

	a.refused(sid, "B took it")
	a.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	a.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)

	// The session went on for B: the foreground command ends on its own
	// (not cancelled), the background terminal runs on, and nothing of
	// A's reached it.
	h.release("go")
	b.output(sid, "term_2", "fg done")
	b.idle(nil, sid, "end_turn")
	b.run(sid, "/send term_1 hello")
	for _, m := range b.c.Updates(sid) {
		if m.Kind == acp.KindUserMessage && (strings.Contains(string(m.Raw), "never") || strings.Contains(string(m.Raw), "from A")) {
			t.Errorf("a prompt of A reached B: %s", m.Raw)
		}
		if m.Kind == acp.KindTerminal && m.ExitStatus() != nil && m.TerminalID() == "term_1" {
			t.Errorf("A's requests stopped term_1: %s", m.Raw)
		}
	}
	if out := string(b.c.Output(sid, "term_2")); strings.Contains(out, "from A") {
		t.Errorf("A typed into term_2: %q", out)
	}
	for _, m := range a.c.Updates(sid) {
		if m.Seq > notice.Seq && m.Kind != acp.KindTerminalOutput {
			t.Errorf("A got %s after the notice", m.Raw)
		}
	}

	// A takes it back: now B is told and refused, and A is served.
	a.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd}, nil)
	b.c.WaitFor("the notice that A took the session back", func(m *acptest.Msg) bool {
		return m.SessionID == sid && isTakenNotice(m)
	})
	b.refused(sid, "A took it back")
	a.run(sid, "echo back")
	a.output(sid, "term_3", "back")
	a.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	a.exit(nil, sid, "term_1")
}

// refused checks that every request of h's client for session sid is
// answered -32002, naming the session, because another client took it.
func (h *harness) refused(sid, because string) {
	h.t.Helper()
	typed := base64.StdEncoding.EncodeToString([]byte("from A\r"))
	requests := []struct {
		method string
		params map[string]any
	}{
		{"session/prompt", map[string]any{"sessionId": sid, "prompt": text("echo from A")}},
		{"terminal/cancel", map[string]any{"sessionId": sid, "terminalId": "term_1"}},
		{"tool_call/cancel", map[string]any{"sessionId": sid, "toolCallId": "call_1"}},
		{acp.MethodWriteTerminal, map[string]any{"sessionId": sid, "terminalId": "term_2", "data": typed}},
		{acp.MethodResizeTerminal, map[string]any{"sessionId": sid, "terminalId": "term_2", "size": map[string]int{"cols": 100, "rows": 30}}},
		{"session/set_config_option", map[string]any{"sessionId": sid, "configId": "notify", "type": "select", "value": "all"}},
	}
	for _, r := range requests {
		_, err := h.c.Call(r.method, r.params)
		var data struct {
			SessionID string `json:"sessionId"`
		}
		if err == nil || err.Code != acp.CodeNotFound || json.Unmarshal(err.Data, &data) != nil || data.SessionID != sid {
			h.t.Errorf("%s after %s: %v, want -32002 with data.sessionId %s", r.method, because, err, sid)
		}
	}
}

// TestATakenV1ConnectionIsToldAndItsTurnEnds: a v1 connection that another
// client takes the session from gets its prompt in flight answered (v1
// answers a prompt when its turn ends: end_turn, the turn goes on
// elsewhere), the notice as an agent_message_chunk (v1 has no notices),
// and -32002 for its next prompt.
func TestATakenV1ConnectionIsToldAndItsTurnEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Detached: KeepDetached})
	a := h.connectV1(true)
	sid := a.newSession()
	inFlight := a.prompt(sid, "echo fg; "+trigger("go"))
	a.c.WaitFor("fg", func(*acptest.Msg) bool { return strings.Contains(string(a.c.Output(sid, "term_1")), "fg") })

	b := h.on(h.connect())
	b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd}, nil)
	if m := a.c.Wait(inFlight); m.Error != nil || !strings.Contains(string(m.Result), `"stopReason":"end_turn"`) {
		t.Errorf("A's prompt in flight, after B took the session: %s, want end_turn", m.Raw)
	}
	a.c.WaitFor("the notice, as a message", func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.Kind == "agent_message_chunk" && strings.Contains(m.Text(), "Another client took this session")
	})
	if _, err := a.c.Call("session/prompt", map[string]any{"sessionId": sid, "prompt": text("echo from A")}); err == nil || err.Code != acp.CodeNotFound {
		t.Errorf("A's prompt after B took the session: %v, want -32002", err)
	}
	h.release("go")
	b.idle(nil, sid, "end_turn")
	b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
}

// waitHeld waits until sid's turn queue holds n prompts: a prompt sent
// is held only once the session has read it, which a test must wait for
// before it acts on what is held.
func (h *harness) waitHeld(sid string, n int) {
	h.t.Helper()
	s, err := h.sup.live.get(sid)
	if err != nil {
		h.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var held int
		s.doWait(func(st *state) { held = len(st.turns.held) })
		if held == n {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s holds %d prompts after 10 s, want %d", sid, held, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestATakenConnectionsPermissionRequestIsAskedAgain: a command waiting
// for permission when another client takes the session is asked of the
// client that took it; the request to the first is withdrawn, and its
// answer changes nothing. Issue 22 (Low): the released connection's
// answer still ran or refused the command in the session it had lost.
func TestATakenConnectionsPermissionRequestIsAskedAgain(t *testing.T) {
	t.Parallel()
	first := &permissions{seen: make(chan *acptest.Msg, 10)} // leaves it open
	h := newHarness(t, Config{Detached: KeepDetached})
	a := h.on(h.connect(acptest.WithPermissionHandler(first.handle)))
	sid := a.newSession()
	a.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "permission", "type": "id", "value": "ask"}, nil)
	a.run(sid, "echo allowed by B")
	if sub := subject(t, <-first.seen); sub["toolCallId"] != "call_1" {
		t.Fatalf("A was asked about %v", sub)
	}

	second := &permissions{answer: "allow", seen: make(chan *acptest.Msg, 10)}
	b := h.on(h.connect(acptest.WithPermissionHandler(second.handle)))
	b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd}, nil)
	select {
	case req := <-second.seen:
		if sub := subject(t, req); sub["toolCallId"] != "call_1" || sub["command"] != "echo allowed by B" {
			t.Errorf("B was asked about %v", sub)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B, which took the session, was not asked for the permission A had been asked")
	}
	b.output(sid, "term_1", "allowed by B")
	b.idle(nil, sid, "end_turn")
	select {
	case req := <-first.seen:
		t.Errorf("A was asked again after B took the session: %s", req.Raw)
	default:
	}
}
