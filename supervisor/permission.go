package supervisor

import (
	"context"
	"fmt"
	"time"

	"shellagent/acp"
)

// An approval is a command waiting for the user's permission (permission
// mode "ask"); its tool call is callAsking meanwhile. In the foreground it
// blocks the turn (requires_action); in the background (/bg CMD) its tool
// call is listed, and the request stays open through session/cancel (RFD
// "Cancellation, close, and resume").
type approval struct {
	call     *toolCall
	line     string
	turn     *turn // the foreground turn it blocks; nil for background work
	asked    time.Time
	withdraw context.CancelFunc // withdraws the request ($/cancel_request) while it is open
	// afterCancel: session/cancel came while it was open (background work
	// only): a conforming client leaves the request open (clientcheck.go).
	afterCancel bool
}

// Permission option ids.
const (
	optionAllow  = "allow"
	optionReject = "reject"
)

// ask announces the command's tool call as pending and asks for permission
// to run it: for the foreground turn fg, or, if fg is nil, as background
// work, which is listed in a state_update sent before the request, so
// that the request can reference listed work. The answer comes back
// through approval.answered. With no client to ask, the command is not run
// and ask returns false; the caller ends fg's turn.
func (st *state) ask(c *toolCall, line string, fg *turn) bool {
	a := &approval{call: c, line: line, turn: fg, asked: time.Now()}
	c.state, c.task = callAsking, a
	c.input = map[string]string{"command": line, "cwd": st.s.cwd}
	st.out.send(c.update())
	if fg == nil {
		st.list.addCall(c)
		st.reportState("") // the list changed
	} else {
		st.transition(acp.StateRequiresAction, "")
	}
	return a.request(st)
}

// request sends the request for permission to the client the session
// reports to; with none, the command is abandoned and request returns
// false.
func (a *approval) request(st *state) bool {
	ctx, cancel := context.WithCancel(context.Background())
	a.withdraw = cancel
	client := st.out.client
	if client == nil {
		a.abandon(st, acp.StatusFailed, "Not run: no client is attached to ask for permission.")
		return false
	}
	s, c, line := st.s, a.call, a.line
	client.RequestPermission(ctx, &acp.PermissionRequest{
		SessionID:   s.id,
		Title:       "Run " + line,
		Description: "shellagent will run this command in " + s.cwd + ".",
		Subject:     &acp.PermissionSubject{Type: "command", Command: line, Cwd: s.cwd, ToolCallID: c.id},
		Options: []acp.PermissionOption{
			{OptionID: optionAllow, Name: "Run it", Kind: "allow_once"},
			{OptionID: optionReject, Name: "Don't run it", Kind: "reject_once"},
		},
	}, func(resp *acp.PermissionResponse, err error) {
		s.do(func(st *state) { a.answered(st, resp, err) })
	})
	return true
}

// reask withdraws the open requests for permission from the client the
// session was taken from (session/resume on another connection) and asks
// the client that took it: the answer is for whoever follows the session
// now, and an answer from the client it was taken from changes nothing.
// The tool calls are sent to the new client before this is called.
func reask(st *state) {
	for _, c := range st.work.unfinished() {
		a, ok := c.task.(*approval)
		if !ok || c.state != callAsking {
			continue
		}
		a.withdraw()
		again := &approval{call: c, line: a.line, turn: a.turn, asked: a.asked, afterCancel: a.afterCancel}
		c.task = again
		again.request(st)
	}
}

// granted ends the request once the user allowed the command: this only
// releases the request's context.
func (a *approval) granted() {
	a.withdraw()
	a.call.task = nil // a command's tool call from now on
}

// listing implements task.
func (a *approval) listing(now time.Time) string {
	return fmt.Sprintf("%s  command  %s  age %s  %s, waiting for permission", a.call.id, a.line, age(now.Sub(a.asked)), a.call.status())
}

// handOver implements task: a request for permission is not handed over
// to the next image of an upgrade; it gets no answer first
// (endForUpgrade), as when its connection closes.
func (a *approval) handOver() (kind string, frozen any) { return "", nil }

// cancellable implements task: background work that waits for
// permission is cancelled with tool_call/cancel; the foreground command's
// request ends with session/cancel.
func (a *approval) cancellable() bool { return a.turn == nil && a.call.state == callAsking }

// cancel implements task.
func (a *approval) cancel(st *state) {
	a.abandon(st, acp.StatusCancelled, "Cancelled before it was allowed to run.")
}

// close implements task.
func (a *approval) close(st *state) {
	a.abandon(st, acp.StatusCancelled, closedAsking)
}

// closedAsking is the outcome of a command that waited for permission
// when its session closed.
const closedAsking = "Cancelled: the session closed while it waited for permission."

// sessionCancelled notes session/cancel on the requests for background
// work that are open: they stay open (RFD), and a client that answers one
// cancelled is told (clientcheck.go).
func sessionCancelled(st *state) {
	for _, c := range st.work.unfinished() {
		if a, ok := c.task.(*approval); ok && a.turn == nil {
			a.afterCancel = true
		}
	}
}

func allowed(resp *acp.PermissionResponse, err error) bool {
	return err == nil && resp.Outcome.Outcome == "selected" && resp.Outcome.OptionID == optionAllow
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

// abandon ends the command that waits for permission without running
// it: the request is withdrawn, the tool call ends with status and a
// reason, and it leaves the list. If it held the foreground, the caller
// releases the turn and ends it.
func (a *approval) abandon(st *state, status, why string) {
	if a.call.state != callAsking {
		return
	}
	if a.withdraw != nil {
		a.withdraw()
	}
	a.call.task = nil
	a.call.content = []acp.ToolCallContent{acp.TextContent(why)}
	endCall(st, a.call, status)
}

// answered runs or refuses the command once the client answers. An answer
// to a request that was withdrawn changes nothing.
func (a *approval) answered(st *state, resp *acp.PermissionResponse, err error) {
	if a.call.state != callAsking || a.call.task != a || st.life != sessionOpen {
		return
	}
	if a.afterCancel && err == nil && resp.Outcome.Outcome == "cancelled" {
		checkClient(st, nil, ruleListedPermission, "the request for the listed "+a.call.id+" answered cancelled after session/cancel")
	}
	if !allowed(resp, err) {
		a.abandon(st, acp.StatusFailed, refusal(resp, err))
		if a.turn != nil {
			st.turns.release(a.turn)
			st.endTurn(acp.StopEndTurn)
		}
		return
	}
	a.granted()
	if fg := a.turn; fg != nil {
		fg.state = turnRunning
		st.transition(acp.StateRunning, "")
		st.startForeground(fg)
		return
	}
	if t := st.launch(a.call, a.line); t != nil {
		st.list.replaceCall(a.call, t)
		st.handOff(t, "Started in the background.")
	}
}
