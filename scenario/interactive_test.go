package scenario

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/protocol/acptest"
	"shellagent/supervisor"
)

// The scenarios that wait for the client to act, and what the session
// makes of what the client does, with client checks on.

var cancelledOutcome = map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}

func isPermission(m *acptest.Msg) bool { return m.Method == "session/request_permission" }

// isWithdrawal matches the $/cancel_request of request req.
func isWithdrawal(req *acptest.Msg) func(*acptest.Msg) bool {
	return func(m *acptest.Msg) bool {
		return m.Method == "$/cancel_request" && strings.Contains(string(m.Params), string(req.ID))
	}
}

// checkNotices returns the client-check notices of sid, by the check
// they name (_meta.shellagent.clientCheck).
func (h *harness) checkNotices(sid string) map[string][]*acptest.Msg {
	out := map[string][]*acptest.Msg{}
	for _, m := range h.C.Updates(sid) {
		if m.Kind != acp.KindNotice {
			continue
		}
		sa, _ := m.Update["_meta"].(map[string]any)["shellagent"].(map[string]any)
		check, _ := sa["clientCheck"].(string)
		out[check] = append(out[check], m)
	}
	return out
}

// TestPermissionCancelAnsweredCancelled: in permission-cancel, a client
// that answers the request for listed work with cancelled half a second
// after session/cancel, while the scenario holds that request open (5s),
// is told that it broke the rule, and, with client checks on, gets the
// listed-permission-cancelled notice, as a real approval's would.
func TestPermissionCancelAnsweredCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, supervisor.Config{KillGrace: time.Second, ClientChecks: true})
	sid := h.NewSession()
	h.Run(sid, "/scenario permission-cancel 5s")
	bg := h.C.WaitFor("the request for listed work", isPermission)
	fg := h.C.WaitAfter(bg, "the request for foreground work", isPermission)
	h.C.Notify("session/cancel", map[string]string{"sessionId": sid})
	h.C.WaitAfter(fg, "the foreground request withdrawn", isWithdrawal(fg))
	h.C.Respond(fg.ID, cancelledOutcome)
	cancelled := h.Idle(fg, sid, acp.StopCancelled)
	time.Sleep(500 * time.Millisecond)
	h.C.Respond(bg.ID, cancelledOutcome)
	h.message(cancelled, sid, "Scenario permission-cancel is over")
	var verdicts []string
	for _, m := range h.C.Updates(sid) {
		if m.Seq > cancelled.Seq && m.Kind == acp.KindAgentMessage && strings.Contains(m.Text(), "the listed work") {
			verdicts = append(verdicts, m.Text())
		}
	}
	if len(verdicts) != 1 || !strings.HasPrefix(verdicts[0], "The client answered the request for the listed work with cancelled") {
		t.Errorf("verdicts %q, want one saying the client answered the request for the listed work with cancelled", verdicts)
	}
	n := h.checkNotices(sid)
	if len(n["listed-permission-cancelled"]) != 1 || len(n) != 1 {
		t.Fatalf("client-check notices %v, want one listed-permission-cancelled", n)
	}
	if d, _ := n["listed-permission-cancelled"][0].Update["description"].(string); !strings.Contains(d, "the listed call_1 answered cancelled after session/cancel") {
		t.Errorf("notice description %q, want it to name call_1", d)
	}
}

// TestCancelRaceSecondCancel: once cancel-race is over, a second cancel
// of its terminal and of its made-up tool call is refused as one of
// finished real work is (-32602: already exited, already completed), by
// /stop too; with client checks on, each is reported as a cancel of an
// item that no longer advertises cancel, not one that never did.
func TestCancelRaceSecondCancel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, supervisor.Config{KillGrace: time.Second, ClientChecks: true})
	sid := h.NewSession()
	h.Run(sid, "/scenario cancel-race 1s")
	end := h.Idle(nil, sid, acp.StopEndTurn)
	if !sameIDs(end.Background(), []string{"term_1", "call_2"}) {
		t.Fatalf("listed %v, want term_1 and call_2", end.Background())
	}
	h.C.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"}, nil)
	h.C.MustCall("tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": "call_2"}, nil)
	over := h.message(end, sid, "Scenario cancel-race is over")
	time.Sleep(2200 * time.Millisecond) // longer than a cancel that raced the end may take (client checks)

	for _, tc := range []struct{ method, key, id, says string }{
		{"terminal/cancel", "terminalId", "term_1", "terminalId: term_1 has already exited"},
		{"tool_call/cancel", "toolCallId", "call_2", "toolCallId: call_2 is already completed"},
	} {
		err := h.CallErr(tc.method, map[string]string{"sessionId": sid, tc.key: tc.id})
		if err == nil || err.Code != acp.CodeInvalidParams || err.Message != tc.says {
			t.Errorf("a second %s of %s: %v, want -32602 %q", tc.method, tc.id, err, tc.says)
		}
	}
	h.Run(sid, "/stop call_2")
	stopped := h.Idle(over, sid, acp.StopEndTurn)
	for _, m := range h.C.Updates(sid) {
		if m.Seq > over.Seq && m.Seq < stopped.Seq && m.Kind == acp.KindAgentMessage && m.Text() != "Cannot stop call_2: toolCallId: call_2 is already completed." {
			t.Errorf("/stop call_2 says %q, want it already completed", m.Text())
		}
	}

	n := h.checkNotices(sid)
	for _, check := range []string{"terminal-cancel-not-advertised", "tool-call-cancel-not-advertised"} {
		if len(n[check]) != 1 {
			t.Errorf("%d %s notices, want 1: %v", len(n[check]), check, n)
			continue
		}
		raw, _ := json.Marshal(n[check][0].Update)
		if d, _ := n[check][0].Update["description"].(string); !strings.Contains(d, "no longer advertises cancel") {
			t.Errorf("notice %s, want it to say the item no longer advertises cancel", raw)
		}
	}
}
