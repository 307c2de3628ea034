package record

import (
	"log/slog"
	"time"

	"shellagent/acp"
	"shellagent/internal/journal"
	"shellagent/outputbuf"
)

// A Past is a session's history as a live session is made from it again
// (supervisor's revive.go): its messages, tool calls and terminals as last
// recorded, in the order a replay sends them. Nothing of it runs: a
// terminal with no exit recorded did not outlive the agent that ran it
// (Lost), and a tool call that had not reached a final status is
// cancelled.
type Past struct {
	Items []PastItem
}

// A PastItem is one item of a Past: exactly one of a message, a tool
// call or a terminal.
type PastItem struct {
	Message  *acp.Message
	Call     *PastCall
	Terminal *PastTerminal
}

// PastCall is a tool call of a Past.
type PastCall struct {
	Update  *acp.ToolCallUpdate // as last recorded
	Outcome string              // its final status: as recorded, or cancelled
	// Terminals are the terminals its content references that no tool
	// call before it took, in that order: its command's.
	Terminals []*PastTerminal
}

// PastTerminal is a terminal of a Past.
type PastTerminal struct {
	Update  *acp.TerminalUpdate // as last recorded
	Started time.Time           // when it was first reported
	// Output is its output as recorded: a closed ring with the offsets it
	// had (empty if none was recorded).
	Output *outputbuf.Ring
	// Exit is its exitStatus as recorded; {} for a terminal that is Lost:
	// one with no exit recorded.
	Exit  *acp.ExitStatus
	Lost  bool
	taken bool // in a tool call's Terminals
}

// ReadPast reads the Past of history h. An update it cannot decode is
// skipped, and log says so.
func ReadPast(h *journal.History, log *slog.Logger) *Past {
	p := &Past{}
	terms := make(map[string]*PastTerminal)
	for _, it := range h.Updates {
		u, err := journal.DecodeUpdate(it.Update)
		if err != nil {
			log.Warn("resume: an update of the history is skipped", "session", h.ID, "err", err)
			continue
		}
		switch u := u.(type) {
		case *acp.Message:
			p.Items = append(p.Items, PastItem{Message: u})
		case *acp.ToolCallUpdate:
			c := &PastCall{Update: u, Outcome: u.Status}
			if !final(u.Status) {
				c.Outcome = acp.StatusCancelled
			}
			p.Items = append(p.Items, PastItem{Call: c})
		case *acp.TerminalUpdate:
			t := pastTerminal(u, h.Terminals[u.TerminalID], it.At)
			terms[u.TerminalID] = t
			p.Items = append(p.Items, PastItem{Terminal: t})
		}
	}
	for _, it := range p.Items {
		if it.Call != nil {
			it.Call.Terminals = take(it.Call.Update.Content, terms)
		}
	}
	return p
}

// pastTerminal is a terminal of the history: last recorded as u, with
// out (nil if it recorded no output or exit), first reported at.
func pastTerminal(u *acp.TerminalUpdate, out *journal.Output, at time.Time) *PastTerminal {
	t := &PastTerminal{Update: u, Started: at, Exit: u.ExitStatus, Output: outputbuf.Restored(nil, 0)}
	if out != nil {
		t.Output = outputbuf.Restored(out.Data, out.Written)
		if out.Exit != nil {
			t.Exit = out.Exit
		}
	}
	if t.Exit == nil {
		t.Exit, t.Lost = &acp.ExitStatus{}, true
	}
	return t
}

// take returns the terminals of terms that content references and no
// tool call took yet, and takes them.
func take(content []acp.ToolCallContent, terms map[string]*PastTerminal) []*PastTerminal {
	var out []*PastTerminal
	for _, ct := range content {
		if t := terms[ct.TerminalID]; t != nil && !t.taken {
			t.taken = true
			out = append(out, t)
		}
	}
	return out
}

func final(status string) bool {
	return status == acp.StatusCompleted || status == acp.StatusFailed || status == acp.StatusCancelled
}
