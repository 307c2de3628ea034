package clientcheck

import (
	"errors"
	"testing"

	"shellagent/acp"
)

// TestAsks: a permission request whose subject references an item of
// the background list when session/cancel comes must not be answered
// cancelled; any other request may be, and any request may get another
// answer, or none.
func TestAsks(t *testing.T) {
	t.Parallel()
	listed := []acp.BackgroundItem{
		{Type: "tool_call", ToolCallID: "call_1"},
		{Type: "terminal", TerminalID: "term_1"},
		{Type: "_shellagent_probe"},
	}
	cancelled := &acp.PermissionResponse{}
	cancelled.Outcome.Outcome = "cancelled"
	allowed := &acp.PermissionResponse{}
	allowed.Outcome.Outcome, allowed.Outcome.OptionID = "selected", "allow"
	tests := []struct {
		name    string
		subject *acp.PermissionSubject
		after   bool // the request is sent only after session/cancel
		resp    *acp.PermissionResponse
		err     error
		detail  string // what the broken rule's detail says; "" if none is broken
	}{
		{name: "listed tool call, cancelled", subject: &acp.PermissionSubject{ToolCallID: "call_1"}, resp: cancelled,
			detail: "the request for the listed call_1 answered cancelled after session/cancel"},
		{name: "listed terminal, cancelled", subject: &acp.PermissionSubject{TerminalID: "term_1"}, resp: cancelled,
			detail: "the request for the listed term_1 answered cancelled after session/cancel"},
		{name: "listed tool call, allowed", subject: &acp.PermissionSubject{ToolCallID: "call_1"}, resp: allowed},
		{name: "listed tool call, withdrawn", subject: &acp.PermissionSubject{ToolCallID: "call_1"}, err: errors.New("withdrawn")},
		{name: "unlisted tool call, cancelled", subject: &acp.PermissionSubject{ToolCallID: "call_2"}, resp: cancelled},
		{name: "no subject, cancelled", resp: cancelled},
		{name: "sent after session/cancel, cancelled", subject: &acp.PermissionSubject{ToolCallID: "call_1"}, after: true, resp: cancelled},
	}
	for _, tt := range tests {
		var a Asks
		var q *Ask
		if !tt.after {
			q = a.Open(tt.subject)
		}
		a.SessionCancelled(listed)
		if tt.after {
			q = a.Open(tt.subject)
		}
		rule, detail, broken := a.Answered(q, tt.resp, tt.err)
		if broken != (tt.detail != "") || detail != tt.detail || broken && rule != ListedPermission {
			t.Errorf("%s: %q %q %v, want %q", tt.name, rule, detail, broken, tt.detail)
		}
		if len(a.open) != 0 {
			t.Errorf("%s: an answered request is still open", tt.name)
		}
	}
}
