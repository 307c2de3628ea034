package supervisor

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/protocol/acptest"
)

// trigger is a shell loop that waits for the file name to appear in the
// command's directory: output that a test releases when it chooses.
func trigger(name string) string {
	return "while [ ! -e " + name + " ]; do sleep 0.02; done"
}

// isTakenNotice reports whether m is the notice that tells a connection
// that another client took its session.
func isTakenNotice(m *acptest.Msg) bool {
	meta, _ := m.Update["_meta"].(map[string]any)
	sa, _ := meta["shellagent"].(map[string]any)
	return m.Kind == acp.KindNotice && sa["event"] == "session_taken"
}

func (h *harness) release(name string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.cwd, name), nil, 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// TestReattachWhileTheFirstConnectionStaysOpen: a session resumed from
// another connection stops reporting to the first one, which stays open:
// its terminals' output goes to the new connection only, and the first no
// longer follows (nor holds back) their rings.
func TestReattachWhileTheFirstConnectionStaysOpen(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Detached: KeepDetached})
	a := h.on(h.connect())
	sid := a.newSession()
	a.run(sid, "/bg echo one; "+trigger("go")+"; echo two; sleep 300")
	a.output(sid, "term_1", "one")

	b := h.on(h.connect())
	b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd}, nil)
	seen := len(a.c.Transcript())
	h.release("go")
	b.output(sid, "term_1", "two")
	// What A's writer would send after the release is already on its way:
	// give it time, then a round trip.
	time.Sleep(200 * time.Millisecond)
	a.c.MustCall("session/list", map[string]any{}, nil)
	for _, m := range a.c.Transcript()[seen:] {
		if m.SessionID == sid && !isTakenNotice(m) {
			t.Errorf("A got %s after B resumed the session", m.Raw)
		}
	}
	if out := string(a.c.Output(sid, "term_1")); out != "one\r\n" {
		t.Errorf("A's copy of term_1 is %q, want only what came before the resume", out)
	}
	b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
}

