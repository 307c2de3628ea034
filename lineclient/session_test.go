package lineclient

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"shellagent/internal/clientview"
)

// sessionWith builds a session from terminals ("id" running, "id=exit"
// exited) and tool calls ("id:status" or "id:status>term").
func sessionWith(state string, bg []clientview.Item, reported bool, terms []string, calls []string) *session {
	s := newSession("s")
	s.State, s.Background, s.Reported = state, bg, reported
	for _, id := range terms {
		t := &clientview.Terminal{ID: id, Command: "cmd " + id}
		if running, ok := strings.CutSuffix(id, "=exit"); ok {
			t.ID, t.Command, t.Exit = running, "cmd "+running, &clientview.ExitStatus{}
		}
		s.Terminals[t.ID] = t
	}
	for _, spec := range calls {
		c := &clientview.ToolCall{Kind: "other", Title: "job"}
		c.ID, c.Status, _ = strings.Cut(spec, ":")
		if status, ref, ok := strings.Cut(c.Status, ">"); ok {
			c.Status, c.Terminals = status, []string{ref}
		}
		s.Calls[c.ID] = c
	}
	return s
}

func termItem(id string) clientview.Item { return clientview.Item{Type: "terminal", TerminalID: id} }
func call(id string) clientview.Item     { return clientview.Item{Type: "tool_call", ToolCallID: id} }

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
		{"a terminal and a job", sessionWith("idle", []clientview.Item{termItem("term_1"), call("call_2")}, true, []string{"term_1"}, []string{"call_2:pending"}),
			"background: term_1 (cmd term_1), call_2 (job, pending)",
			"closing the session will stop 2 background items: term_1 (cmd term_1), call_2 (job, pending)"},
		{"only scheduled work", sessionWith("idle", []clientview.Item{call("call_2")}, true, nil, []string{"call_2:pending"}),
			"background: call_2 (job, pending); idle, with work scheduled",
			"closing the session will stop 1 background item: call_2 (job, pending)"},
		{"an unknown item counts", sessionWith("idle", []clientview.Item{{Type: "_future"}}, true, nil, nil),
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
	s := sessionWith("idle", []clientview.Item{termItem("term_1"), call("call_2"), termItem("term_3")}, true,
		[]string{"term_1", "term_3=exit"}, []string{"call_2:pending", "call_4:completed>term_1", "call_5:in_progress>term_1"})
	want := []string{"call_2 cancelled by the close", "call_5 cancelled by the close", "term_1 stopped by the close: exit status unknown"}
	if got := s.closed(); !slices.Equal(got, want) {
		t.Errorf("closed() = %q, want %q", got, want)
	}
	if s.Terminals["term_1"].Exit == nil || s.Calls["call_2"].Status != "cancelled" || s.Calls["call_4"].Status != "completed" {
		t.Errorf("state after close: term_1 %v, call_2 %s, call_4 %s", s.Terminals["term_1"].Exit, s.Calls["call_2"].Status, s.Calls["call_4"].Status)
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
