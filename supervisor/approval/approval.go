// Package approval is a kind of work of a session (package supervisor,
// through supervisor/work): a command that waits for the user's
// permission before it runs (permission mode "ask"). approval.go holds it
// whole: the request for permission, its answer, and what the session's
// session/cancel, resume on another connection, close and upgrade in
// place do to it. What runs once the user allows the command is the
// session's (Host.Allowed): a command's life is not a kind of work.
package approval

import (
	"context"
	"fmt"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/work"
)

// A Host is a session whose commands wait for the user's permission. Its
// methods run on the session's actor.
type Host interface {
	work.Host
	// Ask sends req, with the session's id, to the client the session
	// reports to, and calls answer on the actor, in an entry of its own,
	// with the client's answer, or with an error once ctx ends (the
	// request is then withdrawn) or the connection closes. It reports
	// false if no client is attached: nothing is sent, answer is never
	// called.
	Ask(ctx context.Context, req *acp.PermissionRequest, answer func(*acp.PermissionResponse, error)) bool
	// Waiting reports tool call c, whose pending state was sent, as work
	// that waits for the user: if its work holds the foreground turn,
	// the session reports requires_action; else c is listed, and the
	// state_update that lists it is sent at once, before any request
	// that references it.
	Waiting(c work.Call)
	// Allowed runs line, the command of tool call c, which the user
	// allowed: in the foreground turn if c's work holds it, else in the
	// background. c is a command's tool call from then on (no longer the
	// approval's); if the command cannot start, c fails saying why.
	Allowed(c work.Call, line string)
}

// Permission option ids, as the request offers them.
const (
	OptionAllow  = "allow"
	OptionReject = "reject"
)

// An Approval is a command that waits for the user's permission: its tool
// call is pending meanwhile. In the foreground it holds the turn (the
// session is requires_action), and is its work.Foreground; in the
// background (/bg CMD) its tool call is listed, and the request stays
// open through session/cancel (RFD "Cancellation, close, and resume"): the
// session does not tell it, and checks that the client leaves it open.
// It ends allowed (the session runs the command), refused, unanswered,
// cancelled, or closed. It is owned by its session's actor.
type Approval struct {
	h          Host
	call       work.Call
	line       string
	foreground bool
	asked      time.Time
	asking     bool     // it waits for the answer: until allowed, refused or ended
	open       *request // the request for permission that was sent last
}

// request is one request for permission sent to a client: the session
// asks again when another connection takes it (Reask).
type request struct {
	withdraw context.CancelFunc // withdraws it ($/cancel_request) while it is open
}

// New makes the approval of line, as new work of the session h: in the
// foreground turn if foreground, else as background work. Its tool call
// is registered (Call), neither announced nor listed: that is Ask's.
func New(h Host, line string, foreground bool) *Approval {
	a := &Approval{h: h, line: line, foreground: foreground, asked: h.Now(), asking: true}
	a.call = h.NewCall(work.CallSpec{
		Kind: "execute", Title: line, Asking: true,
		Input: map[string]string{"command": line, "cwd": h.Cwd()},
	}, a)
	return a
}

// Call is its tool call.
func (a *Approval) Call() work.Call { return a.call }

// Ask announces its tool call as pending and asks for permission to run
// the command (Host.Waiting, then Host.Ask). The answer runs the command
// (Host.Allowed) or refuses it. With no client to ask, the command is not
// run, and a foreground turn ends.
func (a *Approval) Ask() {
	a.call.Send()
	a.h.Waiting(a.call)
	a.request()
}

// request sends the request for permission to the client the session
// reports to; with none, the command is abandoned.
func (a *Approval) request() {
	ctx, cancel := context.WithCancel(context.Background())
	r := &request{withdraw: cancel}
	a.open = r
	cwd := a.h.Cwd()
	asked := a.h.Ask(ctx, &acp.PermissionRequest{
		Title:       "Run " + a.line,
		Description: "shellagent will run this command in " + cwd + ".",
		Subject:     &acp.PermissionSubject{Type: "command", Command: a.line, Cwd: cwd, ToolCallID: a.call.ID()},
		Options: []acp.PermissionOption{
			{OptionID: OptionAllow, Name: "Run it", Kind: "allow_once"},
			{OptionID: OptionReject, Name: "Don't run it", Kind: "reject_once"},
		},
	}, func(resp *acp.PermissionResponse, err error) { a.answered(r, resp, err) })
	if !asked {
		a.refuse(acp.StatusFailed, "Not run: no client is attached to ask for permission.")
	}
}

