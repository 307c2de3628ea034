package worktest

import (
	"shellagent/acp"
	"shellagent/supervisor/work"
)

// A Call is a tool call of a Host (Host.NewCall, Host.Thaw): a
// work.Call that keeps what the session would have sent of it. Its
// status follows the session's rules: pending (CallSpec.Scheduled) or
// in_progress when made, paused and in_progress by SetPaused, and once
// final it stays as it is.
type Call struct {
	Spec    work.CallSpec         // as it was made
	Task    work.Task             // its work (nil: none)
	Content []acp.ToolCallContent // as SetContent last set it
	Sent    int                   // how many updates were sent of it (Send, End)
	Listed  bool                  // it is in the background list (List, until End)
	id      string
	status  string
}

var _ work.Call = (*Call)(nil)

// ID is its id: call_1, call_2, ... in the order its Host made them.
func (c *Call) ID() string { return c.id }

// Title is its spec's.
func (c *Call) Title() string { return c.Spec.Title }

// Status is its wire status.
func (c *Call) Status() string { return c.status }

// Final reports whether its status is final.
func (c *Call) Final() bool { return acp.FinalStatus(c.status) }

// Send counts an update sent.
func (c *Call) Send() { c.Sent++ }

// List lists it, if it is not final.
func (c *Call) List() { c.Listed = c.Listed || !c.Final() }

// SetContent sets its content.
func (c *Call) SetContent(content ...acp.ToolCallContent) { c.Content = content }

// SetPaused makes it paused, or in_progress again.
func (c *Call) SetPaused(paused bool) {
	c.status = acp.StatusInProgress
	if paused {
		c.status = acp.StatusPaused
	}
}

// End gives it status, counts the update that says so, and unlists it;
// a call that is final already is left as it is.
func (c *Call) End(status string) {
	if c.Final() {
		return
	}
	c.status, c.Listed = status, false
	c.Sent++
}

// A Turn is a foreground turn a kind's command is given (Host.NewTurn):
// a work.Turn that keeps what was done with it. It holds the foreground
// from Hold until it ends: by End, by Host.EndTurn for the call it
// holds, or by Refuse, which never holds.
type Turn struct {
	Held    bool            // Hold was called
	Call    work.Call       // the call Hold was given (nil: none)
	Work    work.Foreground // the work Hold was given
	Refused string          // the text of Refuse
	Ended   bool            // it ended
	Reason  string          // the stopReason it ended with
	h       *Host
}

var _ work.Turn = (*Turn)(nil)

// Hold makes fg, the work of c, hold the turn.
func (t *Turn) Hold(c work.Call, fg work.Foreground) {
	t.Held, t.Call, t.Work = true, c, fg
}

// Refuse says text, as the session does, and ends the turn with end_turn.
func (t *Turn) Refuse(text string) {
	t.Refused = text
	t.h.Say(text)
	t.Ended, t.Reason = true, acp.StopEndTurn
}

// Holds reports whether it was held and has not ended.
func (t *Turn) Holds() bool { return t.Held && !t.Ended }

// End ends it with stopReason, if it holds.
func (t *Turn) End(stopReason string) {
	if t.Holds() {
		t.Ended, t.Reason = true, stopReason
	}
}
