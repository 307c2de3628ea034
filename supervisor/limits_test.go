package supervisor

import (
	"encoding/json"
	"strings"
	"testing"
)

// A client cannot make sessions live without bound: each holds memory, a
// goroutine and its history file open until it is closed. Past maxLive
// live sessions, session/new is refused at once with -32600 saying why,
// nothing is made, and the connection goes on; once one closes, there is
// room again.
//
// Before the bound, 5,000 session/new took the agent from 12 MB to 169 MB
// of RSS and 5,000 open files; at the open files' limit sessions were
// still made, without their history.
func TestLiveSessionsAreBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	defer h.close()
	const over = 5
	ids := make([]int64, maxLive+over)
	for i := range ids {
		ids[i] = h.c.Send("session/new", map[string]any{"cwd": h.cwd, "mcpServers": []any{}})
	}
	var first string
	for i, id := range ids {
		m := h.c.Wait(id)
		switch {
		case i < maxLive && m.Error != nil:
			t.Fatalf("session/new %d of %d: %s, want a session", i+1, len(ids), m.Raw)
		case i == 0:
			var r struct{ SessionID string }
			if err := json.Unmarshal(m.Result, &r); err != nil {
				t.Fatal(err)
			}
			first = r.SessionID
		case i >= maxLive && m.Error == nil:
			t.Fatalf("session/new %d of %d, with %d live: answered with a session, want -32600 saying that too many sessions are live", i+1, len(ids), maxLive)
		case i >= maxLive && (m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "sessions are live already")):
			t.Fatalf("session/new %d of %d, with %d live: answered %s, want -32600 saying that too many sessions are live", i+1, len(ids), maxLive, m.Raw)
		}
	}
	if n := h.sup.live.len(); n != maxLive {
		t.Fatalf("%d sessions live, want %d", n, maxLive)
	}
	h.c.MustCall("session/close", map[string]string{"sessionId": first}, nil)
	h.newSession()
}
