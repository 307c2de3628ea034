package scenario

import (
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
