package lineclient

import (
	"fmt"
	"slices"
	"strings"
)

// session is the client's view of one ACP session: its terminals, its
// tool calls, its foreground state and its latest background list. It
// applies the client-side rules of the Background Work RFD. It belongs to
// the client's event loop.
type session struct {
	id         string
	state      string // "idle" until a state_update says otherwise
	bg         []bgItem
	bgReported bool // the latest state_update carried a valid list
	terminals  map[string]*terminal
	calls      map[string]*toolCall
	abandoned  map[string]bool // items already reported as abandoned
}

// terminal is what the client knows of a terminal.
type terminal struct {
	id      string
	command string
	exit    *exitStatus // nil while it runs
}

// toolCall is what the client knows of a tool call.
type toolCall struct {
	id, title, kind, status string
	terminals               []string // terminals its content references
}

func newSession(id string) *session {
	return &session{
		id:         id,
		state:      "idle",
		bgReported: true, // a new session is idle with nothing running
		terminals:  make(map[string]*terminal),
		calls:      make(map[string]*toolCall),
		abandoned:  make(map[string]bool),
	}
}

// isFinal reports whether a tool call status is final.
func isFinal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// live returns the number of terminals that have not reported an exit.
func (s *session) live() int {
	n := 0
	for _, t := range s.terminals {
		if t.exit == nil {
			n++
		}
	}
	return n
}

// listed reports whether the latest background list holds id.
func (s *session) listed(id string) bool {
	return s.bgReported && slices.ContainsFunc(s.bg, func(it bgItem) bool { return it.id() == id })
}

// quiet reports whether nothing runs: idle with an empty, reported list.
func (s *session) quiet() bool {
	return s.state == "idle" && s.bgReported && len(s.bg) == 0
}

// scheduledOnly reports whether the session is idle and its list holds
// only pending or paused tool calls: work scheduled or suspended, nothing
// running right now.
func (s *session) scheduledOnly() bool {
	if s.state != "idle" || !s.bgReported || len(s.bg) == 0 {
		return false
	}
	for _, it := range s.bg {
		c := s.calls[it.ToolCallID]
		if it.Type != "tool_call" || c == nil || (c.status != "pending" && c.status != "paused") {
			return false
		}
	}
	return true
}

// newlyAbandoned returns the unfinished tool calls and running terminals
// that the latest list leaves out while the session is idle, and that have
// not been reported before. Finished work (a terminal with an exit status,
// a tool call with a final status) is never abandoned, nor is a tool call
// that references a listed terminal, nor anything while the list is not
// reported.
func (s *session) newlyAbandoned() []string {
	if s.state != "idle" || !s.bgReported {
		return nil
	}
	var ids []string
	for id, t := range s.terminals {
		if t.exit == nil && !s.listed(id) && !s.abandoned[id] {
			ids = append(ids, id)
		}
	}
	for id, c := range s.calls {
		if isFinal(c.status) || c.status == "" || s.listed(id) || s.abandoned[id] {
			continue
		}
		if slices.ContainsFunc(c.terminals, s.listed) {
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

// describe names a background item for the user: its id and what it runs.
func (s *session) describe(it bgItem) string {
	switch it.Type {
	case "terminal":
		if t := s.terminals[it.TerminalID]; t != nil && t.command != "" {
			return fmt.Sprintf("%s (%s)", it.TerminalID, t.command)
		}
	case "tool_call":
		if c := s.calls[it.ToolCallID]; c != nil && c.title != "" {
			if c.status != "" {
				return fmt.Sprintf("%s (%s, %s)", it.ToolCallID, c.title, c.status)
			}
			return fmt.Sprintf("%s (%s)", it.ToolCallID, c.title)
		}
	case "subagent":
		return "subagent session " + it.SessionID
	default:
		return "an item of type " + it.Type
	}
	return it.id()
}

// describeList names the items of the background list, in its order.
func (s *session) describeList() string {
	names := make([]string, len(s.bg))
	for i, it := range s.bg {
		names[i] = s.describe(it)
	}
	return strings.Join(names, ", ")
}

// listing describes the background list.
func (s *session) listing() string {
	if !s.bgReported {
		return "background: not reported (what runs in the background is unknown)"
	}
	if len(s.bg) == 0 {
		if s.quiet() {
			return "background: none; the session is quiet"
		}
		return "background: none"
	}
	text := "background: " + s.describeList()
	if s.scheduledOnly() {
		text += "; idle, with work scheduled"
	}
	return text
}

// closeWarning says what closing the session will stop, or "" if nothing.
func (s *session) closeWarning() string {
	if !s.bgReported {
		return "the agent does not report its background work: closing the session stops whatever still runs"
	}
	if len(s.bg) == 0 {
		return ""
	}
	noun := "items"
	if len(s.bg) == 1 {
		noun = "item"
	}
	return fmt.Sprintf("closing the session will stop %d background %s: %s", len(s.bg), noun, s.describeList())
}

// closed applies what a successful session/close means for listed work
// that has not reported its end: a tool call (listed, or referencing a
// listed terminal) is cancelled and a terminal exited with no known
// status. It returns a note for each.
func (s *session) closed() []string {
	if !s.bgReported {
		return nil
	}
	var notes []string
	for _, it := range s.bg {
		switch it.Type {
		case "terminal":
			if t := s.terminals[it.TerminalID]; t != nil && t.exit == nil {
				t.exit = &exitStatus{}
				notes = append(notes, it.TerminalID+" stopped by the close: exit status unknown")
			}
		case "tool_call":
			if c := s.calls[it.ToolCallID]; c != nil && !isFinal(c.status) {
				c.status = "cancelled"
				notes = append(notes, it.ToolCallID+" cancelled by the close")
			}
		}
	}
	for _, c := range s.calls {
		if !isFinal(c.status) && slices.ContainsFunc(c.terminals, s.listed) {
			c.status = "cancelled"
			notes = append(notes, c.id+" cancelled by the close")
		}
	}
	slices.Sort(notes)
	return notes
}

// sameList reports whether two background lists hold the same items in
// the same order.
func sameList(a, b []bgItem) bool {
	return slices.EqualFunc(a, b, func(x, y bgItem) bool { return x.Type == y.Type && x.id() == y.id() })
}
