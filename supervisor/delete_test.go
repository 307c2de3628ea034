package supervisor

import (
	"os"
	"path/filepath"
	"testing"

	"shellagent/acp"
	"shellagent/protocol/acptest"
)

// isClosedNotice reports whether m is the notice that tells a connection
// that another client closed or deleted its session, with title.
func isClosedNotice(m *acptest.Msg, title string) bool {
	meta, _ := m.Update["_meta"].(map[string]any)
	sa, _ := meta["shellagent"].(map[string]any)
	return m.Kind == acp.KindNotice && sa["event"] == acp.EventSessionClosed && m.Update["title"] == title
}

// A session attached on one connection and closed or deleted from
// another is told so, in a notice before its work's final statuses.
// Before, its background work was killed and the session went, with not
// a word of why: its client saw an exit by SIGTERM, then -32002 for its
// next prompt. A connection the session was taken from deletes nothing
// (-32002, as its other requests for it): before, its session/delete
// closed the session under the client that took it, and removed its
// history.
func TestCloseOrDeleteFromAnotherConnection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := newHarness(t, Config{History: openJournal(t, dir), Detached: KeepDetached})
	for _, op := range []struct{ method, title string }{
		{"session/close", "Another client closed this session"},
		{"session/delete", "Another client deleted this session"},
	} {
		a := h.on(h.connect())
		sid := a.newSession()
		a.run(sid, "/bg sleep 300")
		b := h.on(h.connect())
		b.c.MustCall(op.method, map[string]any{"sessionId": sid}, nil)
		notice := a.c.WaitFor(op.method+"'s notice on the attached connection", func(m *acptest.Msg) bool {
			return m.SessionID == sid && isClosedNotice(m, op.title)
		})
		exit := a.c.WaitFor("the background terminal's exit", func(m *acptest.Msg) bool {
			return m.SessionID == sid && m.Kind == "terminal_update" && m.HasKey("exitStatus")
		})
		if exit.Seq < notice.Seq {
			t.Errorf("%s: the attached connection got the exit before the notice", op.method)
		}
		if m := a.c.Wait(a.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": "echo hi"}}})); m.Error == nil || m.Error.Code != acp.CodeNotFound {
			t.Errorf("%s: the attached connection's next prompt: %s, want -32002", op.method, m.Raw)
		}
	}

	a := h.on(h.connect())
	sid := a.newSession()
	b := h.on(h.connect())
	b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd}, nil)
	a.c.WaitFor("the taken notice", func(m *acptest.Msg) bool { return m.SessionID == sid && isTakenNotice(m) })
	if _, rerr := a.c.Call("session/delete", map[string]any{"sessionId": sid}); rerr == nil || rerr.Code != acp.CodeNotFound {
		t.Errorf("session/delete from the connection the session was taken from: %v, want -32002", rerr)
	}
	if out := b.run(sid, "echo still-here"); out == "" {
		t.Error("the session is not live on the connection that took it")
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions", sid+".jsonl")); err != nil {
		t.Errorf("the history of the session that was taken: %v", err)
	}
	for _, m := range b.c.Transcript() {
		if m.SessionID == sid && m.Kind == acp.KindNotice {
			t.Errorf("the connection that took the session got %s", m.Raw)
		}
	}
}
