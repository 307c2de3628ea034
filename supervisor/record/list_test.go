package record

import (
	"errors"
	"fmt"
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