// Listing implements work.Task.
func (a *Approval) Listing(now time.Time) string {
	return fmt.Sprintf("%s  command  %s  age %s  %s, waiting for permission", a.call.ID(), a.line, work.Age(now.Sub(a.asked)), a.call.Status())
}

// HandOver implements work.Task: a request for permission is not handed
// over to the next image of an upgrade in place; it gets no answer first
// (Unanswered), as when its connection closes.
func (a *Approval) HandOver() (kind string, frozen any) { return "", nil }

// Cancellable implements work.Task: background work that waits for
// permission is cancelled with tool_call/cancel; the foreground command's
// request ends with session/cancel (CancelTurn).
func (a *Approval) Cancellable() bool { return !a.foreground && a.asking }

// Cancel implements work.Task.
func (a *Approval) Cancel() {
	a.abandon(acp.StatusCancelled, "Cancelled before it was allowed to run.")
}

// Close implements work.Task: the session closes, which releases a
// foreground turn itself.
func (a *Approval) Close() { a.abandon(acp.StatusCancelled, ClosedAsking) }

// ClosedAsking is the outcome of a command that waited for permission
// when its session closed.
const ClosedAsking = "Cancelled: the session closed while it waited for permission."

// CancelTurn implements work.Foreground: session/cancel withdraws the
// foreground command's request, and its turn ends cancelled.
func (a *Approval) CancelTurn() {
	a.abandon(acp.StatusCancelled, "Cancelled by session/cancel while waiting for permission.")
	a.h.EndTurn(a.call, acp.StopCancelled)
}

// ToBackground implements work.Foreground: a command moves to the
// background only once it runs.
func (a *Approval) ToBackground() {
	a.h.Say("The foreground command is waiting for permission; it can move to the background once it runs.")
}

// Reask implements work.Asker: the request to the client the session
// was taken from (session/resume on another connection) is withdrawn, and
// the client that took it is asked: the answer is for whoever follows the
// session now, and an answer from the client it was taken from changes
// nothing. Its tool call was sent to the new client first.
func (a *Approval) Reask() {
	if !a.asking {
		return
	}
	a.open.withdraw()
	a.request()
}

// Unanswered implements work.Asker: the request will get no answer, for
// the reason err gives (the daemon's upgrade in place), and the command
// is refused as if the client had answered err.
func (a *Approval) Unanswered(err error) { a.answered(a.open, nil, err) }

// answered runs or refuses the command once the client answers request
// r. An answer to a request that was withdrawn changes nothing.
func (a *Approval) answered(r *request, resp *acp.PermissionResponse, err error) {
	if !a.asking || a.open != r || !a.h.Open() {
		return
	}
	if !allowed(resp, err) {
		a.refuse(acp.StatusFailed, refusal(resp, err))
		return
	}
	a.asking = false
	a.open.withdraw() // releases the request's context
	a.h.Allowed(a.call, a.line)
}

func allowed(resp *acp.PermissionResponse, err error) bool {
	return err == nil && resp.Outcome.Outcome == "selected" && resp.Outcome.OptionID == OptionAllow
}

// refusal says why a command that was not allowed did not run.
func refusal(resp *acp.PermissionResponse, err error) string {
	switch {
	case err != nil:
		return "Not run: the permission request got no answer (" + err.Error() + ")."
	case resp.Outcome.Outcome == "cancelled":
		return "Not run: the permission request was cancelled."
	}
	return "Not run: permission was refused."
}

// refuse abandons the command, and ends the foreground turn it holds.
func (a *Approval) refuse(status, why string) {
	a.abandon(status, why)
	a.h.EndTurn(a.call, acp.StopEndTurn)
}

// abandon ends the command without running it: the request is withdrawn,
// and the tool call ends with status and a reason, which leaves the list.
// A foreground turn it holds is left to the caller.
func (a *Approval) abandon(status, why string) {
	if !a.asking {
		return
	}
	a.asking = false
	if a.open != nil {
		a.open.withdraw()
	}
	a.call.SetContent(acp.TextContent(why))
	a.call.End(status)
}
