package acptest

import "slices"

// A View is an ACP v2 session as a client that follows the client-side
// rules of the Background Work RFD and of the schema sees it, after some
// message of the transcript. It is what a test asks of the strict client
// besides the agent-side rules that Check verifies: what such a client
// shows.
type View struct {
	// State is the last state reported ("" before any). Busy says it is
	// one the client does not know: it shows a generic busy state, neither
	// idle nor the previous state.
	State string
	Busy  bool
	// Reported says the latest state_update reported background work: a
	// list that is present and valid. Background is that list; nil when
	// background work is unknown.
	Reported   bool
	Background []Item
	// Completions counts the foreground turns that ended: idle snapshots
	// with a stop reason that follow another state. A repeated idle is not
	// a new completion.
	Completions int
	ToolCalls   map[string]*ToolCallView
	Terminals   map[string]*TerminalView
}

// ToolCallView is a tool call as the client sees it.
type ToolCallView struct {
	Status    string   // "pending" until a status is reported
	Terminals []string // the terminals its content references
	Cancel    bool     // it advertises capabilities.cancel
}

// TerminalView is a terminal as the client sees it.
type TerminalView struct {
	Exited bool // its exitStatus was reported
	Cancel bool // it advertises capabilities.cancel
}

// Final reports whether the tool call reached a final status.
func (t *ToolCallView) Final() bool { return finalStatus(t.Status) }

// InProgress reports whether the client shows the tool call as running
// now: in_progress, or a status it does not know, which clients treat as
// still in progress (schema ToolCallStatus).
func (t *ToolCallView) InProgress() bool {
	switch t.Status {
	case "pending", "paused":
		return false
	}
	return !t.Final()
}

// Quiet reports whether the session has nothing running: idle, with a
// reported, empty list.
func (v View) Quiet() bool {
	return v.State == "idle" && !v.Busy && v.Reported && len(v.Background) == 0
}

// Running returns how many listed items run right now: terminals, tool
// calls that are not pending or paused, and items of types the client
// does not know, which still count as running work.
func (v View) Running() int {
	n := 0
	for _, it := range v.Background {
		if it.Type == "tool_call" && v.ToolCalls[it.ID] != nil && !v.ToolCalls[it.ID].InProgress() {
			continue
		}
		n++
	}
	return n
}

// Listed reports whether id is in the latest reported list.
func (v View) Listed(id string) bool {
	return slices.ContainsFunc(v.Background, func(it Item) bool { return it.ID == id })
}

// Live reports whether the tool call or terminal id is live background
// work: listed, or a tool call that references a listed terminal.
func (v View) Live(id string) bool {
	if v.Listed(id) {
		return true
	}
	tc := v.ToolCalls[id]
	return tc != nil && slices.ContainsFunc(tc.Terminals, v.Listed)
}

// Abandonable reports whether the client MAY treat the tool call or
// terminal id as abandoned: it is unfinished, the session is idle, the
// list is reported, and id is not live. Nothing is when background work
// is unknown.
func (v View) Abandonable(id string) bool {
	if !v.Reported || v.State != "idle" || v.Busy || v.Live(id) {
		return false
	}
	if tc := v.ToolCalls[id]; tc != nil {
		return !tc.Final()
	}
	t := v.Terminals[id]
	return t != nil && !t.Exited
}

// View returns session sessionID as the client sees it right after
// message at (after the whole transcript so far when at is nil). Sending
// session/resume with a replayFrom (or, in v1, session/load) starts the
// view over, as the replay re-sends the session's history (see Check).
func (c *Client) View(sessionID string, at *Msg) View {
	c.mu.Lock()
	msgs, sent := c.msgs, append([]*request(nil), c.sent...)
	c.mu.Unlock()
	if at != nil {
		msgs = msgs[:at.Seq+1]
	}
	v, next := newView(), 0
	for i, m := range msgs {
		for ; next < len(sent) && sent[next].after <= i; next++ {
			if r := sent[next]; r.replay && r.sessionID == sessionID {
				v = newView()
			}
		}
		if m.Method == "session/update" && m.SessionID == sessionID {
			v.apply(m)
		}
	}
	return v
}

func newView() View {
	return View{ToolCalls: make(map[string]*ToolCallView), Terminals: make(map[string]*TerminalView)}
}

// apply applies one update.
func (v *View) apply(m *Msg) {
	switch m.Kind {
	case "state_update":
		v.state(m)
	case "tool_call_update":
		tc := v.ToolCalls[m.ToolCallID()]
		if tc == nil {
			tc = &ToolCallView{Status: "pending"}
			v.ToolCalls[m.ToolCallID()] = tc
		}
		if m.HasKey("status") {
			tc.Status = m.Status()
			if tc.Status == "" {
				tc.Status = "pending" // null resets it
			}
		}
		if m.HasKey("content") {
			tc.Terminals = terminalRefs(m.Update["content"])
		}
		capsPatch(m, &tc.Cancel)
	case "terminal_update":
		t := v.Terminals[m.TerminalID()]
		if t == nil {
			t = &TerminalView{}
			v.Terminals[m.TerminalID()] = t
		}
		t.Exited = t.Exited || m.ExitStatus() != nil
		capsPatch(m, &t.Cancel)
	}
}

// state applies a state_update: a complete snapshot.
func (v *View) state(m *Msg) {
	state := m.State()
	known := state == "running" || state == "idle" || state == "requires_action"
	if known && state == "idle" && m.StopReason() != "" && (v.State != "idle" || v.Busy) {
		v.Completions++
	}
	v.State, v.Busy = state, !known
	_, isList := m.Update["background"].([]any)
	v.Reported = isList && !m.invalid
	v.Background = nil
	if v.Reported {
		v.Background = m.Background()
	}
}

// capsPatch applies an update's capabilities patch to cancel: omitted
// leaves it, null clears it, an object replaces it whole.
func capsPatch(m *Msg, cancel *bool) {
	raw, ok := m.Update["capabilities"]
	if !ok {
		return
	}
	obj, _ := raw.(map[string]any)
	*cancel = obj != nil && obj["cancel"] != nil
}
