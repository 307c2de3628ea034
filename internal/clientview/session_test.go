package clientview

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// updateOf decodes an update as it comes on the wire.
func updateOf(t *testing.T, js string) *Update {
	t.Helper()
	var u Update
	if err := json.Unmarshal([]byte(js), &u); err != nil {
		t.Fatalf("decoding %s: %v", js, err)
	}
	return &u
}

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
		items, reported := DecodeBackground(json.RawMessage(tt.raw))
		if len(items) != tt.n || reported != tt.reported {
			t.Errorf("DecodeBackground(%s) = %v, %v; want %d items, reported %v", tt.raw, items, reported, tt.n, tt.reported)
		}
	}
}

// Each snapshot replaces the state and the list; the list has changed
// when its items, their order or whether it is reported differ.
func TestApplyState(t *testing.T) {
	s := New("s")
	steps := []struct {
		update   string
		changed  bool
		state    string
		reported bool
		listed   []string
	}{
		{`{"sessionUpdate":"state_update","state":"running","background":[]}`, false, "running", true, nil},
		{`{"sessionUpdate":"state_update","state":"running","background":[{"type":"terminal","terminalId":"term_1"}]}`, true, "running", true, []string{"term_1"}},
		{`{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn","background":[{"type":"terminal","terminalId":"term_1"}]}`, false, "idle", true, []string{"term_1"}},
		{`{"sessionUpdate":"state_update","state":"idle","background":[{"type":"tool_call","toolCallId":"term_1"}]}`, true, "idle", true, []string{"term_1"}},
		{`{"sessionUpdate":"state_update","state":"idle","background":[{"type":"tool_call","toolCallId":"term_1"},{"type":"terminal","terminalId":"term_2"}]}`, true, "idle", true, []string{"term_1", "term_2"}},
		{`{"sessionUpdate":"state_update","state":"idle","background":[{"type":"terminal","terminalId":"term_2"},{"type":"tool_call","toolCallId":"term_1"}]}`, true, "idle", true, []string{"term_1", "term_2"}},
		{`{"sessionUpdate":"state_update","state":"idle","background":null}`, true, "idle", false, nil},
		{`{"sessionUpdate":"state_update","state":"idle"}`, false, "idle", false, nil},
		{`{"sessionUpdate":"state_update","state":"idle","background":[]}`, true, "idle", true, nil},
	}
	for i, st := range steps {
		if got := s.ApplyState(updateOf(t, st.update)); got != st.changed {
			t.Errorf("step %d: changed = %v, want %v", i, got, st.changed)
		}
		if s.State != st.state || s.Reported != st.reported {
			t.Errorf("step %d: state %q, reported %v; want %q, %v", i, s.State, s.Reported, st.state, st.reported)
		}
		for _, id := range []string{"term_1", "term_2"} {
			if want := slices.Contains(st.listed, id); s.Listed(id) != want {
				t.Errorf("step %d: Listed(%s) = %v, want %v", i, id, !want, want)
			}
		}
	}
	if !s.Quiet() {
		t.Error("idle with an empty reported list: not quiet")
	}
}

// A terminal is created by its first update, patched by the next, and
// ends once: its first exit status is the one kept.
func TestApplyTerminal(t *testing.T) {
	s := New("s")
	steps := []struct {
		update  string
		isNew   bool
		command string
		ended   bool
		exit    string // "" while it runs
		live    int
	}{
		{`{"sessionUpdate":"terminal_update","terminalId":"term_1","command":"make"}`, true, "make", false, "", 1},
		{`{"sessionUpdate":"terminal_update","terminalId":"term_2"}`, true, "", false, "", 2},
		{`{"sessionUpdate":"terminal_update","terminalId":"term_1","size":{"cols":80,"rows":24}}`, false, "make", false, "", 2},
		{`{"sessionUpdate":"terminal_update","terminalId":"term_1","command":"make -j2","exitStatus":{"exitCode":2}}`, false, "make -j2", true, "exit 2", 1},
		{`{"sessionUpdate":"terminal_update","terminalId":"term_1","exitStatus":{"signal":"SIGKILL"}}`, false, "make -j2", false, "exit 2", 1},
		{`{"sessionUpdate":"terminal_update","terminalId":"term_3","command":"true","exitStatus":{"exitCode":0,"signal":"SIGTERM"}}`, true, "true", true, "signal SIGTERM, exit 0", 1},
		{`{"sessionUpdate":"terminal_update","terminalId":"term_2","exitStatus":{}}`, false, "", true, "exit status unknown", 0},
	}
	for i, st := range steps {
		u := updateOf(t, st.update)
		tm, isNew := s.ApplyTerminal(u)
		if tm.ID != u.TerminalID || isNew != st.isNew || tm.Command != st.command {
			t.Errorf("step %d: %s new %v command %q; want %s new %v command %q", i, tm.ID, isNew, tm.Command, u.TerminalID, st.isNew, st.command)
		}
		if st.ended && tm.Exit != nil {
			t.Errorf("step %d: the exit was applied before ApplyExit", i)
		}
		if ended := s.ApplyExit(tm, u.ExitStatus); ended != st.ended {
			t.Errorf("step %d: ended %v, want %v", i, ended, st.ended)
		}
		exit := ""
		if tm.Exit != nil {
			exit = tm.Exit.String()
		}
		if exit != st.exit || s.Live() != st.live {
			t.Errorf("step %d: exit %q, live %d; want %q, %d", i, exit, s.Live(), st.exit, st.live)
		}
	}
}

