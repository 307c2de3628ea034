package lineclient

import (
	"fmt"
	"slices"
	"strings"

	"shellagent/internal/clientview"
)

// session is the client's view of its ACP session (clientview: its
// terminals, its tool calls, its state and latest background list, and
// the RFD's client-side rules over them), and how the client names it to
// the user. It belongs to the client's event loop.
type session struct {
	*clientview.Session
}

func newSession(id string) *session {
	return &session{clientview.New(id)}
}

// describe names a background item for the user: its id and what it runs.
func (s *session) describe(it clientview.Item) string {
	switch it.Type {
	case "terminal":
		if t := s.Terminals[it.TerminalID]; t != nil && t.Command != "" {
			return fmt.Sprintf("%s (%s)", it.TerminalID, t.Command)
		}
	case "tool_call":
		if c := s.Calls[it.ToolCallID]; c != nil && c.Title != "" {
			if c.Status != "" {
				return fmt.Sprintf("%s (%s, %s)", it.ToolCallID, c.Title, c.Status)
			}
			return fmt.Sprintf("%s (%s)", it.ToolCallID, c.Title)
		}
	case "subagent":
		return "subagent session " + it.SessionID
	default:
		return "an item of type " + it.Type
	}
	return it.ID()
}

// describeList names the items of the background list, in its order.
func (s *session) describeList() string {
	names := make([]string, len(s.Background))
	for i, it := range s.Background {
		names[i] = s.describe(it)
	}
	return strings.Join(names, ", ")
}

// listing describes the background list.
func (s *session) listing() string {
	if !s.Reported {
		return "background: not reported (what runs in the background is unknown)"
	}
	if len(s.Background) == 0 {
		if s.Quiet() {
			return "background: none; the session is quiet"
		}
		return "background: none"
	}
	text := "background: " + s.describeList()
	if s.ScheduledOnly() {
		text += "; idle, with work scheduled"
	}
	return text
}

// closeWarning says what closing the session will stop, or "" if nothing.
func (s *session) closeWarning() string {
	if !s.Reported {
		return "the agent does not report its background work: closing the session stops whatever still runs"
	}
	if len(s.Background) == 0 {
		return ""
	}
	noun := "items"
	if len(s.Background) == 1 {
		noun = "item"
	}
	return fmt.Sprintf("closing the session will stop %d background %s: %s", len(s.Background), noun, s.describeList())
}

// closed applies what a successful session/close means for listed work
// that has not reported its end (clientview.Session.Closed), and returns
// a note for each item it ended.
func (s *session) closed() []string {
	stopped, cancelled := s.Closed()
	var notes []string
	for _, id := range stopped {
		notes = append(notes, id+" stopped by the close: exit status unknown")
	}
	for _, id := range cancelled {
		notes = append(notes, id+" cancelled by the close")
	}
	slices.Sort(notes)
	return notes
}
