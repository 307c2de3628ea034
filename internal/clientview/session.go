// Package clientview is an ACP v2 session as a client sees it: the
// updates as a client reads them (wire.go) and what they make of the
// session (session.go): its state and background list from each
// state_update snapshot, its terminals (their command, their output
// snapshots decoded, with the bytes dropped before them, their exit,
// applied once), its tool calls (their status, the terminals they
// reference), and the client-side rules of the Background Work RFD over
// them: a session is quiet when it is idle with an empty, reported list;
// work that reported its end is never abandoned, and unfinished work left
// out of the list while idle is, once; a successful session/close ends
// what is listed. A resume window (Session.Resuming) marks the updates
// session/resume sends before its answer: a terminal first seen there ran
// before the client came.
//
// It is the reference client's model of its session (package
// lineclient, which prints it); protocol/acptest keeps its own, as the
// tests' independent oracle. A Session belongs to one goroutine.
package clientview

import "slices"

// A Session is what a client knows of one session.
type Session struct {
	ID string
	// State is the latest state reported; "idle" until a state_update
	// says otherwise.
	State string
	// Background is the latest list; Reported says the latest
	// state_update carried a valid one (a new session is idle with an
	// empty list).
	Background []Item
	Reported   bool
	Terminals  map[string]*Terminal
	Calls      map[string]*ToolCall
	// Resuming is set while session/resume brings the client up to date:
	// each terminal first seen then ran before the client came.
	Resuming bool

	abandoned map[string]bool // items already reported as abandoned
}

// A Terminal is what the client knows of a terminal.
type Terminal struct {
	ID      string
	Command string
	Exit    *ExitStatus // nil while it runs
}

// A ToolCall is what the client knows of a tool call.
type ToolCall struct {
	ID, Title, Kind, Status string
	Terminals               []string // terminals its content references
}

// New returns a new session: idle, with nothing running.
func New(id string) *Session {
	return &Session{
		ID:        id,
		State:     "idle",
		Reported:  true,
		Terminals: make(map[string]*Terminal),
		Calls:     make(map[string]*ToolCall),
		abandoned: make(map[string]bool),
	}
}

// ApplyState takes a state_update: a complete snapshot of the state and
// the background list. It reports whether the list changed: its items,
// their order, or whether it is reported.
func (s *Session) ApplyState(u *Update) (listChanged bool) {
	before, beforeReported := s.Background, s.Reported
	s.State = u.State
	s.Background, s.Reported = DecodeBackground(u.Background)
	return s.Reported != beforeReported || !sameList(s.Background, before)
}

// ApplyTerminal applies a terminal_update's patch to its terminal (the
// command), creating the terminal if the client had not seen it (isNew).
// Its output and its exit are the client's to take next, in that order:
// u.Output.Decode, then ApplyExit.
func (s *Session) ApplyTerminal(u *Update) (t *Terminal, isNew bool) {
	t = s.Terminals[u.TerminalID]
	if isNew = t == nil; isNew {
		t = &Terminal{ID: u.TerminalID}
		s.Terminals[u.TerminalID] = t
	}
	if u.Command != nil {
		t.Command = *u.Command
	}
	return t, isNew
}

// ApplyExit records a terminal's exit, once: it reports whether e is the
// exit, the first reported.
func (s *Session) ApplyExit(t *Terminal, e *ExitStatus) bool {
	if e == nil || t.Exit != nil {
		return false
	}
	t.Exit = e
	return true
}

// ApplyToolCall applies a tool_call_update (or a tool_call) to its tool
// call, creating it if the client had not seen it (isNew), and returns
// the status it had before ("" for a new one).
func (s *Session) ApplyToolCall(u *Update) (tc *ToolCall, isNew bool, old string) {
	tc = s.Calls[u.ToolCallID]
	if isNew = tc == nil; isNew {
		tc = &ToolCall{ID: u.ToolCallID}
		s.Calls[u.ToolCallID] = tc
	}
	old = tc.Status
	if u.Title != nil {
		tc.Title = *u.Title
	}
	if u.Kind != nil {
		tc.Kind = *u.Kind
	}
	if u.Status != nil {
		tc.Status = *u.Status
	}
	if refs := TerminalRefs(u.Content); len(refs) > 0 {
		tc.Terminals = refs
	}
	return tc, isNew, old
}