// Each chunk is decoded on its own; a snapshot's bytes replace the
// output, with the bytes the agent dropped before it.
func TestOutput(t *testing.T) {
	tests := []struct {
		update  string
		data    string
		dropped int64
		err     string // what it begins with
	}{
		{`{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"aGVsbG8K"}`, "hello\n", 0, ""},
		{`{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":""}`, "", 0, ""},
		{`{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"G1sxbQ=="}`, "\x1b[1m", 0, ""},
		{`{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"not base64!"}`, "", 0, "term_1: output that is not base64: "},
		{`{"sessionUpdate":"terminal_update","terminalId":"term_2","output":{"data":"b25lCnR3bwo="}}`, "one\ntwo\n", 0, ""},
		{`{"sessionUpdate":"terminal_update","terminalId":"term_2","output":{"data":"dHdvCg==","_meta":{"shellagent":{"droppedBytes":4096}}}}`, "two\n", 4096, ""},
		{`{"sessionUpdate":"terminal_update","terminalId":"term_2","output":{"data":"dHdvCg","_meta":{"other":1}}}`, "", 0, "term_2: output that is not base64: "},
	}
	for _, tt := range tests {
		u := updateOf(t, tt.update)
		var data []byte
		var dropped int64
		var err error
		if u.Output != nil {
			data, err = u.Output.Decode(u.TerminalID)
			dropped = u.Output.Dropped()
		} else {
			data, err = u.Chunk()
		}
		got := ""
		if err != nil {
			got = err.Error()
		}
		if string(data) != tt.data || dropped != tt.dropped || !strings.HasPrefix(got, tt.err) || (got == "") != (tt.err == "") {
			t.Errorf("%s: %q, dropped %d, error %q; want %q, %d, %q", tt.update, data, dropped, got, tt.data, tt.dropped, tt.err)
		}
	}
}

// A tool call is created by its first update and patched by the next:
// omitted fields stay, the content's terminal references replace the
// last ones when it has some.
func TestApplyToolCall(t *testing.T) {
	s := New("s")
	steps := []struct {
		update              string
		isNew               bool
		old                 string
		title, kind, status string
		terminals           []string
	}{
		{`{"sessionUpdate":"tool_call_update","toolCallId":"call_1","title":"make","kind":"execute","status":"pending"}`, true, "", "make", "execute", "pending", nil},
		{`{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"in_progress","content":[{"type":"terminal","terminalId":"term_1"}]}`, false, "pending", "make", "execute", "in_progress", []string{"term_1"}},
		{`{"sessionUpdate":"tool_call_update","toolCallId":"call_1","content":[{"type":"content","content":{"type":"text","text":"done"}}]}`, false, "in_progress", "make", "execute", "in_progress", []string{"term_1"}},
		{`{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"completed","title":"make all"}`, false, "in_progress", "make all", "execute", "completed", []string{"term_1"}},
		{`{"sessionUpdate":"tool_call","toolCallId":"call_2"}`, true, "", "", "", "", nil},
	}
	for i, st := range steps {
		tc, isNew, old := s.ApplyToolCall(updateOf(t, st.update))
		if isNew != st.isNew || old != st.old || tc.Title != st.title || tc.Kind != st.kind || tc.Status != st.status || !slices.Equal(tc.Terminals, st.terminals) {
			t.Errorf("step %d: new %v old %q: %+v; want new %v old %q title %q kind %q status %q terminals %v",
				i, isNew, old, *tc, st.isNew, st.old, st.title, st.kind, st.status, st.terminals)
		}
	}
	if !Final(s.Calls["call_1"].Status) || Final(s.Calls["call_2"].Status) {
		t.Errorf("final: call_1 %q, call_2 %q", s.Calls["call_1"].Status, s.Calls["call_2"].Status)
	}
}

// sessionWith builds a session from terminals ("id" running, "id=exit"
// exited) and tool calls ("id:status" or "id:status>term").
func sessionWith(state string, bg []Item, reported bool, terms []string, calls []string) *Session {
	s := New("s")
	s.State, s.Background, s.Reported = state, bg, reported
	for _, id := range terms {
		t := &Terminal{ID: id}
		if running, ok := strings.CutSuffix(id, "=exit"); ok {
			t.ID, t.Exit = running, &ExitStatus{}
		}
		s.Terminals[t.ID] = t
	}
	for _, spec := range calls {
		c := &ToolCall{Kind: "other", Title: "job"}
		c.ID, c.Status, _ = strings.Cut(spec, ":")
		if status, ref, ok := strings.Cut(c.Status, ">"); ok {
			c.Status, c.Terminals = status, []string{ref}
		}
		s.Calls[c.ID] = c
	}
	return s
}

