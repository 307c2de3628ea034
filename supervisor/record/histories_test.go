package record

import (
	"errors"
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
	if err := hs.Delete("sess_1"); err != nil || hs.Has("sess_1") {
		t.Errorf("delete sess_1: %v; still there: %v", err, hs.Has("sess_1"))
	}
	if err := hs.Delete("sess_1"); err != nil {
		t.Errorf("delete of a session the history does not have: %v", err)
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