// Live returns the number of terminals that have not reported an exit.
func (s *Session) Live() int {
	n := 0
	for _, t := range s.Terminals {
		if t.Exit == nil {
			n++
		}
	}
	return n
}

// Listed reports whether the latest background list holds id.
func (s *Session) Listed(id string) bool {
	return s.Reported && slices.ContainsFunc(s.Background, func(it Item) bool { return it.ID() == id })
}

// Quiet reports whether nothing runs: idle with an empty, reported list.
func (s *Session) Quiet() bool {
	return s.State == "idle" && s.Reported && len(s.Background) == 0
}

// ScheduledOnly reports whether the session is idle and its list holds
// only pending or paused tool calls: work scheduled or suspended, nothing
// running right now.
func (s *Session) ScheduledOnly() bool {
	if s.State != "idle" || !s.Reported || len(s.Background) == 0 {
		return false
	}
	for _, it := range s.Background {
		c := s.Calls[it.ToolCallID]
		if it.Type != "tool_call" || c == nil || (c.Status != "pending" && c.Status != "paused") {
			return false
		}
	}
	return true
}

// NewlyAbandoned returns the unfinished tool calls and running terminals
// that the latest list leaves out while the session is idle, and that
// have not been returned before, sorted. Finished work (a terminal with
// an exit status, a tool call with a final status) is never abandoned,
// nor is a tool call that references a listed terminal, nor anything
// while the list is not reported.
func (s *Session) NewlyAbandoned() []string {
	if s.State != "idle" || !s.Reported {
		return nil
	}
	var ids []string
	for id, t := range s.Terminals {
		if t.Exit == nil && !s.Listed(id) && !s.abandoned[id] {
			ids = append(ids, id)
		}
	}
	for id, c := range s.Calls {
		if Final(c.Status) || c.Status == "" || s.Listed(id) || s.abandoned[id] {
			continue
		}
		if slices.ContainsFunc(c.Terminals, s.Listed) {
			continue
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		s.abandoned[id] = true
	}
	slices.Sort(ids)
	return ids
}

// Closed applies what a successful session/close means for listed work
// that has not reported its end: a terminal exited with no known status,
// a tool call (listed, or referencing a listed terminal) cancelled. It
// returns the terminals stopped and the tool calls cancelled, each
// sorted.
func (s *Session) Closed() (stopped, cancelled []string) {
	if !s.Reported {
		return nil, nil
	}
	for _, it := range s.Background {
		switch it.Type {
		case "terminal":
			if t := s.Terminals[it.TerminalID]; t != nil && t.Exit == nil {
				t.Exit = &ExitStatus{}
				stopped = append(stopped, it.TerminalID)
			}
		case "tool_call":
			if c := s.Calls[it.ToolCallID]; c != nil && !Final(c.Status) {
				c.Status = "cancelled"
				cancelled = append(cancelled, it.ToolCallID)
			}
		}
	}
	for _, c := range s.Calls {
		if !Final(c.Status) && slices.ContainsFunc(c.Terminals, s.Listed) {
			c.Status = "cancelled"
			cancelled = append(cancelled, c.ID)
		}
	}
	slices.Sort(stopped)
	slices.Sort(cancelled)
	return stopped, cancelled
}

// sameList reports whether two background lists hold the same items in
// the same order.
func sameList(a, b []Item) bool {
	return slices.EqualFunc(a, b, func(x, y Item) bool { return x.Type == y.Type && x.ID() == y.ID() })
}
