package supervisor

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/protocol/acptest"
)

// SPEC, Ids: an id of one session is unknown in every other session.
// A terminal of session a can be neither cancelled, stopped nor written
// to from session b, and none of the attempts touches it.
func TestATerminalOfAnotherSessionIsUnknown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	a, b := h.newSession(), h.newSession()
	h.run(a, "/bg echo ready; sleep 30")
	h.output(a, "term_1", "ready")
	tests := []struct {
		method string
		params map[string]string
	}{
		{"terminal/cancel", map[string]string{"sessionId": b, "terminalId": "term_1"}},
		{acp.MethodWriteTerminal, map[string]string{"sessionId": b, "terminalId": "term_1", "data": base64.StdEncoding.EncodeToString([]byte("x\n"))}},
	}
	for _, tt := range tests {
		if err := h.callErr(tt.method, tt.params); err == nil || err.Code != -32602 || !strings.Contains(err.Message, "term_1") {
			t.Errorf("%s from another session: %v, want -32602 naming term_1", tt.method, err)
		}
	}
	h.run(b, "/stop term_1")
	if msg := h.update(nil, b, acp.KindAgentMessage, "/stop", nil); !strings.HasPrefix(msg.Text(), "Cannot stop term_1") {
		t.Errorf("/stop from another session: %q", msg.Text())
	}
	// a's terminal is untouched: still listed, not ended, its output as it was.
	h.run(a, "/ps")
	if ps := h.update(nil, a, acp.KindAgentMessage, "/ps", nil); !strings.Contains(ps.Text(), "term_1") {
		t.Errorf("/ps of the owning session: %q", ps.Text())
	}
	h.never(a, "a request from another session ended term_1", func(m *acptest.Msg) bool {
		return m.TerminalID() == "term_1" && m.ExitStatus() != nil
	})
	if got := string(h.c.Output(a, "term_1")); got != "ready\r\n" {
		t.Errorf("term_1 output %q: the write from another session reached it", got)
	}
}

// SPEC, Prompts: /ps and /stop act at once beside foreground work; they
// are inserted at once and change no state (no idle boundary). The
// foreground command runs on until it ends.
func TestActAtOnceBesideForegroundWorkChangesNoState(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{ForegroundTimeout: time.Minute})
	sid := h.newSession()
	h.run(sid, "/bg sleep 30")
	bg := h.idle(nil, sid, "end_turn")
	h.run(sid, "echo started; read x; echo finished $x")
	h.output(sid, "term_2", "started")
	running := h.update(bg, sid, acp.KindState, "running", func(m *acptest.Msg) bool { return m.State() == "running" })

	h.run(sid, "/ps") // returns: inserted at once
	ps := h.update(running, sid, acp.KindAgentMessage, "/ps", nil)
	if !strings.Contains(ps.Text(), "term_1") {
		t.Errorf("/ps: %q", ps.Text())
	}
	h.run(sid, "/stop term_1")
	stop := h.update(ps, sid, acp.KindAgentMessage, "/stop", nil)
	if !strings.HasPrefix(stop.Text(), "Stopping term_1") {
		t.Errorf("/stop: %q", stop.Text())
	}
	gone := h.listed(h.exit(running, sid, "term_1"), sid) // repeated update: term_1 is no longer listed

	// The foreground command is still running: end it now.
	h.run(sid, "/send term_2 go")
	end := h.idle(gone, sid, "end_turn")
	h.output(sid, "term_2", "finished go")
	for _, m := range h.c.Updates(sid) {
		if m.Seq <= running.Seq || m.Seq >= end.Seq || m.Kind != acp.KindState {
			continue
		}
		if m.State() != "running" || m.StopReason() != "" {
			t.Errorf("an act-at-once prompt changed the state: %s", m.Raw)
		}
	}
	if m := h.toolStatus(running, sid, "call_2", "completed"); m.Seq > end.Seq {
		t.Errorf("the foreground tool call completed after the idle boundary")
	}
}

// SPEC, Initialization and sessions: session/new's cwd is echoed as
// given, not cleaned: in session/list, the tool call's rawInput and the
// terminal_update.
func TestCwdIsEchoedAsGiven(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	given := h.cwd + "/./"
	var res struct {
		SessionID string `json:"sessionId"`
	}
	h.c.MustCall("session/new", map[string]any{"cwd": given}, &res)
	sid := res.SessionID
	var list struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
			Cwd       string `json:"cwd"`
		} `json:"sessions"`
	}
	h.c.MustCall("session/list", map[string]any{}, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != sid || list.Sessions[0].Cwd != given {
		t.Errorf("session/list %+v, want %s with cwd %q", list.Sessions, sid, given)
	}
	h.run(sid, "true")
	call := h.toolStatus(nil, sid, "call_1", "in_progress")
	if raw, _ := call.Update["rawInput"].(map[string]any); raw["cwd"] != given || raw["command"] != "true" {
		t.Errorf("rawInput %v, want command true and cwd %q", call.Update["rawInput"], given)
	}
	term := h.update(nil, sid, acp.KindTerminal, "term_1", func(m *acptest.Msg) bool { return m.TerminalID() == "term_1" })
	if term.Update["cwd"] != given || term.Update["command"] != "true" {
		t.Errorf("terminal_update %s, want command true and cwd %q", term.Raw, given)
	}
}
