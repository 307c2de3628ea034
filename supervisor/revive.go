package supervisor

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"shellagent/acp"
	"shellagent/internal/journal"
	"shellagent/outputbuf"
	"shellagent/ptyio"
)

// revive builds a live session, with no client yet, from its history h:
// its messages, tool calls and terminals as last recorded, in the order a
// replay sends them, each terminal's output as a closed ring with the
// offsets it had. Nothing of it runs: a terminal with no exit recorded
// did not outlive the agent that ran it; it gets exitStatus {} and is
// among lost, and a tool call that had not reached a final status is
// cancelled. The session is not in the Supervisor's table yet.
func revive(sv *Supervisor, h *journal.History) (s *Session, lost []*terminal) {
	s = newSession(sv, h.ID, h.Cwd, nil)
	s.disk.Seed(h)
	st := &s.st
	st.title = h.Title
	for _, id := range slices.Sorted(maps.Keys(h.Config)) {
		v, _ := json.Marshal(h.Config[id]) // Safe: a string.
		if err := st.settings.set(&acp.SetConfigOptionRequest{SessionID: h.ID, ConfigID: id, Type: "id", Value: v}); err != nil {
			sv.cfg.Log.Warn("resume: a config option of the history is skipped", "session", h.ID, "option", id, "err", err)
		}
	}
	st.out.updatedAt = h.UpdatedAt
	terms := make(map[string]*terminal)
	var calls []*toolCall
	for _, it := range h.Updates {
		u, err := journal.DecodeUpdate(it.Update)
		if err != nil {
			sv.cfg.Log.Warn("resume: an update of the history is skipped", "session", h.ID, "err", err)
			continue
		}
		switch u := u.(type) {
		case *acp.Message:
			st.out.record(entry{msg: u})
			st.out.messages = max(st.out.messages, idNumber(u.MessageID))
		case *acp.ToolCallUpdate:
			c := &toolCall{id: u.ToolCallID, title: u.Title, kind: u.Kind, state: callDone, outcome: u.Status,
				input: u.RawInput, output: u.RawOutput, content: u.Content}
			if !final(u.Status) {
				c.outcome = acp.StatusCancelled
			}
			st.work.calls[c.id] = c
			st.work.seq["call"] = max(st.work.seq["call"], idNumber(c.id))
			calls = append(calls, c)
			st.out.record(entry{call: c})
		case *acp.TerminalUpdate:
			t := reviveTerminal(u, h.Terminals[u.TerminalID], it.At)
			if t.exit == nil {
				t.exit = &acp.ExitStatus{}
				lost = append(lost, t)
			}
			terms[t.id] = t
			st.work.terminals[t.id] = t
			st.work.seq["term"] = max(st.work.seq["term"], idNumber(t.id))
			st.out.record(entry{term: t})
		}
	}
	for _, c := range calls {
		for _, ct := range c.content {
			if t := terms[ct.TerminalID]; t != nil && t.call == nil {
				t.call, c.term = c, t
			}
		}
		if c.term == nil {
			st.work.finished = append(st.work.finished, c)
		}
	}
	st.work.exited = append(st.work.exited, oldestFirst(terms, func(t *terminal) bool { return t.call != nil })...)
	return s, lost
}

// reviveTerminal is a terminal of the history: last recorded as u, with
// out (nil if it recorded no output or exit), first reported at.
func reviveTerminal(u *acp.TerminalUpdate, out *journal.Output, at time.Time) *terminal {
	t := &terminal{id: u.TerminalID, line: u.Command, cwd: u.Cwd, state: termExited, started: at, exit: u.ExitStatus}
	if u.Size != nil {
		t.size = ptyio.Size{Cols: uint16(u.Size.Cols), Rows: uint16(u.Size.Rows)}
	}
	t.ring = outputbuf.Restored(nil, 0)
	if out != nil {
		t.ring = outputbuf.Restored(out.Data, out.Written)
		if out.Exit != nil {
			t.exit = out.Exit
		}
	}
	return t
}

func final(status string) bool {
	return status == acp.StatusCompleted || status == acp.StatusFailed || status == acp.StatusCancelled
}

// settleRevived records what revive decided, so that the history says it
// from now on: the exitStatus {} of each lost terminal, the final status
// of each tool call it cancelled.
func settleRevived(st *state, lost []*terminal) {
	for _, e := range st.out.history {
		switch {
		case e.call != nil:
			st.out.disk.Record(e.call.update())
		case e.term != nil && !containsTerm(lost, e.term):
		case e.term != nil:
			st.out.disk.Record(e.term.exitedUpdate())
		}
	}
}

func containsTerm(ts []*terminal, t *terminal) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// termIDs returns the ids of ts, in order.
func termIDs(ts []*terminal) []string {
	ids := make([]string, 0, len(ts))
	for _, t := range ts {
		ids = append(ids, t.id)
	}
	return ids
}
