package record

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
)

// session/list answers a page at a time, the most recently updated
// first: nextCursor leads to the rest, each session once; a cursor of
// its own making is refused, and cwd filters.
func TestListPages(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var live []Live
	for i := range ListPage + 2 {
		cwd := "/p"
		if i == 0 {
			cwd = "/q/"
		}
		live = append(live, Live{ID: fmt.Sprintf("sess_%d", i), Cwd: cwd, UpdatedAt: at.Add(time.Duration(i%7) * time.Second), Attached: i%2 == 0, Terminals: []string{}})
	}
	var hs Histories
	first, err := hs.List(&acp.ListSessionsRequest{}, live)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Sessions) != ListPage || first.NextCursor == nil {
		t.Fatalf("the first page has %d sessions and cursor %v, want %d and a cursor", len(first.Sessions), first.NextCursor, ListPage)
	}
	second, err := hs.List(&acp.ListSessionsRequest{Cursor: first.NextCursor}, live)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Sessions) != 2 || second.NextCursor != nil {
		t.Fatalf("the second page has %d sessions and cursor %v, want 2 and none", len(second.Sessions), second.NextCursor)
	}
	seen := map[string]bool{}
	prev := "9999"
	for _, s := range append(first.Sessions, second.Sessions...) {
		if seen[s.SessionID] {
			t.Errorf("%s is listed twice", s.SessionID)
		}
		seen[s.SessionID] = true
		if s.UpdatedAt > prev {
			t.Errorf("%s (updated %s) comes after one updated %s", s.SessionID, s.UpdatedAt, prev)
		}
		prev = s.UpdatedAt
		state := s.Meta["shellagent"].(map[string]any)["state"]
		var n int
		if _, err := fmt.Sscanf(s.SessionID, "sess_%d", &n); err != nil || state != map[bool]string{true: attached, false: detached}[n%2 == 0] {
			t.Errorf("%s is listed %v", s.SessionID, state)
		}
	}

	cwd := "/q"
	only, err := hs.List(&acp.ListSessionsRequest{Cwd: &cwd}, live)
	if err != nil || len(only.Sessions) != 1 || only.Sessions[0].SessionID != "sess_0" || only.Sessions[0].UpdatedAt != "2026-01-02T03:04:05Z" {
		t.Errorf("session/list of cwd /q: %+v, %v, want sess_0 alone", only, err)
	}

	for _, bad := range []string{"", "x", "MjAyNg"} {
		var e *acp.Error
		if _, err := hs.List(&acp.ListSessionsRequest{Cursor: &bad}, live); !errors.As(err, &e) || e.Code != acp.CodeInvalidParams {
			t.Errorf("cursor %q: %v, want -32602", bad, err)
		}
	}
}

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
