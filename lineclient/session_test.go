package lineclient

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDecodeBackground(t *testing.T) {
	tests := []struct {
		raw      string
		n        int
		reported bool
	}{
		{``, 0, false},
		{`null`, 0, false},
		{`[]`, 0, true},
		{`[{"type":"terminal","terminalId":"term_1"},{"type":"tool_call","toolCallId":"call_2"}]`, 2, true},
		{`[{"type":"_future","anything":1}]`, 1, true},          // unknown items still count
		{`[{"type":"terminal"}]`, 0, false},                     // a damaged known item: unreported
		{`{"type":"terminal","terminalId":"term_1"}`, 0, false}, // not an array
	}
	for _, tt := range tests {
		items, reported := decodeBackground(json.RawMessage(tt.raw))
		if len(items) != tt.n || reported != tt.reported {
			t.Errorf("decodeBackground(%s) = %v, %v; want %d items, reported %v", tt.raw, items, reported, tt.n, tt.reported)
		}
	}
}

// sessionWith builds a session from terminals ("id" running, "id=exit"
// exited) and tool calls ("id:status" or "id:status>term").
func sessionWith(state string, bg []bgItem, reported bool, terms []string, calls []string) *session {
	s := newSession("s")
	s.state, s.bg, s.bgReported = state, bg, reported
	for _, id := range terms {
		t := &terminal{id: id, command: "cmd " + id}
		if running, ok := strings.CutSuffix(id, "=exit"); ok {
			t.id, t.command, t.exit = running, "cmd "+running, &exitStatus{}
		}
		s.terminals[t.id] = t
	}
	for _, spec := range calls {
		c := &toolCall{kind: "other", title: "job"}
		c.id, c.status, _ = strings.Cut(spec, ":")
		if status, ref, ok := strings.Cut(c.status, ">"); ok {
			c.status, c.terminals = status, []string{ref}
		}
		s.calls[c.id] = c
	}
	return s
}

func termItem(id string) bgItem { return bgItem{Type: "terminal", TerminalID: id} }
func call(id string) bgItem     { return bgItem{Type: "tool_call", ToolCallID: id} }

func TestAbandoned(t *testing.T) {
	tests := []struct {
		name     string
		s        *session
		abandons []string
	}{
		{"finished work is never abandoned",
			sessionWith("idle", nil, true, []string{"term_1=exit"}, []string{"call_1:completed", "call_2:failed", "call_3:cancelled"}), nil},
		{"unfinished work left out of the list while idle",
			sessionWith("idle", nil, true, []string{"term_1"}, []string{"call_1:in_progress", "call_2:pending"}), []string{"call_1", "call_2", "term_1"}},
		{"listed work is live",
			sessionWith("idle", []bgItem{termItem("term_1"), call("call_2")}, true, []string{"term_1"}, []string{"call_2:pending"}), nil},
		{"a tool call that references a listed terminal is live",
			sessionWith("idle", []bgItem{termItem("term_1")}, true, []string{"term_1"}, []string{"call_1:in_progress>term_1"}), nil},
		{"nothing is abandoned while running",
			sessionWith("running", nil, true, []string{"term_1"}, []string{"call_1:in_progress"}), nil},
		{"nothing is abandoned while the list is not reported",
			sessionWith("idle", nil, false, []string{"term_1"}, []string{"call_1:in_progress"}), nil},
	}
	for _, tt := range tests {
		if got := tt.s.newlyAbandoned(); !slices.Equal(got, tt.abandons) {
			t.Errorf("%s: abandoned %v, want %v", tt.name, got, tt.abandons)
		}
		if again := tt.s.newlyAbandoned(); len(again) > 0 {
			t.Errorf("%s: reported again: %v", tt.name, again)
		}
	}
}

func TestListingAndCloseWarning(t *testing.T) {
	tests := []struct {
		name    string
		s       *session
		listing string
		warning string
	}{
		{"quiet", sessionWith("idle", nil, true, nil, nil),
			"background: none; the session is quiet", ""},
		{"empty while running", sessionWith("running", nil, true, nil, nil),
			"background: none", ""},
		{"not reported", sessionWith("idle", nil, false, nil, nil),
			"background: not reported (what runs in the background is unknown)",
			"the agent does not report its background work: closing the session stops whatever still runs"},
		{"a terminal and a job", sessionWith("idle", []bgItem{termItem("term_1"), call("call_2")}, true, []string{"term_1"}, []string{"call_2:pending"}),
			"background: term_1 (cmd term_1), call_2 (job, pending)",
			"closing the session will stop 2 background items: term_1 (cmd term_1), call_2 (job, pending)"},
		{"only scheduled work", sessionWith("idle", []bgItem{call("call_2")}, true, nil, []string{"call_2:pending"}),
			"background: call_2 (job, pending); idle, with work scheduled",
			"closing the session will stop 1 background item: call_2 (job, pending)"},
		{"an unknown item counts", sessionWith("idle", []bgItem{{Type: "_future"}}, true, nil, nil),
			"background: an item of type _future",
			"closing the session will stop 1 background item: an item of type _future"},
	}
	for _, tt := range tests {
		if got := tt.s.listing(); got != tt.listing {
			t.Errorf("%s: listing %q, want %q", tt.name, got, tt.listing)
		}
		if got := tt.s.closeWarning(); got != tt.warning {
			t.Errorf("%s: warning %q, want %q", tt.name, got, tt.warning)
		}
	}
}

// After a close answered without final updates, listed work counts as
// stopped: tool calls cancelled, terminals exited with no known status.
func TestClosed(t *testing.T) {
	s := sessionWith("idle", []bgItem{termItem("term_1"), call("call_2"), termItem("term_3")}, true,
		[]string{"term_1", "term_3=exit"}, []string{"call_2:pending", "call_4:completed>term_1", "call_5:in_progress>term_1"})
	want := []string{"call_2 cancelled by the close", "call_5 cancelled by the close", "term_1 stopped by the close: exit status unknown"}
	if got := s.closed(); !slices.Equal(got, want) {
		t.Errorf("closed() = %q, want %q", got, want)
	}
	if s.terminals["term_1"].exit == nil || s.calls["call_2"].status != "cancelled" || s.calls["call_4"].status != "completed" {
		t.Errorf("state after close: term_1 %v, call_2 %s, call_4 %s", s.terminals["term_1"].exit, s.calls["call_2"].status, s.calls["call_4"].status)
	}
}

func TestKillGraceOf(t *testing.T) {
	options := func(v string) json.RawMessage {
		return json.RawMessage(`[{"type":"select","configId":"foreground_timeout","currentValue":"1s"},{"type":"select","configId":"kill_grace","currentValue":"` + v + `"}]`)
	}
	tests := []struct {
		name    string
		options json.RawMessage
		set     string
		want    time.Duration
		ok      bool
	}{
		{"the list says", options("10s"), "", 10 * time.Second, true},
		{"the list wins over the value set", options("30s"), "1s", 30 * time.Second, true},
		{"no list: the value set", nil, "1s", time.Second, true},
		{"a list without kill_grace: the value set", json.RawMessage(`[{"configId":"x","currentValue":"5s"}]`), "1s", time.Second, true},
		{"nothing known", nil, "", 0, false},
		{"not a duration", options("soon"), "", 0, false},
	}
	for _, tt := range tests {
		got, ok := killGraceOf(tt.options, tt.set)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: killGraceOf = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
