package supervisor

import (
	"slices"

	"shellagent/protocol"
)

// The background list and the RFD rules it follows ("The background list
// on state snapshots"). Every rule is kept here, by construction:
//
//  1. background is on every state_update: snapshot is the only code that
//     writes a state_update, and it always includes the list ([] if empty).
//  2. Items are announced before they are listed: a terminal is listed only
//     by listTerminal, which is called after launch has sent its
//     terminal_update.
//  3. Items are finalized before they are removed: unlistTerminal is called
//     only from exited, after the terminal_update with exitStatus.
//  4. A list change is re-sent: it marks the list dirty, and the session's
//     unlock sends a repeated snapshot (the current state, no stop reason)
//     unless a state transition in the same event already carried the new
//     list. So follow-up work is reported with the removal, never as idle
//     with an emptied list followed at once by running.
//  5. Each piece of work is listed once: a command is listed as its
//     terminal, never also as its tool call. A background command waiting
//     for permission has no terminal yet and is listed as its tool call;
//     once it runs, one snapshot swaps the tool call for the terminal.
//  6. Only background work is listed: the foreground command is not, nor a
//     scheduled job's firing, which is new foreground work.
//  7. A permission request for listed work is sent only after a snapshot
//     that lists it (see ask in permission.go).

// backgroundList is the ordered background work of a session.
type backgroundList struct {
	items []listItem
}

// listItem is a terminal or a tool call (a scheduled job, or a background
// command waiting for permission).
type listItem struct {
	term *terminal
	call *toolCall
}

func (l *backgroundList) wire() protocol.Background {
	out := make(protocol.Background, 0, len(l.items))
	for _, it := range l.items {
		if it.term != nil {
			out = append(out, protocol.BackgroundItem{Type: "terminal", TerminalID: it.term.id})
		} else {
			out = append(out, protocol.BackgroundItem{Type: "tool_call", ToolCallID: it.call.id})
		}
	}
	return out
}

// listTerminal moves a live, announced terminal into the list.
func (s *Session) listTerminal(t *terminal) {
	if t.listed || t.exited || t.foreground {
		return
	}
	t.listed = true
	s.list.items = append(s.list.items, listItem{term: t})
	s.listDirty = true
}

// unlistTerminal removes an exited terminal from the list.
func (s *Session) unlistTerminal(t *terminal) {
	if !t.listed || !t.exited {
		return
	}
	t.listed = false
	s.list.items = slices.DeleteFunc(s.list.items, func(it listItem) bool { return it.term == t })
	s.listDirty = true
}

// listCall lists an announced, unfinished tool call.
func (s *Session) listCall(c *toolCall) {
	if c.listed || c.final() {
		return
	}
	c.listed = true
	s.list.items = append(s.list.items, listItem{call: c})
	s.listDirty = true
}

// unlistCall removes a tool call that reached its final status.
func (s *Session) unlistCall(c *toolCall) {
	if !c.listed || !c.final() {
		return
	}
	c.listed = false
	s.list.items = slices.DeleteFunc(s.list.items, func(it listItem) bool { return it.call == c })
	s.listDirty = true
}

// swapCallForTerminal lists a background command's terminal in place of
// its tool call, once it runs: the same piece of work, listed once.
func (s *Session) swapCallForTerminal(c *toolCall, t *terminal) {
	i := slices.IndexFunc(s.list.items, func(it listItem) bool { return it.call == c })
	if i < 0 || t.exited {
		return
	}
	c.listed, t.listed = false, true
	s.list.items[i] = listItem{term: t}
	s.listDirty = true
}

// snapshot sends a state_update: the current state, the stop reason given
// (empty for a repeated snapshot) and the current list. Each snapshot is
// complete, so the history keeps only the latest: keeping them all would
// cost the square of the list's length.
func (s *Session) snapshot(stopReason string) {
	u := &protocol.StateUpdate{
		SessionUpdate: protocol.KindState, State: s.state, StopReason: stopReason, Background: s.list.wire(),
	}
	s.lastState = u
	s.send(u)
	s.listDirty = false
}

// flushList sends the repeated snapshot owed for a list change.
func (s *Session) flushList() {
	if s.listDirty && !s.closing {
		s.snapshot("")
	}
}