// TestReattachAfterTheConnectionWentAway: under KeepDetached, a session
// outlives the connection that created it. Its work runs on while no one
// is attached, output accumulating in the rings; another connection
// resumes it, gets the current state and then live output, and can stop
// its work and close it.
func TestReattachAfterTheConnectionWentAway(t *testing.T) {
	t.Parallel()
	const scrollback = 64 << 10
	h := newHarness(t, Config{Detached: KeepDetached, Scrollback: scrollback})
	a := h.on(h.connect())
	sid := a.newSession()
	a.run(sid, "/bg echo one; sleep 300")
	a.output(sid, "term_1", "one")
	// Four rings' worth while no one reads: nothing may hold it up.
	a.run(sid, "/bg "+trigger("go")+"; head -c 262144 /dev/zero | tr '\\0' y; echo two; exit 3")
	a.run(sid, "/after 1h echo later")
	a.run(sid, "echo fg; "+trigger("go")+"; echo fg-detached; "+trigger("go2")+"; echo fg-live; sleep 300")
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
	two := strings.Repeat("y", 262144) + "two\r\n"
	want := map[string]termView{
		"term_1": {out: "one\r\n"},
		"term_2": {out: two[len(two)-scrollback:], exit: `{"exitCode":3}`},
		"term_3": {out: "fg\r\nfg-detached\r\n"},
	}
	for id, w := range want {
		if got := v.terms[id]; got != w {
			t.Errorf("after the replay B sees %s as %d bytes ending %q, exit %s; want %d bytes ending %q, exit %s",
				id, len(got.out), tail(got.out), got.exit, len(w.out), tail(w.out), w.exit)
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

func tail(s string) string { return s[max(0, len(s)-20):] }

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
		case acp.KindTerminal:
			tv := v.terms[m.TerminalID()]
			if es := m.ExitStatus(); es != nil {
				tv.exit = mustJSON(es)
			}
			v.terms[m.TerminalID()] = tv
		case acp.KindToolCall:
			if m.HasKey("status") {
				v.calls[m.ToolCallID()] = m.Status()
			}
		case acp.KindState:
			v.state = m
		case acp.KindUserMessage:
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
	a.run(gone, "/bg echo a; sleep 300")
	a.output(gone, "term_1", "a")
	kept := h.newSession()
	h.run(kept, "/bg echo kept; sleep 300")
	h.output(kept, "term_1", "kept")

	a.c.Close()
	if exit := a.exit(nil, gone, "term_1"); signalOf(exit) != "SIGTERM" {
		t.Errorf("A's terminal ended with %v", exit.ExitStatus())
	}
	a.listed(nil, gone)
	if _, err := h.sup.live.get(gone); err == nil {
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
	a.run(sid, "echo fg; sleep 300")
	a.output(sid, "term_1", "fg")
	a.prompt(sid, "echo never")
	a.c.Close()
	h.inspect(sid, func(st *state) {
		if st.turns.waiting() || st.turns.fg == nil || st.turns.fg.term.state != termRunning {
			t.Errorf("after the detach: %d held turns, foreground %+v", len(st.turns.held), st.turns.fg)
		}
	})
}

// TestReplayFromStartShowsWhatALiveClientSaw: a client that resumes with
// replayFrom {"type":"start"} sees the same terminals (bytes and exit
// statuses, under the same ids) and the same tool call statuses as the
// client that watched live, for every kind of work, within the retention
// limits: a terminal whose start the ring no longer holds comes with the
// count of bytes it lost. Then the current state, then the response.
func TestReplayFromStartShowsWhatALiveClientSaw(t *testing.T) {
	t.Parallel()
	refuse := func(acptest.Msg) any {
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "reject"}}
	}
	const scrollback = 64 << 10
	h := newHarness(t, Config{Scrollback: scrollback}, acptest.WithPermissionHandler(refuse))
	sid := h.newSession()
	setPermission := func(v string) {
		h.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "permission", "type": "id", "value": v}, nil)
	}
	h.run(sid, "echo exited; exit 4") // term_1, call_1: exited in the foreground
	h.idle(nil, sid, "end_turn")
	h.run(sid, "/bg echo cancel-me; sleep 300") // term_2, call_2: cancelled
	h.output(sid, "term_2", "cancel-me")
	h.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_2"}, nil)
	h.exit(nil, sid, "term_2")
	h.run(sid, "/bg echo running; sleep 300") // term_3, call_3: background
	h.output(sid, "term_3", "running")
	h.run(sid, "head -c 100000 /dev/zero | tr '\\0' x; echo") // term_4, call_4: more than the ring holds
	h.exit(nil, sid, "term_4")
	h.run(sid, "/after 1h echo later")   // call_5: scheduled
	h.run(sid, "/after 10ms echo fired") // call_6, then call_7 and term_5: fired
	h.exit(nil, sid, "term_5")
	setPermission("ask")
	h.run(sid, "touch refused") // call_8: permission refused
	h.toolStatus(nil, sid, "call_8", "failed")
	setPermission("allow")
	h.run(sid, "/ps")
	h.run(sid, "echo fg; sleep 300") // term_6, call_9: foreground
	h.output(sid, "term_6", "fg")
	h.listed(nil, sid, "term_3", "call_5")
	live := view(h.c, sid)

	seen := len(h.c.Updates(sid))
	b := h.on(h.connect())
	id := b.c.Send("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd, "replayFrom": map[string]string{"type": "start"}})
	resp := b.c.Wait(id)
	if resp.Error != nil {
		t.Fatalf("resume: %s", resp.Raw)
	}
	replayed := view(b.c, sid)
	if len(replayed.terms) != 6 || len(replayed.calls) != 9 {
		t.Errorf("the replay shows %d terminals and %d tool calls, want 6 and 9", len(replayed.terms), len(replayed.calls))
	}
	for id, lv := range live.terms {
		rv := replayed.terms[id]
		if id == "term_4" { // 100,002 bytes: the replay has the ring's last 64 KiB
			all := strings.Repeat("x", 100000) + "\r\n"
			if !strings.HasSuffix(all, lv.out) || rv.out != all[len(all)-scrollback:] || rv.exit != lv.exit {
				t.Errorf("term_4: live %d bytes, exit %s; replayed %d bytes, exit %s; want the last %d", len(lv.out), lv.exit, len(rv.out), rv.exit, scrollback)
			}
			continue
		}
		if rv != lv {
			t.Errorf("%s: live %+v, replayed %+v", id, lv, rv)
		}
	}
	for id, status := range live.calls {
		if replayed.calls[id] != status {
			t.Errorf("%s: live %s, replayed %s", id, status, replayed.calls[id])
		}
	}
	if !slices.Equal(replayed.users, live.users) || len(live.users) != 9 {
		t.Errorf("user messages: live %v, replayed %v", live.users, replayed.users)
	}
	if replayed.state.State() != "running" || !sameIDs(replayed.state.Background(), []string{"term_3", "call_5"}) {
		t.Errorf("the replay ends with %s", replayed.state.Raw)
	}
	// The order: the history as it happened, then the state, then the
	// response; the lost start of term_4 is counted.
	updates := b.c.Updates(sid)
	if last := updates[len(updates)-1]; last != replayed.state || resp.Seq < last.Seq {
		t.Errorf("the last update before the response is %s", last.Raw)
	}
	order := []string{}
	for _, m := range updates {
		switch {
		case m.Kind == acp.KindUserMessage:
			order = append(order, m.MessageID())
		case m.Kind == acp.KindTerminal && m.TerminalID() == "term_4":
			meta, _ := m.Update["output"].(map[string]any)["_meta"].(map[string]any)
			if mustJSON(meta) != `{"shellagent":{"droppedBytes":34466}}` {
				t.Errorf("term_4 replayed without its droppedBytes: %s", m.Raw)
			}
		}
	}
	if !slices.IsSortedFunc(order, func(a, b string) int { return cmp.Compare(idNumber(a), idNumber(b)) }) {
		t.Errorf("user messages replayed out of order: %v", order)
	}
	for _, m := range h.c.Updates(sid)[seen:] {
		if m.Kind != acp.KindTerminalOutput && !isTakenNotice(m) {
			t.Errorf("the live client got %s while another connection resumed", m.Raw)
		}
	}

	// The live client can replay too, on its own connection: it ends up
	// where it was.
	h.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd, "replayFrom": map[string]string{"type": "start"}}, nil)
	again := view(h.c, sid)
	for id, lv := range live.terms {
		if id != "term_4" && again.terms[id] != lv {
			t.Errorf("%s after replaying on the same connection: %+v, want %+v", id, again.terms[id], lv)
		}
	}
}

