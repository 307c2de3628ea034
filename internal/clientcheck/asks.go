package clientcheck

import "shellagent/acp"

// Asks is what a session's permission requests are to the checks: the
// requests its client has not answered yet, and which of them
// session/cancel found to be for listed work, which stay open
// (ListedPermission). Every permission request of the session is one of
// them, whatever work sent it (a command that waits for permission, a
// scenario's made-up work). The zero value is ready to use; it is not safe
// for concurrent use (the session's actor owns it).
type Asks struct {
	open map[*Ask]bool
}

// An Ask is one permission request, from when it is sent until it is
// answered or will get no answer.
type Ask struct {
	toolCall, terminal string // what its subject references
	// listed is the item of the background list its subject referenced
	// when session/cancel came, if any: the request stays open.
	listed string
}

// Open records a permission request about to be sent with subject (nil:
// it has none), and returns it, for Answered.
func (a *Asks) Open(subject *acp.PermissionSubject) *Ask {
	q := &Ask{}
	if subject != nil {
		q.toolCall, q.terminal = subject.ToolCallID, subject.TerminalID
	}
	if a.open == nil {
		a.open = make(map[*Ask]bool)
	}
	a.open[q] = true
	return q
}

// SessionCancelled records session/cancel, with listed the session's
// latest background list: every open request whose subject references an
// item of it (by toolCallId or terminalId) is for listed work, and stays
// open (RFD "Cancellation, close, and resume").
func (a *Asks) SessionCancelled(listed []acp.BackgroundItem) {
	for q := range a.open {
		for _, it := range listed {
			switch {
			case it.Type == "tool_call" && it.ToolCallID != "" && it.ToolCallID == q.toolCall:
				q.listed = it.ToolCallID
			case it.Type == "terminal" && it.TerminalID != "" && it.TerminalID == q.terminal:
				q.listed = it.TerminalID
			}
		}
	}
}

// Answered records the end of request q: the client's answer resp, or err
// if it will get none (it was withdrawn, or the connection closed). It
// returns the rule the answer broke and what the client did, or broken
// false: a request that session/cancel found for listed work must not be
// answered cancelled.
func (a *Asks) Answered(q *Ask, resp *acp.PermissionResponse, err error) (ruleID, detail string, broken bool) {
	delete(a.open, q)
	if q.listed == "" || err != nil || resp == nil || resp.Outcome.Outcome != "cancelled" {
		return "", "", false
	}
	return ListedPermission, "the request for the listed " + q.listed + " answered cancelled after session/cancel", true
}
