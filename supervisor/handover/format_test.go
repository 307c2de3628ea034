package handover

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/journal"
	"shellagent/internal/stack"
	"shellagent/ptyio"
	"shellagent/supervisor/record"
	"shellagent/supervisor/terminput"
)

// The state an upgrade in place hands over crosses the exec: the old
// image writes it and the new one reads it, so its bytes are the
// upgrade's format. Every field is set here, and the JSON must be the
// one in testdata/state.json (compacted) byte for byte; read back and
// written again, that JSON comes out the same. The numbers of a Call's
// and a Terminal's State are the supervisor's (its TestHandoverStates).
func TestFormat(t *testing.T) {
	golden, err := os.ReadFile("testdata/state.json")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, golden); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(everyField())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("the handed-over state is written as\n%s\nwant (testdata/state.json)\n%s", got, want.Bytes())
	}
	var back State
	if err := json.Unmarshal(want.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if again, err := json.Marshal(back); err != nil || !bytes.Equal(again, want.Bytes()) {
		t.Errorf("testdata/state.json read back and written again is\n%s (%v)", again, err)
	}
}

// everyField is a handed-over state with every field of the format set.
func everyField() State {
	at := func(s int) time.Time { return time.Date(2026, 12, 2, 13, 0, s, 0, time.UTC) }
	code := 3
	return State{
		FrozenAt: at(1), Frozen: at(2), Flushed: at(3), Output: 0, Created: 4, Closed: []string{"sess_1"},
		Sessions: []Session{{
			ID: "sess_2", Cwd: "/p", Title: "t", FgState: acp.StateRunning,
			Settings: Settings{
				ForegroundTimeout: 5 * time.Second, KillGrace: time.Second,
				Ask: true, ClientChecks: true, Notify: terminput.NotifyAll,
			},
			UpdatedAt: at(4), Detached: at(6), Expires: at(7), Messages: 7, Seq: map[string]int{"call": 2, "term": 2},
			History: []Entry{
				{Msg: &acp.Message{SessionUpdate: acp.KindUserMessage, MessageID: "msg_1", Content: []acp.ContentBlock{acp.TextBlock("ls")}}},
				{Call: "call_1"}, {Term: "term_1"}, {},
			},
			Calls: []Call{
				{
					ID: "call_1", Title: "ls", Kind: "execute", Outcome: "completed", State: 2,
					Input: map[string]any{"command": "ls"}, Output: "out",
					Content: []acp.ToolCallContent{acp.TerminalContent("term_1")}, Caps: acp.CapsCancel,
					Term: "term_1", Hist: 1,
				},
				{
					ID: "call_2", Title: "/after 1h echo", Kind: "other", State: 1, Hist: 2,
					Task: Task{"Job": json.RawMessage(`{"Line":"echo"}`)},
				},
			},
			Terminals: []Terminal{{
				ID: "term_1", Line: "ls", Cwd: "/p", Call: "call_1", Size: ptyio.Size{Cols: 80, Rows: 24},
				Started: at(5), State: 1,
				Returned: &ptyio.Status{Exited: true, Code: 3}, Exit: &acp.ExitStatus{ExitCode: &code, Signal: "SIGTERM"},
				Hist: 3, Cap: 1024, Output: 10, Len: 20, End: 30,
				Live: &Process{Pid: 99, Master: 1, Shell: 2, Group: 5, Tty: "/dev/pts/3"},
			}},
			Exited: []string{"term_0"}, Finished: []string{"call_0"},
			List: []Entry{{Term: "term_1"}, {Call: "call_2"}},
			Stack: &Stack{
				File:     &stack.Stack{File: "/p/shellagent.toml", Dir: "/p"},
				Names:    []string{"web"},
				Services: map[string]string{"web": "call_3"},
			},
			Durable: &record.Frozen{
				Items: map[string]json.RawMessage{"call_1": json.RawMessage(`{"status":"completed"}`)},
				Keys:  map[string]string{"k": "msg_1"},
				File: &journal.Handed{
					Size: 100, ModTime: 200, Inode: 300, Terms: map[string][3]int64{"term_1": {1, 2, 3}},
					Items: map[string]int{"call_1": 4}, Dead: 5, Cwd: "/p", Title: "t", Last: at(6),
				},
			},
		}},
	}
}
