package supervisor

import (
	"encoding/json"
	"maps"
	"slices"

	"shellagent/acp"
	"shellagent/internal/journal"
	"shellagent/ptyio"
	"shellagent/supervisor/record"
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
		if err := st.settings.Set(&acp.SetConfigOptionRequest{SessionID: h.ID, ConfigID: id, Type: "id", Value: v}); err != nil {
			sv.cfg.Log.Warn("resume: a config option of the history is skipped", "session", h.ID, "option", id, "err", err)
		}
	}
	st.out.updatedAt = h.UpdatedAt
	lost = reviveWork(st, record.ReadPast(h, sv.cfg.Log))
	if !h.Closed {
		// Its process died: it may have shown ids up to its reservation
		// that no other record holds (record.Recorder reserve).
		for prefix, n := range h.IDs {
			if prefix == "msg" {
				st.out.messages = max(st.out.messages, n)
			} else if slices.Contains(record.IDPrefixes, prefix) {
				st.work.seq[prefix] = max(st.work.seq[prefix], n)
			}
		}
	}
	return s, lost
}

// reviveWork registers the work of past in st, exited or final, and
// records it in the history in its order. It returns the terminals that
// are lost.
func reviveWork(st *state, past *record.Past) (lost []*terminal) {
	terms := make(map[*record.PastTerminal]*terminal)
	term := func(pt *record.PastTerminal) *terminal {
		if terms[pt] == nil {
			terms[pt] = reviveTerminal(pt)
		}
		return terms[pt]
	}
	for _, it := range past.Items {
		switch {
		case it.Message != nil:
			st.out.history.Record(entry{msg: it.Message})
			st.out.messages = max(st.out.messages, idNumber(it.Message.MessageID))
		case it.Call != nil:
			reviveCall(st, it.Call, term)
		case it.Terminal != nil:
			t := term(it.Terminal)
			if it.Terminal.Lost {
				lost = append(lost, t)
			}
			st.work.terminals[t.id] = t
			st.work.seq["term"] = max(st.work.seq["term"], idNumber(t.id))
			st.out.history.Record(entry{term: t})
		}
	}
	st.work.exited = append(st.work.exited, oldestFirst(st.work.terminals, func(t *terminal) bool { return t.call != nil })...)
	return lost
}

// reviveCall registers and records tool call pc of a session's history,
// final, with its command's terminal (term makes each once).
func reviveCall(st *state, pc *record.PastCall, term func(*record.PastTerminal) *terminal) {
	u := pc.Update
	c := &toolCall{id: u.ToolCallID, title: u.Title, kind: u.Kind, state: callDone, outcome: pc.Outcome,
		input: u.RawInput, output: u.RawOutput, content: u.Content}
	for _, pt := range pc.Terminals {
		t := term(pt)
		t.call, c.term = c, t
	}
	if c.term == nil {
		st.work.finished = append(st.work.finished, c)
	}
	st.work.calls[c.id] = c
	st.work.seq["call"] = max(st.work.seq["call"], idNumber(c.id))
	st.out.history.Record(entry{call: c})
}

// reviveTerminal is terminal pt of a session's history, exited.
func reviveTerminal(pt *record.PastTerminal) *terminal {
	u := pt.Update
	t := &terminal{id: u.TerminalID, line: u.Command, cwd: u.Cwd, state: termExited, started: pt.Started, exit: pt.Exit, ring: pt.Output}
	if u.Size != nil {
		t.size = ptyio.Size{Cols: uint16(u.Size.Cols), Rows: uint16(u.Size.Rows)}
	}
	return t
}

// settleRevived records what revive decided, so that the history says it
// from now on: the exitStatus {} of each lost terminal, the final status
// of each tool call it cancelled.
func settleRevived(st *state, lost []*terminal) {
	for _, e := range st.out.history.All() {
		switch {
		case e.call != nil:
			st.out.disk.Record(e.call.update())
		case e.term != nil && !slices.Contains(lost, e.term):
		case e.term != nil:
			st.out.disk.Record(e.term.exitedUpdate())
		}
	}
}

// termIDs returns the ids of ts, in order.
func termIDs(ts []*terminal) []string {
	ids := make([]string, 0, len(ts))
	for _, t := range ts {
		ids = append(ids, t.id)
	}
	return ids
}
