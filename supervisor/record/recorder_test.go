package record

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"shellagent/acp"
	"shellagent/internal/journal"
	"shellagent/protocol"
)

// patch applies a tool_call_update or terminal_update as a client does:
// the fields it sets replace those of the state before, the others stay;
// with no state before, it is the whole state; a message, a state_update
// or a notice is never a patch.
func TestPatch(t *testing.T) {
	t.Parallel()
	zero := 0
	call := &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "make", Kind: "execute", Status: acp.StatusPending}
	term := &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1", Command: "make", Cwd: "/p", Size: &acp.TerminalSize{Cols: 80, Rows: 24}}
	msg := &acp.Message{SessionUpdate: acp.KindAgentMessage, MessageID: "msg_1"}
	tests := []struct {
		name    string
		prev, u acp.Update
		want    string
	}{
		{"a new tool call is its update", nil, call,
			`{"sessionUpdate":"tool_call_update","toolCallId":"call_1","title":"make","kind":"execute","status":"pending"}`},
		{"a tool call's status patched", call, &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Status: acp.StatusInProgress, Content: []acp.ToolCallContent{acp.TerminalContent("term_1")}},
			`{"sessionUpdate":"tool_call_update","toolCallId":"call_1","title":"make","kind":"execute","status":"in_progress","content":[{"type":"terminal","terminalId":"term_1"}]}`},
		{"a tool call's title and output patched", call, &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "make test", RawOutput: "done"},
			`{"sessionUpdate":"tool_call_update","toolCallId":"call_1","title":"make test","kind":"execute","status":"pending","rawOutput":"done"}`},
		{"a new terminal is its update", nil, term,
			`{"sessionUpdate":"terminal_update","terminalId":"term_1","command":"make","cwd":"/p","size":{"cols":80,"rows":24}}`},
		{"a terminal's exit patched", term, &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1", ExitStatus: &acp.ExitStatus{ExitCode: &zero}},
			`{"sessionUpdate":"terminal_update","terminalId":"term_1","command":"make","cwd":"/p","size":{"cols":80,"rows":24},"exitStatus":{"exitCode":0}}`},
		{"a terminal's size patched", term, &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1", Size: &acp.TerminalSize{Cols: 120, Rows: 40}},
			`{"sessionUpdate":"terminal_update","terminalId":"term_1","command":"make","cwd":"/p","size":{"cols":120,"rows":40}}`},
		{"a state of another kind is not patched", call, term,
			`{"sessionUpdate":"terminal_update","terminalId":"term_1","command":"make","cwd":"/p","size":{"cols":80,"rows":24}}`},
		{"a message is whole", call, msg,
			`{"sessionUpdate":"agent_message","messageId":"msg_1","content":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := encode(t, tt.prev)
			got := patch(tt.prev, tt.u)
			if s := encode(t, got); s != tt.want {
				t.Errorf("patch = %s\nwant    %s", s, tt.want)
			}
			if after := encode(t, tt.prev); after != before {
				t.Errorf("patch changed prev: %s, was %s", after, before)
			}
			if got == tt.u && tt.u != acp.Update(msg) {
				t.Error("patch returned u itself, not a copy")
			}
		})
	}
}

func encode(t *testing.T, u acp.Update) string {
	t.Helper()
	if u == nil {
		return "null"
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// open is a Store in a directory of the test's own, closed when it ends.
func open(t *testing.T) *journal.Store {
	t.Helper()
	store, err := journal.Open(journal.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// A Recorder records each item as its whole state, patched, once per
// change; forgotten items leave the history; Frozen and Thaw hand over
// what a reopening would read back.
func TestRecorder(t *testing.T) {
	t.Parallel()
	store := open(t)
	d := New(store, "sess_1")
	d.Create("/p")
	d.Message(&acp.Message{SessionUpdate: acp.KindUserMessage, MessageID: "msg_1", Content: []acp.ContentBlock{acp.TextBlock("make")}})
	d.Record(&acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "make", Status: acp.StatusPending})
	d.Record(&acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Status: acp.StatusCompleted})
	d.Record(&acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Status: acp.StatusCompleted}) // changes nothing
	d.Record(&acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_2", Title: "ls"})
	d.Forget("call_2")
	d.Record(&acp.Notice{SessionUpdate: acp.KindNotice, Severity: acp.NoticeInfo, Title: "live news"})
	d.Meta("/p", "make")
	if err := store.Flush(); err != nil {
		t.Fatal(err)
	}
	h, err := store.Load("sess_1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range h.Updates {
		got = append(got, it.Item+" "+string(it.Update))
	}
	want := []string{
		` {"sessionUpdate":"user_message","messageId":"msg_1","content":[{"type":"text","text":"make"}]}`,
		`call_1 {"sessionUpdate":"tool_call_update","toolCallId":"call_1","title":"make","status":"completed"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("the history holds\n%q\nwant\n%q", got, want)
	}
	if h.Title != "make" || h.Cwd != "/p" {
		t.Errorf("the history's title and cwd are %q, %q, want make, /p", h.Title, h.Cwd)
	}

	d.PromptOnce("k1", func(reply protocol.Reply) { reply(&acp.PromptResponse{MessageID: "msg_1"}, nil) }, func(any, error) {})
	f, err := d.Frozen()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	// The frozen form crosses an exec in place: its shape is the one the
	// image before wrote.
	if want := `{"Items":{"call_1":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","title":"make","status":"completed"}},"Keys":{"k1":"msg_1"}}`; string(b) != want {
		t.Errorf("frozen: %s\nwant    %s", b, want)
	}
	var back Frozen
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	thawed := Histories{Store: store}.Thaw("sess_1", &back)
	if f2, err := thawed.Frozen(); err != nil {
		t.Fatal(err)
	} else if b2, _ := json.Marshal(f2); string(b2) != string(b) {
		t.Errorf("thawed and frozen again: %s, want %s", b2, b)
	}
	ran := false
	thawed.PromptOnce("k1", func(protocol.Reply) { ran = true }, func(r any, err error) {
		if p, _ := r.(*acp.PromptResponse); p == nil || p.MessageID != "msg_1" || err != nil {
			t.Errorf("a repeated prompt after thawing is answered %v, %v, want msg_1", r, err)
		}
	})
	if ran {
		t.Error("a prompt accepted before the upgrade ran again")
	}
}

