package main

import (
	"strings"
	"testing"

	"shellagent/protocol/acptest"
)

// A client that sends requests faster than they can be answered does not
// grow the agent's memory without bound: past 1000 requests of one
// connection awaiting their answers (here prompts held behind a
// foreground command that runs on), the next is refused at once with
// -32600 saying why, and the connection goes on; the held ones are
// answered as ever (-32800 at session/cancel).
//
// Before the bound, every such request was kept until it was answered:
// 100,000 prompts held behind `sleep 1000` took the daemon from 14 MB to
// 258 MB of RSS, and 60,000 session/close of a session whose command
// ignores SIGTERM (kill grace 30 s) took 36 MB, released only when they
// were answered.
func TestRequestsAwaitingAnswersAreBounded(t *testing.T) {
	t.Parallel()
	const bound, over = 1000, 50
	a := startAgent(t, "--foreground-timeout", "0")
	sid := a.session()
	a.prompt(sid, "sleep 600") // inserted: its answer does not wait for the command
	a.c.WaitFor("sleep runs", func(m *acptest.Msg) bool { return m.SessionID == sid && m.State() == "running" })

	ids := make([]int64, bound+over)
	for i := range ids {
		ids[i] = a.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": "echo held"}}})
	}
	for i, id := range ids[bound:] {
		m := a.c.Wait(id)
		if m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "await their answers") {
			t.Fatalf("prompt %d of %d sent while %d were held: answered %s, want -32600 saying that too many await their answers", bound+i+1, len(ids), bound, m.Raw)
		}
	}
	// Still serving, the held prompts still held.
	a.c.MustCall("session/list", map[string]any{}, nil)
	held := func() int {
		n := 0
		for _, m := range a.c.Transcript() {
			if m.IsResponse() && m.Error == nil && m.MessageID() != "" {
				n++
			}
		}
		return n
	}
	if n := held(); n != 1 {
		t.Fatalf("%d prompts were inserted, want the first one only", n)
	}
	a.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	for i, id := range ids[:bound] {
		if m := a.c.Wait(id); m.Error == nil || m.Error.Code != -32800 {
			t.Fatalf("held prompt %d: answered %s at session/cancel, want -32800", i+1, m.Raw)
		}
	}
	// The bound counts what awaits an answer now, not what ever did.
	a.prompt(sid, "echo after")
	a.c.WaitFor("echo after", func(m *acptest.Msg) bool { return strings.Contains(string(a.c.Output(sid, "term_2")), "after") })
	a.c.Close()
	a.c.Check()
}
