package supervisor

import (
	"context"
	"strconv"
	"testing"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
)

// sent is a protocol.Client that records what a session sends it.
type sent struct {
	updates []any
	modes   []protocol.OutputMode // of the terminal updates, in order
}

func (c *sent) Update(_ string, u acp.Update) { c.updates = append(c.updates, u) }

func (c *sent) Release(string) {}

func (c *sent) UpdateTerminal(_ string, u *acp.TerminalUpdate, _ protocol.OutputSource, mode protocol.OutputMode) {
	c.updates = append(c.updates, u)
	c.modes = append(c.modes, mode)
}

func (c *sent) RequestPermission(context.Context, *acp.PermissionRequest, func(*acp.PermissionResponse, error)) {
}

// TestOutboxReplay: the history replays each item once, in the order it
// was first reported, at its current state; forgotten work is left out.
func TestOutboxReplay(t *testing.T) {
	t.Parallel()
	o := outbox{session: "s"}
	o.message(acp.KindUserMessage, []acp.ContentBlock{acp.TextBlock("run")})
	running := &toolCall{id: "call_1", state: callRunning}
	o.history.Record(entry{call: running})
	live := &terminal{id: "term_1", call: running, ring: outputbuf.New(64)}
	running.term = live
	o.announceTerminal(live)
	gone := &toolCall{id: "call_2", state: callDone, outcome: "failed"}
	o.history.Record(entry{call: gone})
	exited := &terminal{id: "term_2", ring: outputbuf.New(64), state: termExited, exit: &acp.ExitStatus{}}
	o.history.Record(entry{term: exited})
	o.agentMessage("done")

	gone.state = callRetired
	o.forget([]entry{{call: gone}})
	running.state, running.outcome = callDone, "completed" // as it is now

	c := &sent{}
	o.client = c
	delivered := o.replay()
	var got []string
	for _, u := range c.updates {
		switch u := u.(type) {
		case *acp.Message:
			got = append(got, u.MessageID)
		case *acp.ToolCallUpdate:
			got = append(got, u.ToolCallID+" "+u.Status)
		case *acp.TerminalUpdate:
			if u.ExitStatus != nil {
				got = append(got, u.TerminalID+" exited")
			} else {
				got = append(got, u.TerminalID)
			}
		}
	}
	want := []string{"msg_1", "call_1 completed", "term_1", "term_2 exited", "msg_2"}
	if mustJSON(got) != mustJSON(want) {
		t.Errorf("replay sent %v, want %v", got, want)
	}
	if len(c.modes) != 2 || c.modes[0] != protocol.ReplaceOutput || c.modes[1] != protocol.ReplaceOutput {
		t.Errorf("the terminals went out as %v, want replacements", c.modes)
	}
	if !delivered[running] || !delivered[live] || !delivered[exited] || delivered[gone] {
		t.Errorf("delivered %v", delivered)
	}
}

// TestOutboxForgets: the outbox forgets retired work in its history, and
// leaves the rest where it was (the history's own rules, trimming
// messages and closing gaps, are package history's TestList).
func TestOutboxForgets(t *testing.T) {
	t.Parallel()
	o := outbox{session: "s"}
	var calls []*toolCall
	for i := range 3 {
		c := &toolCall{id: "call_" + strconv.Itoa(i)}
		o.history.Record(entry{call: c})
		calls = append(calls, c)
	}
	o.forget([]entry{{call: calls[1]}, {term: &terminal{id: "term_9"}}})
	if _, ok := o.history.Pos(entry{call: calls[1]}); ok || o.history.Gaps() != 1 {
		t.Errorf("call_1 stays in the history")
	}
	if i, ok := o.history.Pos(entry{call: calls[2]}); !ok || i != 2 {
		t.Errorf("call_2 moved to %d (%v)", i, ok)
	}
}