// With history off, a Recorder records nothing and has no frozen form,
// and a nil one records nothing either.
func TestRecorderOff(t *testing.T) {
	t.Parallel()
	for _, d := range []*Recorder{New(nil, "sess_1"), nil} {
		d.Create("/p")
		d.Record(&acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1"})
		d.Message(&acp.Message{SessionUpdate: acp.KindUserMessage, MessageID: "msg_1"})
		d.Forget("call_1")
		d.Config("foreground_timeout", "5s")
		d.Closed()
		if f, err := d.Frozen(); f != nil || err != nil {
			t.Errorf("frozen with history off: %v, %v", f, err)
		}
	}
	if d := (Histories{}).Thaw("sess_1", nil); !d.off() {
		t.Error("a session without history has one after an upgrade")
	}
}

// PromptOnce runs a prompt once per key: a retry while it is held gets
// its answer when it comes, a retry after gets the messageId at once, and
// a prompt that failed may run again.
func TestPromptOnce(t *testing.T) {
	t.Parallel()
	d := New(nil, "sess_1")
	var answers []string
	answer := func(who string) protocol.Reply {
		return func(r any, err error) {
			if p, ok := r.(*acp.PromptResponse); ok {
				answers = append(answers, who+" "+p.MessageID)
				return
			}
			answers = append(answers, who+" "+err.Error())
		}
	}
	var held protocol.Reply
	runs := 0
	run := func(reply protocol.Reply) { runs++; held = reply }
	d.PromptOnce("k1", run, answer("first"))
	d.PromptOnce("k1", run, answer("retry"))
	if runs != 1 || len(answers) != 0 {
		t.Fatalf("after a retry of a held prompt: %d runs, answers %q", runs, answers)
	}
	held(&acp.PromptResponse{MessageID: "msg_3"}, nil)
	d.PromptOnce("k1", run, answer("late"))
	if want := []string{"first msg_3", "retry msg_3", "late msg_3"}; runs != 1 || !slices.Equal(answers, want) {
		t.Errorf("%d runs, answers %q, want 1 and %q", runs, answers, want)
	}

	answers = nil
	d.PromptOnce("k2", run, answer("first"))
	held(nil, errors.New("refused"))
	d.PromptOnce("k2", run, answer("again"))
	held(&acp.PromptResponse{MessageID: "msg_4"}, nil)
	if want := []string{"first refused", "again msg_4"}; runs != 3 || !slices.Equal(answers, want) {
		t.Errorf("a failed prompt: %d runs, answers %q, want 3 and %q", runs, answers, want)
	}
}
