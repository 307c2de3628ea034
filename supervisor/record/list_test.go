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
	if first.NextCursor == nil {
		t.Fatalf("the first page has %d sessions and no cursor", len(first.Sessions))
	}
	second, err := hs.List(&acp.ListSessionsRequest{Cursor: first.NextCursor}, live)
	if err != nil {
		t.Fatal(err)
	}
	all, err := CheckPages(first, second)
	if err != nil || len(all) != ListPage+2 {
		t.Fatalf("two pages of %d sessions: %d sessions, %v", ListPage+2, len(all), err)
	}
	for _, s := range all {
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

// CheckPages refuses each way a sequence of pages can break List's
// promise, and passes one that keeps it.
func TestCheckPages(t *testing.T) {
	t.Parallel()
	cursor := "c"
	full := func(from int) *acp.ListSessionsResponse {
		p := &acp.ListSessionsResponse{NextCursor: &cursor}
		for i := range ListPage {
			p.Sessions = append(p.Sessions, acp.SessionInfo{SessionID: fmt.Sprintf("sess_%d", from+i), UpdatedAt: "2026-01-02T03:04:05Z"})
		}
		return p
	}
	last := func(ids ...string) *acp.ListSessionsResponse {
		p := &acp.ListSessionsResponse{}
		for i, id := range ids {
			p.Sessions = append(p.Sessions, acp.SessionInfo{SessionID: id, UpdatedAt: fmt.Sprintf("2026-01-01T00:00:%02dZ", 10-i)})
		}
		return p
	}
	tests := []struct {
		pages []*acp.ListSessionsResponse
		n     int    // sessions returned
		want  string // in the error; "" for none
	}{
		{[]*acp.ListSessionsResponse{full(0), last("a", "b")}, ListPage + 2, ""},
		{[]*acp.ListSessionsResponse{last()}, 0, ""},
		{[]*acp.ListSessionsResponse{last("a"), last("b")}, 0, "page 1 of 2 has 1 sessions"},
		{[]*acp.ListSessionsResponse{full(0)}, 0, "the last page, 1, has a nextCursor"},
		{[]*acp.ListSessionsResponse{full(0), last("sess_3")}, 0, "sess_3 is listed twice"},
		{[]*acp.ListSessionsResponse{full(0), {Sessions: []acp.SessionInfo{{SessionID: "new", UpdatedAt: "2027-01-01T00:00:00Z"}}}}, 0, "new (updated 2027-01-01T00:00:00Z) comes after one updated 2026-01-02T03:04:05Z"},
	}
	for i, tc := range tests {
		all, err := CheckPages(tc.pages...)
		switch {
		case tc.want == "" && (err != nil || len(all) != tc.n):
			t.Errorf("case %d: %d sessions, %v", i, len(all), err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("case %d: %v, want an error saying %q", i, err, tc.want)
		}
	}
}
