package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shellagent/protocol"
	"shellagent/protocol/acptest"
)

// trigger is a shell loop that waits for the file name to appear in the
// command's directory: output that a test releases when it chooses.
func trigger(name string) string {
	return "while [ ! -e " + name + " ]; do sleep 0.02; done"
}

func (h *harness) release(name string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.cwd, name), nil, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// TestReattachAfterTheConnectionWentAway: under KeepDetached, a session
// outlives the connection that created it. Its work runs on while no one
// is attached, output accumulating in the rings; another connection
// resumes it, gets the current state and then live output, and can stop
// its work and close it.
func TestReattachAfterTheConnectionWentAway(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Detached: KeepDetached})
	a := h.on(h.connect())
	sid := a.newSession()
	a.run(sid, "/bg echo one; sleep 30")
	a.output(sid, "term_1", "one")
	a.run(sid, "/bg "+trigger("go")+"; echo two; exit 3")
	a.run(sid, "/after 1h echo later")
	a.run(sid, "echo fg; "+trigger("go")+"; echo fg-detached; "+trigger("go2")+"; echo fg-live; sleep 30")
	a.output(sid, "term_3", "fg")
	a.listed(nil, sid, "term_1", "term_2", "call_3")

	// A goes away. Its session's work runs on and its output accumulates.
	a.c.Close()
	h.release("go")
	h.await(sid, "term_2 exited and term_3 printed", func(st *state) bool {
		fg := st.turns.fg
		return st.work.terminals["term_2"].state == termExited &&
			fg != nil && strings.Contains(string(must(fg.term.ring.Snapshot())), "fg-detached")
	})
	h.inspect(sid, func(st *state) {
		if st.out.client != nil {
			t.Errorf("the session still reports to a connection that went away")
		}
	})

	// B resumes with a replay and sees every terminal as it is now.
	b := h.on(h.connect())
	var list struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
		} `json:"sessions"`
	}
	b.c.MustCall("session/list", map[string]any{}, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != sid {
		t.Fatalf("B lists %+v, want %s", list.Sessions, sid)
	}
	b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd, "replayFrom": map[string]string{"type": "start"}}, nil)
	v := view(b.c, sid)
	want := map[string]termView{
		"term_1": {out: "one\r\n"},
		"term_2": {out: "two\r\n", exit: `{"exitCode":3}`},
		"term_3": {out: "fg\r\nfg-detached\r\n"},
	}
	for id, w := range want {
		if got := v.terms[id]; got != w {
			t.Errorf("after the replay B sees %s as %+v, want %+v", id, got, w)
		}
	}
	wantCalls := map[string]string{"call_1": "completed", "call_2": "completed", "call_3": "pending", "call_4": "in_progress"}
	for id, status := range wantCalls {
		if v.calls[id] != status {
			t.Errorf("after the replay B sees %s %q, want %q", id, v.calls[id], status)
		}
	}
	if last := v.state; last == nil || last.State() != "running" || !sameIDs(last.Background(), []string{"term_1", "call_3"}) {
		t.Errorf("after the replay B's state is %v", last)
	}
	// Then live output.
	h.release("go2")
	b.output(sid, "term_3", "fg-live")

	// B stops one terminal, then closes the session.
	b.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"}, nil)
	if exit := b.exit(nil, sid, "term_1"); signalOf(exit) != "SIGTERM" {
		t.Errorf("term_1 stopped with %v", exit.ExitStatus())
	}
	b.listed(nil, sid, "call_3")
	b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	v = view(b.c, sid)
	if v.terms["term_3"].exit != `{"signal":"SIGTERM"}` || v.calls["call_4"] != "cancelled" || v.calls["call_3"] != "cancelled" {
		t.Errorf("after close B sees term_3 %+v, call_4 %s, call_3 %s", v.terms["term_3"], v.calls["call_4"], v.calls["call_3"])
	}
	if v.state.State() != "idle" || v.state.StopReason() != "cancelled" || len(v.state.Background()) != 0 {
		t.Errorf("the close's last state_update is %s", v.state.Raw)
	}
}

func must[T, U any](v T, _ U) T { return v }

// termView is a terminal as a client sees it: its output and its
// exitStatus (JSON, "" while it runs).
type termView struct {
	out, exit string
}

// clientView is a session as a client has seen it.
type clientView struct {
	terms map[string]termView
	calls map[string]string // tool call id → status
	state *acptest.Msg      // the last state_update
	users []string          // user message ids, in order
}

// view is what client c has seen of session sid so far.
func view(c *acptest.Client, sid string) clientView {
	v := clientView{terms: map[string]termView{}, calls: map[string]string{}}
	for _, m := range c.Updates(sid) {
		switch m.Kind {
		case protocol.KindTerminal:
			tv := v.terms[m.TerminalID()]
			if es := m.ExitStatus(); es != nil {
				tv.exit = mustJSON(es)
			}
			v.terms[m.TerminalID()] = tv
		case protocol.KindToolCall:
			if m.HasKey("status") {
				v.calls[m.ToolCallID()] = m.Status()
			}
		case protocol.KindState:
			v.state = m
		case protocol.KindUserMessage:
			v.users = append(v.users, m.MessageID())
		}
	}
	for id, tv := range v.terms {
		tv.out = string(c.Output(sid, id))
		v.terms[id] = tv
	}
	return v
}

// TestDetachClosesOnlyThatConnectionsSessions: under CloseDetached (the
// policy of stdio) a connection that goes away closes the sessions it was
// attached to, reporting their final updates while it can still read
// them, and leaves the others alone.
func TestDetachClosesOnlyThatConnectionsSessions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	a := h.on(h.connect())
	gone := a.newSession()
	a.run(gone, "/bg echo a; sleep 30")
	a.output(gone, "term_1", "a")
	kept := h.newSession()
	h.run(kept, "/bg echo kept; sleep 30")
	h.output(kept, "term_1", "kept")

	a.c.Close()
	if exit := a.exit(nil, gone, "term_1"); signalOf(exit) != "SIGTERM" {
		t.Errorf("A's terminal ended with %v", exit.ExitStatus())
	}
	a.listed(nil, gone)
	if _, err := h.sup.session(gone); err == nil {
		t.Errorf("A's session is still open")
	}
	h.never(kept, "the other connection's session was stopped", func(m *acptest.Msg) bool { return m.ExitStatus() != nil })
	h.c.MustCall("terminal/cancel", map[string]string{"sessionId": kept, "terminalId": "term_1"}, nil)
	h.exit(nil, kept, "term_1")
}

// TestDetachDropsHeldPrompts: under KeepDetached the prompts that a
// connection left held are dropped when it goes away (answered -32800,
// which no one can read any more), and never inserted; the foreground
// command runs on.
func TestDetachDropsHeldPrompts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Detached: KeepDetached})
	a := h.on(h.connect())
	sid := a.newSession()
	a.run(sid, "echo fg; sleep 30")
	a.output(sid, "term_1", "fg")
	a.prompt(sid, "echo never")
	a.c.Close()
	h.inspect(sid, func(st *state) {
		if st.turns.waiting() || st.turns.fg == nil || st.turns.fg.term.state != termRunning {
			t.Errorf("after the detach: %d held turns, foreground %+v", len(st.turns.held), st.turns.fg)
		}
	})
}
