package supervisor

import (
	"context"
	"time"

	"shellagent/protocol"
)

// An approval is a command waiting for the user's permission (permission
// mode "ask"). In the foreground it blocks the turn (requires_action); in
// the background (/bg CMD) its tool call is listed, and the request stays
// open through session/cancel (RFD "Cancellation, close, and resume").
type approval struct {
	call       *toolCall
	line       string
	background bool
	job        *job // the job whose firing this is
	asked      time.Time
	withdraw   context.CancelFunc // withdraws the request ($/cancel_request)
	over       bool               // answered or withdrawn
}

// Permission option ids.
const (
	optionAllow  = "allow"
	optionReject = "reject"
)

// ask announces the command's tool call as pending and asks for permission
// to run it. Background work is listed, in a snapshot sent before the
// request, so that the request can reference listed work.
func (s *Session) ask(a *approval) {
	a.asked = time.Now()
	a.call.status = protocol.StatusPending
	a.call.input = map[string]string{"command": a.line, "cwd": s.cwd}
	a.call.appr = a
	if a.background {
		a.call.cancel = true
		s.emit(a.call.update())
		s.listCall(a.call)
		s.flushList()
	} else {
		s.waiting = a
		s.emit(a.call.update())
		s.transition(protocol.StateRequiresAction, "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.withdraw = cancel
	req := &protocol.PermissionRequest{
		SessionID:   s.id,
		Title:       "Run " + a.line,
		Description: "shellagent will run this command in " + s.cwd + ".",
		Subject:     &protocol.PermissionSubject{Type: "command", Command: a.line, Cwd: s.cwd, ToolCallID: a.call.id},
		Options: []protocol.PermissionOption{
			{OptionID: optionAllow, Name: "Run it", Kind: "allow_once"},
			{OptionID: optionReject, Name: "Don't run it", Kind: "reject_once"},
		},
	}
	if s.client == nil {
		s.withdraw(a, protocol.StatusFailed, "Not run: no client is attached to ask for permission.")
		if !a.background {
			s.endTurn(protocol.StopEndTurn)
		}
		return
	}
	s.client.RequestPermission(ctx, req, func(resp *protocol.PermissionResponse, err error) {
		s.answered(a, resp, err)
	})
}

// answered runs or refuses the command once the client answers.
func (s *Session) answered(a *approval, resp *protocol.PermissionResponse, err error) {
	s.mu.Lock()
	defer s.unlock()
	if a.over || s.closing {
		return // withdrawn: a late answer changes nothing
	}
	allowed := err == nil && resp.Outcome.Outcome == "selected" && resp.Outcome.OptionID == optionAllow
	if !allowed {
		why := "Not run: permission was refused."
		if err != nil {
			why = "Not run: the permission request got no answer (" + err.Error() + ")."
		} else if resp.Outcome.Outcome == "cancelled" {
			why = "Not run: the permission request was cancelled."
		}
		s.withdraw(a, protocol.StatusFailed, why)
		if !a.background {
			s.endTurn(protocol.StopEndTurn)
		}
		return
	}
	a.over = true
	a.withdraw()
	a.call.appr, a.call.cancel = nil, false
	if !a.background {
		s.waiting = nil
		s.transition(protocol.StateRunning, "")
		s.startForeground(a.call, a.line, a.job)
		return
	}
	t := s.launch(a.call, a.line)
	if t == nil {
		s.unlistCall(a.call)
		return
	}
	s.swapCallForTerminal(a.call, t)
	s.detach(t, "Started in the background.")
}

// withdraw ends a command that waits for permission without running it:
// the request is withdrawn and the tool call ends with status and a reason.
// The caller ends the foreground turn if it was one.
func (s *Session) withdraw(a *approval, status, why string) {
	if a.over {
		return
	}
	a.over = true
	if a.withdraw != nil {
		a.withdraw()
	}
	if s.waiting == a {
		s.waiting = nil
	}
	a.call.status, a.call.cancel, a.call.appr = status, false, nil
	a.call.content = []protocol.ToolCallContent{protocol.TextContent(why)}
	s.emit(a.call.update())
	s.unlistCall(a.call)
}