// releaseRecorder is a quietClient that records which sessions released
// it.
type releaseRecorder struct {
	*quietClient
	mu       sync.Mutex
	released []string
}

func (c *releaseRecorder) Release(sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = append(c.released, sid)
}

func (c *releaseRecorder) releases() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.released)
}

// TestASessionReleasesTheConnectionItLeaves: whenever a session stops
// reporting to a connection, that connection is released (it no longer
// follows, nor holds back, the session's terminals): when another
// connection resumes the session, and when it goes away under
// KeepDetached.
func TestASessionReleasesTheConnectionItLeaves(t *testing.T) {
	t.Parallel()
	sv := New(Config{Detached: KeepDetached, Launcher: failLauncher{}, Log: discardLog})
	a := &releaseRecorder{quietClient: newQuietClient()}
	b := &releaseRecorder{quietClient: newQuietClient()}
	cwd := t.TempDir()
	sid := must(sv.NewSession(a, &acp.NewSessionRequest{Cwd: cwd})).SessionID
	if err := sv.Detach(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if got := a.releases(); !slices.Equal(got, []string{sid}) {
		t.Errorf("after A went away it was released by %v, want %s", got, sid)
	}
	must(sv.ResumeSession(b, &acp.ResumeSessionRequest{SessionID: sid, Cwd: cwd}))
	must(sv.ResumeSession(a, &acp.ResumeSessionRequest{SessionID: sid, Cwd: cwd}))
	if got := b.releases(); !slices.Equal(got, []string{sid}) {
		t.Errorf("after A resumed the session B was released by %v, want %s", got, sid)
	}
	if err := sv.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestDetachDropsHeldPromptsOfAReleasedConnection: the prompts a
// connection left held are dropped when it goes away even if another
// connection resumed the session meanwhile: they are never inserted into
// the conversation the other connection now follows.
func TestDetachDropsHeldPromptsOfAReleasedConnection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Detached: KeepDetached})
	a := h.on(h.connect())
	sid := a.newSession()
	a.run(sid, "echo fg; "+trigger("go"))
	a.output(sid, "term_1", "fg")
	a.prompt(sid, "echo never")
	b := h.on(h.connect())
	b.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd}, nil)
	a.c.Close()
	h.inspect(sid, func(st *state) {
		if st.turns.waiting() {
			t.Errorf("after A went away %d of its prompts are still held", len(st.turns.held))
		}
	})
	h.release("go")
	b.idle(nil, sid, "end_turn")
	b.run(sid, "echo after")
	b.output(sid, "term_2", "after")
	for _, m := range b.c.Updates(sid) {
		if m.Kind == acp.KindUserMessage && strings.Contains(string(m.Raw), "never") {
			t.Errorf("A's held prompt was inserted after A went away: %s", m.Raw)
		}
	}
	b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
}
