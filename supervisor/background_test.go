package supervisor

import (
	"testing"

	"shellagent/acp"
)

// TestBackgroundListRules: the list refuses what the RFD rules forbid, and
// marks every change dirty so that a repeated state_update follows.
func TestBackgroundListRules(t *testing.T) {
	t.Parallel()
	var l backgroundList
	t1 := &terminal{id: "term_1"}
	t2 := &terminal{id: "term_2"}
	job := &toolCall{id: "call_1", state: callScheduled}
	ask := &toolCall{id: "call_2", state: callAsking}
	steps := []struct {
		name  string
		do    func()
		want  string // the list, as ids
		dirty bool
	}{
		{"a running terminal is listed", func() { l.add(listItem{term: t1}) }, "term_1", true},
		{"listed once", func() { l.add(listItem{term: t1}) }, "term_1", false},
		{"a tool call is listed after it", func() { l.add(listItem{call: job}) }, "term_1 call_1", true},
		{"a running terminal is not removed", func() { l.drop(listItem{term: t1}) }, "term_1 call_1", false},
		{"a pending tool call is not removed", func() { l.drop(listItem{call: job}) }, "term_1 call_1", false},
		{"a final tool call is not listed", func() { l.add(listItem{call: &toolCall{id: "call_9", state: callDone}}) }, "term_1 call_1", false},
		{"an exited terminal is not listed", func() { l.add(listItem{term: &terminal{id: "term_9", state: termExited}}) }, "term_1 call_1", false},
		{"background work waiting for permission", func() { l.add(listItem{call: ask}) }, "term_1 call_1 call_2", true},
		{"once it runs, its terminal takes its place", func() { l.replaceCall(ask, t2) }, "term_1 call_1 term_2", true},
		{"an exited terminal is removed", func() { t1.state = termExited; l.drop(listItem{term: t1}) }, "call_1 term_2", true},
		{"a final tool call is removed", func() { job.state = callDone; l.drop(listItem{call: job}) }, "term_2", true},
		{"removing twice changes nothing", func() { l.drop(listItem{call: job}) }, "term_2", false},
	}
	for _, step := range steps {
		l.dirty = false
		step.do()
		if got := ids(l.wire()); got != step.want || l.dirty != step.dirty {
			t.Errorf("%s: list %q dirty %v, want %q dirty %v", step.name, got, l.dirty, step.want, step.dirty)
		}
	}
}

func TestBackgroundListWire(t *testing.T) {
	t.Parallel()
	var l backgroundList
	if w := l.wire(); w == nil || mustJSON(w) != "[]" {
		t.Errorf("an empty list is %s, want []", mustJSON(w))
	}
	l.add(listItem{term: &terminal{id: "term_1"}})
	l.add(listItem{call: &toolCall{id: "call_1", state: callScheduled}})
	want := []acp.BackgroundItem{{Type: "terminal", TerminalID: "term_1"}, {Type: "tool_call", ToolCallID: "call_1"}}
	if got := mustJSON(l.wire()); got != mustJSON(want) {
		t.Errorf("list %s, want %s", got, mustJSON(want))
	}
}

func ids(b acp.Background) string {
	s := ""
	for i, it := range b {
		if i > 0 {
			s += " "
		}
		s += it.TerminalID + it.ToolCallID
	}
	return s
}
