package lineclient

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The session to reattach to: the id asked for, else the newest of the
// directory by updatedAt (the later listed of two as new), never one of
// another directory; none says why.
func TestPickSession(t *testing.T) {
	t.Parallel()
	var list []sessionEntry
	wire := `[{"sessionId":"s1","cwd":"/a","updatedAt":"2026-12-01T10:00:00Z"},
		{"sessionId":"s2","cwd":"/a/","updatedAt":"2026-12-01T11:00:00Z"},
		{"sessionId":"s3","cwd":"/b","updatedAt":"2026-12-01T12:00:00Z"},
		{"sessionId":"s4","cwd":"/a","updatedAt":"2026-12-01T09:00:00Z"},
		{"sessionId":"s5","cwd":"/c","updatedAt":"2026-12-01T09:00:00Z"},
		{"sessionId":"s6","cwd":"/c","updatedAt":"2026-12-01T09:00:00Z"}]`
	if err := json.Unmarshal([]byte(wire), &list); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ id, cwd, want, why string }{
		{"", "/a", "s2", ""},
		{"", "/b", "s3", ""},
		{"", "/c", "s6", ""},
		{"s4", "/b", "s4", ""},
		{"", "/d", "", "no session of /d in the daemon"},
		{"s9", "/a", "", "no session s9 in the daemon"},
	} {
		e, why := pickSession(list, tt.id, tt.cwd)
		got := ""
		if e != nil {
			got = e.SessionID
		}
		if got != tt.want || !strings.HasPrefix(why, tt.why) || (tt.why == "") != (why == "") {
			t.Errorf("pickSession(%q, %q) = %q, %q; want %q, %q…", tt.id, tt.cwd, got, why, tt.want, tt.why)
		}
	}
}

// A /sessions line: id, cwd, title, state, running terminals, update.
func TestSessionLine(t *testing.T) {
	t.Parallel()
	var e sessionEntry
	wire := `{"sessionId":"s1","cwd":"/a","title":"npm run dev","updatedAt":"2026-12-01T10:00:00Z","_meta":{"shellagent":{"state":"detached","terminals":["term_1","term_3"]}}}`
	if err := json.Unmarshal([]byte(wire), &e); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 10, 3, 0, 500, time.UTC)
	updated := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).Local().Format(time.DateTime)
	if got, want := e.line(false, now), `s1  /a  "npm run dev"  detached  running term_1 term_3  updated `+updated+` (3m0s ago)`; got != want {
		t.Errorf("line:\n%s\nwant\n%s", got, want)
	}
	e.Meta.Shellagent.Terminals = nil
	if got, want := e.line(true, now), `s1  /a  "npm run dev"  detached (here)  no terminal runs  updated `+updated+` (3m0s ago)`; got != want {
		t.Errorf("line:\n%s\nwant\n%s", got, want)
	}
	other := sessionEntry{SessionID: "s2", Cwd: "/b"}
	if got, want := other.line(false, now), "s2  /b  state unknown"; got != want {
		t.Errorf("another agent's entry: %q, want %q", got, want)
	}
}
