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
	o.record(entry{call: running})
	live := &terminal{id: "term_1", call: running, ring: outputbuf.New(64)}
	running.term = live
	o.announceTerminal(live)
	gone := &toolCall{id: "call_2", state: callDone, outcome: "failed"}
	o.record(entry{call: gone})
	exited := &terminal{id: "term_2", ring: outputbuf.New(64), state: termExited, exit: &acp.ExitStatus{}}
	o.record(entry{term: exited})
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

// TestOutboxForgetsAndTrims: forgotten work leaves no trace in the
// history, which compacts itself; messages beyond maxMessages are
// dropped oldest first, and positions stay right.
func TestOutboxForgetsAndTrims(t *testing.T) {
	t.Parallel()
	o := outbox{session: "s"}
	var calls []*toolCall
	for i := range 100 {
		c := &toolCall{id: "call_" + strconv.Itoa(i)}
		o.record(entry{call: c})
		calls = append(calls, c)
	}
	var retired []entry
	for _, c := range calls[:60] {
		c.state = callRetired
		retired = append(retired, entry{call: c})
	}
	o.forget(retired)
	if len(o.history) != 40 || o.history[0].call != calls[60] || calls[60].hist != 0 || o.forgotten != 0 {
		t.Errorf("after forgetting 60 of 100: %d entries, first %v", len(o.history), o.history[0].call)
	}
	for range maxMessages {
		o.agentMessage("x")
	}
	o.agentMessage("one more")
	msgs := 0
	for _, e := range o.history {
		if e.msg != nil {
			msgs++
		}
	}
	if msgs != maxMessages-maxMessages/10+1 || o.kept != msgs || len(o.history) != msgs+40 {
		t.Errorf("%d messages kept (counted %d), %d entries", msgs, o.kept, len(o.history))
	}
	last := calls[99]
	if o.history[last.hist].call != last {
		t.Errorf("call_99 is not where the history says")
	}
	o.forget([]entry{{call: last}})
	if o.history[last.hist] != (entry{}) || o.forgotten != 1 {
		t.Errorf("a forgotten call stays in the history")
	}
}
