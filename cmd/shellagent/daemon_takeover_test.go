package main

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"shellagent/protocol/acptest"
)

// TestDaemonTakeoverReleasesTheFirstRelay: two relays of one daemon; the
// second resumes the session the first holds, with a counter running.
// The first is told in a notice, its held prompt is answered -32800, and
// its prompt, typing, terminal/cancel and session/cancel for the session
// are refused -32002 (or, for the notification, do nothing): the counter
// ticks on for the second relay, which alone can stop it.
//
// Issue 22 (Low), which this test reproduced: after a takeover (a second
// client resumes a session that another connection holds), the released
// connection could still prompt, type into and cancel in the session it
// lost, and never heard back (its turn never ended from its side).
func TestDaemonTakeoverReleasesTheFirstRelay(t *testing.T) {
	t.Parallel()
	// The foreground sleep holds the prompt however slow the machine: with
	// the default 10 s foreground timeout it went to the background under
	// load, and the held prompt ran.
	d := newDaemonFixture(t, "--foreground-timeout", "0")
	a := d.relay()
	sid, _ := a.startCounter(d.cwd)
	a.prompt(sid, "sleep 300")
	a.c.WaitFor("term_2", func(m *acptest.Msg) bool { return m.SessionID == sid && m.TerminalID() == "term_2" })
	held := a.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": "echo never"}}})

	b := d.relay()
	b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": d.cwd}, nil)
	b.waitLines(sid, "term_1", counted(b.c.Output(sid, "term_1"))+3) // live
	if m := a.c.Wait(held); m.Error == nil || m.Error.Code != -32800 {
		t.Errorf("A's held prompt after B took the session: %s, want -32800", m.Raw)
	}
	notice := a.c.WaitFor("the notice that B took the session", func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.Kind == "notice" && strings.Contains(string(m.Raw), `"event":"session_taken"`)
	})

	typed := base64.StdEncoding.EncodeToString([]byte("from A\r"))
	for _, r := range []struct {
		method string
		params map[string]any
	}{
		{"session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": "/stop term_1"}}}},
		{"_shellagent/terminal/write", map[string]any{"sessionId": sid, "terminalId": "term_2", "data": typed}},
		{"terminal/cancel", map[string]any{"sessionId": sid, "terminalId": "term_1"}},
	} {
		if _, err := a.c.Call(r.method, r.params); err == nil || err.Code != -32002 {
			t.Errorf("%s from A after B took the session: %v, want -32002", r.method, err)
		}
	}
	a.c.Notify("session/cancel", map[string]string{"sessionId": sid})

	// B's counter ticks on, and the foreground command still runs: B can
	// cancel it, and A's cancel did nothing.
	now := counted(b.c.Output(sid, "term_1"))
	b.waitLines(sid, "term_1", now+5)
	for _, m := range b.c.Updates(sid) {
		if m.ExitStatus() != nil || m.Kind == "user_message" && strings.Contains(string(m.Raw), "never") {
			t.Errorf("B got %s after A's requests", m.Raw)
		}
	}
	b.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_2"}, nil)
	if sig := b.exitSignal(sid, "term_2"); sig != "SIGTERM" {
		t.Errorf("terminal/cancel of term_2 from B: signal %v", sig)
	}
	for _, m := range a.c.Updates(sid) {
		if m.Seq > notice.Seq && m.Kind != "terminal_output_chunk" {
			t.Errorf("A got %s after the notice", m.Raw)
		}
	}
	b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	d.waitGone(2*time.Second, "session/close", d.work)
	a.c.Check()
	b.c.Check()
}
