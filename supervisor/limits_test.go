package supervisor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"shellagent/acp"
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

// A client cannot list background work without bound: each item is sent
// in every state_update of its session, and jobs and watches hold no
// process or terminal that any other limit counts. While the session
// lists maxListed items, a command that would list one more (/after,
// /every, /watch, /bg) is refused with -32600 saying why, whether it
// came to an idle session, beside the foreground, or held behind it (the
// queue then goes on); it is not inserted, and other prompts run as
// ever, /bg alone too while a command runs in the foreground (it moves
// its terminal to the list, starting nothing), but not while a wait does. Once an item is stopped, there is room again.
//
// Before the bound, 10,000 /after 1h took 214 s, the later ones 40 ms
// each, every state_update carrying 400 KB of list.
func TestBackgroundListIsBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	defer h.close()
	sid := h.newSession()
	ids := make([]int64, maxListed)
	for i := range ids {
		ids[i] = h.prompt(sid, fmt.Sprintf("/after 1h echo %d", i))
	}
	for i, id := range ids {
		if m := h.c.Wait(id); m.Error != nil {
			t.Fatalf("/after %d of %d: %s", i+1, len(ids), m.Raw)
		}
	}
	refused := func(line string, id int64) {
		t.Helper()
		m := h.c.Wait(id)
		switch {
		case m.Error == nil:
			t.Fatalf("%q with %d items listed: inserted, want -32600 saying that the list is full", line, maxListed)
		case m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "pieces of background work already"):
			t.Fatalf("%q with %d items listed: answered %s, want -32600 saying that the list is full", line, maxListed, m.Raw)
		}
	}
	for _, line := range []string{"/every 1h echo x", "/after 1s echo x", "/watch . echo x", "/bg sleep 1"} {
		refused(line, h.prompt(sid, line))
	}
	// Beside the foreground, and held behind it.
	h.run(sid, "echo fg; "+trigger("go"))
	h.output(sid, "term_1", "fg")
	refused("/bg sleep 1", h.prompt(sid, "/bg sleep 1"))
	held := h.prompt(sid, "/after 1h echo held")
	next := h.prompt(sid, "echo next")
	if m := h.c.Wait(h.prompt(sid, "/bg")); m.Error != nil { // moves the foreground, starts nothing
		t.Fatalf("/bg alone with %d items listed: %s", maxListed, m.Raw)
	}
	refused("/after 1h echo held", held)
	if m := h.c.Wait(next); m.Error != nil {
		t.Fatalf("echo next, held behind a refused /after: %s", m.Raw)
	}
	h.output(sid, "term_2", "next")
	// A wait is no command: /bg would list it beyond bound.
	h.run(sid, "/wait term_1 --timeout 1m")
	refused("/bg", h.prompt(sid, "/bg"))
	h.release("go")
	h.exit(nil, sid, "term_1")
	// Room again once one is stopped.
	h.c.MustCall("tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": "call_1"}, nil)
	h.toolStatus(nil, sid, "call_1", "cancelled")
	h.run(sid, "/after 1h echo again")
}

// A prompt of more blocks than acp.MaxBlocks is refused with -32602
// naming the prompt, and not inserted; one of acp.MaxBlocks is run.
//
// Before the bound, a 5 MB line of 200,000 one-letter blocks took 5 s
// and kept 75 MB of the agent's memory, five of them 380 MB.
func TestPromptBlocksAreBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	defer h.close()
	sid := h.newSession()
	blocks := func(n int) []map[string]string {
		b := make([]map[string]string, n)
		for i := range b {
			b[i] = map[string]string{"type": "text", "text": "true"}
		}
		b[0]["text"] = "echo blocks;"
		return b
	}
	m := h.c.Wait(h.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": blocks(acp.MaxBlocks + 1)}))
	if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "content blocks, more than") {
		t.Fatalf("a prompt of %d blocks: answered %s, want -32602 saying it holds too many", acp.MaxBlocks+1, m.Raw)
	}
	if m := h.c.Wait(h.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": blocks(acp.MaxBlocks)})); m.Error != nil {
		t.Fatalf("a prompt of %d blocks: %s", acp.MaxBlocks, m.Raw)
	}
	h.output(sid, "term_1", "blocks")
}
