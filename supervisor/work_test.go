package supervisor

import (
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/supervisor/jobs"
)

func TestRegistryIDs(t *testing.T) {
	t.Parallel()
	r := newRegistry()
	got := []string{r.newID("term"), r.newID("call"), r.newID("term"), r.newCall(callRunning, "execute", "x").id}
	want := []string{"term_1", "call_1", "term_2", "call_2"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ids %v, want %v", got, want)
			break
		}
	}
	if r.calls["call_2"] == nil || idNumber("term_12") != 12 || idNumber("sess_ABC_7") != 7 {
		t.Errorf("call_2 unregistered, or idNumber wrong")
	}
}

// TestRegistryRetiresExitedTerminals: beyond maxExited exited terminals,
// the oldest is forgotten with its tool call, and releases its ring.
func TestRegistryRetiresExitedTerminals(t *testing.T) {
	t.Parallel()
	r := newRegistry()
	var terms []*terminal
	for range maxExited + 2 {
		c := r.newCall(callRunning, "execute", "x")
		term := &terminal{id: r.newID("term"), call: c, ring: outputbuf.New(1024)}
		term.ring.Write([]byte("out"))
		c.term = term
		r.addTerminal(term)
		r.finish(c, acp.StatusCompleted)
		terms = append(terms, term)
	}
	if !r.live() || len(r.running()) != maxExited+2 || r.running()[0] != terms[0] {
		t.Fatalf("live %v, running %d", r.live(), len(r.running()))
	}
	for _, term := range terms {
		r.exit(term)
	}
	if r.live() || len(r.terminals) != maxExited || len(r.calls) != maxExited || len(r.exited) != maxExited {
		t.Errorf("kept %d terminals, %d calls, %d exited; want %d", len(r.terminals), len(r.calls), len(r.exited), maxExited)
	}
	for _, old := range terms[:2] {
		if old.state != termRetired || old.ring != nil || old.call.state != callRetired || old.call.term != nil || r.terminals[old.id] != nil {
			t.Errorf("%s: state %d, ring %v, call state %d", old.id, old.state, old.ring != nil, old.call.state)
		}
	}
	if len(r.retired) != 4 || r.retired[0].term != terms[0] || r.retired[1].call != terms[0].call {
		t.Errorf("retired %v, want term_1, call_1, term_2, call_2", r.retired)
	}
	if kept := terms[2]; kept.state != termExited || kept.ring == nil {
		t.Errorf("%s: state %d after exit", kept.id, kept.state)
	}
}

// TestRegistryRetiresFinishedToolCalls: tool calls that never got a
// terminal retire alike, beyond maxFinished; unfinished ones never do.
func TestRegistryRetiresFinishedToolCalls(t *testing.T) {
	t.Parallel()
	r := newRegistry()
	pending := r.newCall(callScheduled, "other", "job")
	first := r.newCall(callAsking, "execute", "x")
	r.finish(first, acp.StatusFailed)
	for range maxFinished {
		r.finish(r.newCall(callRunning, "execute", "x"), acp.StatusFailed)
	}
	if first.state != callRetired || r.calls[first.id] != nil || len(r.finished) != maxFinished {
		t.Errorf("the oldest finished tool call: state %d; %d finished kept", first.state, len(r.finished))
	}
	if u := r.unfinished(); len(u) != 1 || u[0] != pending || r.calls[pending.id] == nil {
		t.Errorf("unfinished %v", u)
	}
}

// TestToolCallWireState: the status follows the state, and the cancel
// capability, once advertised, is cleared explicitly.
func TestToolCallWireState(t *testing.T) {
	t.Parallel()
	fg := &toolCall{id: "call_1", state: callAsking}
	fg.task = kindTask{asking{cancellable: false}} // the foreground's request ends with session/cancel
	bg := &toolCall{id: "call_2", state: callAsking}
	bg.task = kindTask{asking{cancellable: true}}
	sched := &toolCall{id: "call_3", state: callScheduled}
	sched.task = kindTask{&jobs.Job{}}
	tests := []struct {
		name   string
		c      *toolCall
		change func(c *toolCall)
		status string
		caps   string // "" = omitted
	}{
		{"foreground asking", fg, nil, "pending", ""},
		{"allowed in the foreground", fg, func(c *toolCall) { c.task, c.state = nil, callRunning }, "in_progress", ""},
		{"background asking", bg, nil, "pending", `{"cancel":{}}`},
		{"allowed in the background", bg, func(c *toolCall) { c.task, c.state = nil, callRunning }, "in_progress", "null"},
		{"and completed", bg, func(c *toolCall) { c.state, c.outcome = callDone, "completed" }, "completed", "null"},
		{"scheduled", sched, nil, "pending", `{"cancel":{}}`},
		{"cancelled", sched, func(c *toolCall) { c.state, c.outcome = callDone, "cancelled" }, "cancelled", "null"},
	}
	for _, tt := range tests {
		if tt.change != nil {
			tt.change(tt.c)
		}
		u := tt.c.update()
		if u.Status != tt.status || string(u.Capabilities) != tt.caps {
			t.Errorf("%s: status %q caps %q, want %q %q", tt.name, u.Status, u.Capabilities, tt.status, tt.caps)
		}
	}
}

// TestExitedTerminalUpdate: an exited terminal in one update, to send
// with its output as a replacement.
func TestExitedTerminalUpdate(t *testing.T) {
	t.Parallel()
	code := 3
	term := &terminal{id: "term_1", line: "x", cwd: "/", ring: outputbuf.New(64), exit: &acp.ExitStatus{ExitCode: &code}}
	if got, want := mustJSON(term.exitedUpdate()), `{"sessionUpdate":"terminal_update","terminalId":"term_1","command":"x","cwd":"/","size":{"cols":0,"rows":0},"exitStatus":{"exitCode":3},"capabilities":null}`; got != want {
		t.Errorf("exited update\n%s\nwant\n%s", got, want)
	}
}

// asking is a task that waits for permission, as TestToolCallWireState
// needs it: cancellable in the background only (supervisor/approval's
// tests check that an approval says so).
type asking struct{ cancellable bool }

func (a asking) Listing(time.Time) string            { return "" }
func (a asking) Cancellable() bool                   { return a.cancellable }
func (a asking) Cancel()                             {}
func (a asking) Close()                              {}
func (a asking) HandOver() (kind string, frozen any) { return "", nil }