func termItem(id string) Item { return Item{Type: "terminal", TerminalID: id} }
func call(id string) Item     { return Item{Type: "tool_call", ToolCallID: id} }

func TestNewlyAbandoned(t *testing.T) {
	tests := []struct {
		name     string
		s        *Session
		abandons []string
	}{
		{"finished work is never abandoned",
			sessionWith("idle", nil, true, []string{"term_1=exit"}, []string{"call_1:completed", "call_2:failed", "call_3:cancelled"}), nil},
		{"unfinished work left out of the list while idle",
			sessionWith("idle", nil, true, []string{"term_1"}, []string{"call_1:in_progress", "call_2:pending"}), []string{"call_1", "call_2", "term_1"}},
		{"listed work is live",
			sessionWith("idle", []Item{termItem("term_1"), call("call_2")}, true, []string{"term_1"}, []string{"call_2:pending"}), nil},
		{"a tool call that references a listed terminal is live",
			sessionWith("idle", []Item{termItem("term_1")}, true, []string{"term_1"}, []string{"call_1:in_progress>term_1"}), nil},
		{"a tool call with no status yet is not abandoned",
			sessionWith("idle", nil, true, nil, []string{"call_1:"}), nil},
		{"nothing is abandoned while running",
			sessionWith("running", nil, true, []string{"term_1"}, []string{"call_1:in_progress"}), nil},
		{"nothing is abandoned while the list is not reported",
			sessionWith("idle", nil, false, []string{"term_1"}, []string{"call_1:in_progress"}), nil},
	}
	for _, tt := range tests {
		if got := tt.s.NewlyAbandoned(); !slices.Equal(got, tt.abandons) {
			t.Errorf("%s: abandoned %v, want %v", tt.name, got, tt.abandons)
		}
		if again := tt.s.NewlyAbandoned(); len(again) > 0 {
			t.Errorf("%s: reported again: %v", tt.name, again)
		}
	}
}

func TestScheduledOnly(t *testing.T) {
	tests := []struct {
		name string
		s    *Session
		want bool
	}{
		{"pending and paused jobs", sessionWith("idle", []Item{call("call_1"), call("call_2")}, true, nil, []string{"call_1:pending", "call_2:paused"}), true},
		{"a job runs", sessionWith("idle", []Item{call("call_1"), call("call_2")}, true, nil, []string{"call_1:pending", "call_2:in_progress"}), false},
		{"a terminal runs", sessionWith("idle", []Item{call("call_1"), termItem("term_1")}, true, []string{"term_1"}, []string{"call_1:pending"}), false},
		{"running", sessionWith("running", []Item{call("call_1")}, true, nil, []string{"call_1:pending"}), false},
		{"nothing listed", sessionWith("idle", nil, true, nil, nil), false},
		{"a tool call the client has not seen", sessionWith("idle", []Item{call("call_9")}, true, nil, nil), false},
	}
	for _, tt := range tests {
		if got := tt.s.ScheduledOnly(); got != tt.want {
			t.Errorf("%s: ScheduledOnly() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// After a close answered without final updates, listed work counts as
// stopped: tool calls cancelled, terminals exited with no known status.
func TestClosed(t *testing.T) {
	s := sessionWith("idle", []Item{termItem("term_1"), call("call_2"), termItem("term_3")}, true,
		[]string{"term_1", "term_3=exit"}, []string{"call_2:pending", "call_4:completed>term_1", "call_5:in_progress>term_1"})
	stopped, cancelled := s.Closed()
	if !slices.Equal(stopped, []string{"term_1"}) || !slices.Equal(cancelled, []string{"call_2", "call_5"}) {
		t.Errorf("Closed() = %v, %v; want [term_1], [call_2 call_5]", stopped, cancelled)
	}
	if e := s.Terminals["term_1"].Exit; e == nil || e.String() != "exit status unknown" || s.Calls["call_2"].Status != "cancelled" || s.Calls["call_4"].Status != "completed" {
		t.Errorf("state after close: term_1 %v, call_2 %s, call_4 %s", e, s.Calls["call_2"].Status, s.Calls["call_4"].Status)
	}
	unreported := sessionWith("idle", nil, false, []string{"term_1"}, []string{"call_1:in_progress"})
	if stopped, cancelled := unreported.Closed(); stopped != nil || cancelled != nil {
		t.Errorf("Closed() with the list unreported = %v, %v; want nothing", stopped, cancelled)
	}
}

func TestContentText(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`{"type":"text","text":"hi"}`, "hi"},
		{`[{"type":"text","text":"a"},{"type":"image","data":"x"},{"type":"text","text":"b"}]`, "ab"},
		{`[{"type":"content","content":{"type":"text","text":"done"}},{"type":"terminal","terminalId":"term_1"}]`, "done"},
		{`"just a string"`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		if got := ContentText(json.RawMessage(tt.raw)); got != tt.want {
			t.Errorf("ContentText(%s) = %q, want %q", tt.raw, got, tt.want)
		}
	}
}
