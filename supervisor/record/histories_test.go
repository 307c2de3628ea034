package record

import (
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/journal"
)

// session/resume of a past session is checked against the history before
// the session is locked: unknown is -32002, another cwd -32602, and the
// request's own checks come last.
func TestResumeChecks(t *testing.T) {
	t.Parallel()
	store := open(t)
	New(store, "sess_1").Create("/p")
	if err := store.Flush(); err != nil {
		t.Fatal(err)
	}
	hs := Histories{Store: store}
	if !hs.Has("sess_1") || hs.Has("sess_2") || (Histories{}).Has("sess_1") {
		t.Error("Has does not say which sessions the history has")
	}
	refused := acp.InvalidParams("replayFrom: refused")
	for _, tt := range []struct {
		id, cwd string
		check   func() error
		code    int64
		says    string
	}{
		{"sess_2", "/p", nil, acp.CodeNotFound, "sess_2"},
		{"sess_1", "/q", func() error { return refused }, acp.CodeInvalidParams, "cwd"},
		{"sess_1", "/p", func() error { return refused }, acp.CodeInvalidParams, "replayFrom"},
	} {
		var e *acp.Error
		_, err := hs.Resume(&acp.ResumeSessionRequest{SessionID: tt.id, Cwd: tt.cwd}, tt.check)
		if !errors.As(err, &e) || e.Code != tt.code || !strings.Contains(e.Message, tt.says) {
			t.Errorf("resume %s in %s: %v, want %d about %s", tt.id, tt.cwd, err, tt.code, tt.says)
		}
	}
	h, err := hs.Resume(&acp.ResumeSessionRequest{SessionID: "sess_1", Cwd: "/p/"}, nil)
	if err != nil || h.ID != "sess_1" {
		t.Fatalf("resume sess_1: %v, %v", h, err)
	}
	if found, err := hs.Delete("sess_1"); err != nil || !found || hs.Has("sess_1") {
		t.Errorf("delete sess_1: %v, %v; still there: %v", found, err, hs.Has("sess_1"))
	}
	if found, err := hs.Delete("sess_1"); err != nil || found {
		t.Errorf("delete of a session the history does not have: %v, %v", found, err)
	}
}

// The notice of a resumed past session says why nothing of it runs: a
// warning naming the terminals whose end is unknown, else how it ended.
func TestPastNotice(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		name     string
		closed   bool
		lost     []string
		severity string
		says     string
	}{
		{"terminals lost", false, []string{"term_1", "term_3"}, acp.NoticeWarning, "term_1, term_3: did not outlive"},
		{"closed", true, nil, acp.NoticeInfo, "was closed at"},
		{"ended idle", false, nil, acp.NoticeInfo, "nothing of it was running"},
	} {
		h := &journal.History{Info: journal.Info{ID: "sess_1", UpdatedAt: at, Closed: tt.closed}}
		n := PastNotice(h, tt.lost)
		meta := n.Meta["shellagent"].(map[string]any)
		ids, _ := meta["terminalIds"].([]string)
		if n.Severity != tt.severity || !strings.Contains(n.Title+" "+n.Description, tt.says) ||
			meta["event"] != "session_revived" || ids == nil || len(ids) != len(tt.lost) {
			t.Errorf("%s: %+v", tt.name, n)
		}
	}
}

// A history read to be made live again: its items in order; a terminal
// with no exit recorded is lost, with exitStatus {}; a tool call not
// final is cancelled, and takes the terminals its content references
// that no tool call before it took; an update that cannot be decoded is
// skipped.
func TestReadPast(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := &journal.History{
		Updates: []journal.Item{
			{Update: []byte(`{"sessionUpdate":"user_message","messageId":"msg_1","content":[]}`)},
			{Item: "call_1", Update: []byte(`{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"in_progress","content":[{"type":"terminal","terminalId":"term_1"}]}`)},
			{Item: "term_1", At: at, Update: []byte(`{"sessionUpdate":"terminal_update","terminalId":"term_1","command":"sleep 9"}`)},
			{Item: "x", Update: []byte(`{"sessionUpdate":"nonsense"}`)},
			{Item: "call_2", Update: []byte(`{"sessionUpdate":"tool_call_update","toolCallId":"call_2","status":"completed","content":[{"type":"terminal","terminalId":"term_1"},{"type":"terminal","terminalId":"term_2"}]}`)},
			{Item: "term_2", Update: []byte(`{"sessionUpdate":"terminal_update","terminalId":"term_2","command":"true","exitStatus":{"exitCode":0}}`)},
		},
		Terminals: map[string]*journal.Output{"term_1": {Data: []byte("out"), Written: 10}},
	}
	var logged strings.Builder
	p := ReadPast(h, slog.New(slog.NewTextHandler(&logged, nil)))
	if len(p.Items) != 5 || p.Items[0].Message == nil || !strings.Contains(logged.String(), "skipped") {
		t.Fatalf("%d items, the first %+v; logged %q", len(p.Items), p.Items[0], logged.String())
	}
	c1, t1, c2, t2 := p.Items[1].Call, p.Items[2].Terminal, p.Items[3].Call, p.Items[4].Terminal
	if c1.Outcome != acp.StatusCancelled || len(c1.Terminals) != 1 || c1.Terminals[0] != t1 {
		t.Errorf("call_1: %q with %v", c1.Outcome, c1.Terminals)
	}
	if c2.Outcome != acp.StatusCompleted || len(c2.Terminals) != 1 || c2.Terminals[0] != t2 {
		t.Errorf("call_2: %q with %v", c2.Outcome, c2.Terminals)
	}
	if !t1.Lost || t1.Exit == nil || !reflect.DeepEqual(*t1.Exit, acp.ExitStatus{}) || !t1.Started.Equal(at) || t1.Output.Total() != 10 {
		t.Errorf("term_1: lost %v, exit %+v, started %v, written %d", t1.Lost, t1.Exit, t1.Started, t1.Output.Total())
	}
	if t2.Lost || t2.Exit.ExitCode == nil || t2.Output.Total() != 0 {
		t.Errorf("term_2: lost %v, exit %+v", t2.Lost, t2.Exit)
	}
}

// A session whose file cannot be adopted after an upgrade (here, live in
// another Store: its lock is held) keeps no more history, said in the
// log, as one whose file cannot be read; before, its Recorder went on
// writing to a file it did not hold.
func TestThawOfAFileNotAdopted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, err := journal.Open(journal.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	New(holder, "sess_1").Create("/p")
	if err := holder.Flush(); err != nil {
		t.Fatal(err)
	}
	store, err := journal.Open(journal.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var log strings.Builder
	hs := Histories{Store: store, Log: slog.New(slog.NewTextHandler(&log, nil))}
	if !hs.Has("sess_1") {
		t.Fatal("the second store does not list sess_1")
	}
	if d := hs.Thaw("sess_1", &Frozen{Items: map[string]json.RawMessage{}}); !d.off() {
		t.Error("a session whose file is live elsewhere records after an upgrade")
	}
	if !strings.Contains(log.String(), "sess_1") || !strings.Contains(log.String(), "keeps no more") {
		t.Errorf("the log says %q, want a warning about sess_1's history", log.String())
	}
}
