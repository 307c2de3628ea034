package lineclient

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// handleUpdate applies a session update to the session and prints it.
func (c *client) handleUpdate(u *update) {
	switch u.SessionUpdate {
	case "user_message":
		if w := c.wait; w != nil && w.messageID != "" && u.MessageID == w.messageID {
			w.userSeq = c.seq
		}
	case "agent_message":
		c.p.text(contentText(u.Content))
	case "agent_message_chunk":
		c.p.stream(contentText(u.Content))
	case "state_update":
		c.stateUpdate(u)
	case "terminal_update":
		c.terminalUpdate(u)
	case "terminal_output_chunk":
		data, err := base64.StdEncoding.DecodeString(u.Data)
		if err != nil {
			c.p.note(fmt.Sprintf("%s: output that is not base64: %v", u.TerminalID, err))
			return
		}
		c.p.output(u.TerminalID, data, c.sess.live() > 1)
	case "tool_call_update", "tool_call":
		c.toolCallUpdate(u)
	}
}

// stateUpdate takes a new snapshot: the state and the background list.
func (c *client) stateUpdate(u *update) {
	s := c.sess
	before, beforeReported := s.bg, s.bgReported
	s.state = u.State
	s.bg, s.bgReported = decodeBackground(u.Background)
	stopReason := ""
	if u.StopReason != nil {
		stopReason = *u.StopReason
	}
	if s.state == "idle" && stopReason == "cancelled" {
		c.p.note("turn cancelled")
	}
	changed := s.bgReported != beforeReported || !sameList(s.bg, before)
	// An emptied list printed while running is printed again once the
	// session is idle, to say it is quiet.
	if changed || (s.quiet() && c.lastListing == "background: none") {
		c.lastListing = s.listing()
		c.p.note(c.lastListing)
	}
	for _, id := range s.newlyAbandoned() {
		c.p.note(id + " abandoned: unfinished, not listed, and the session is idle")
	}
	c.paceState(stopReason)
}

// terminalUpdate creates or patches a terminal.
func (c *client) terminalUpdate(u *update) {
	s := c.sess
	t := s.terminals[u.TerminalID]
	isNew := t == nil
	if isNew {
		t = &terminal{id: u.TerminalID}
		s.terminals[u.TerminalID] = t
	}
	if u.Command != nil {
		t.command = *u.Command
	}
	if isNew {
		if t.command == "" || t.command == c.lastLine {
			c.p.note(t.id + " started")
		} else {
			c.p.note(t.id + " started: " + t.command)
		}
	}
	if u.Output != nil {
		c.snapshot(t, u.Output, isNew)
	}
	if u.ExitStatus != nil && t.exit == nil {
		t.exit = u.ExitStatus
		c.p.ended(t.id)
		c.p.note(t.id + " ended: " + t.exit.String())
	}
}

// snapshot handles a replacement snapshot of a terminal's output: shown in
// full for a terminal the client had not seen, else only noted, since
// what was printed cannot be taken back.
func (c *client) snapshot(t *terminal, out *terminalOutput, isNew bool) {
	data, err := base64.StdEncoding.DecodeString(out.Data)
	if err != nil {
		c.p.note(fmt.Sprintf("%s: output that is not base64: %v", t.id, err))
		return
	}
	if dropped := out.Meta.Shellagent.DroppedBytes; dropped > 0 {
		c.p.note(fmt.Sprintf("%s: %d bytes of output were dropped; it continues from here", t.id, dropped))
		return
	}
	if isNew {
		c.p.output(t.id, data, c.sess.live() > 1)
	}
}

// toolCallUpdate creates or patches a tool call. A command's tool call
// (kind execute) is shown through its terminal: only its pending state
// and its final status with text, or a cancellation, are printed. Other
// tool calls (scheduled jobs, watchers) are printed at every status.
func (c *client) toolCallUpdate(u *update) {
	s := c.sess
	tc := s.calls[u.ToolCallID]
	isNew := tc == nil
	if isNew {
		tc = &toolCall{id: u.ToolCallID}
		s.calls[u.ToolCallID] = tc
	}
	old := tc.status
	if u.Title != nil {
		tc.title = *u.Title
	}
	if u.Kind != nil {
		tc.kind = *u.Kind
	}
	if u.Status != nil {
		tc.status = *u.Status
	}
	if refs := terminalRefs(u.Content); len(refs) > 0 {
		tc.terminals = refs
	}
	if !isNew && tc.status == old {
		return
	}
	text := strings.TrimSpace(contentText(u.Content))
	if tc.kind == "execute" {
		switch {
		case tc.status == "pending":
		case tc.status == "cancelled":
		case isFinal(tc.status) && text != "":
		default:
			return
		}
	}
	note := tc.id + " " + tc.status
	switch {
	case text != "":
		note += ": " + text
	case tc.title != "" && (tc.kind != "execute" || tc.status == "pending"):
		note += ": " + tc.title
	}
	c.p.note(note)
}
