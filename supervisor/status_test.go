package supervisor

import (
	"context"
	"slices"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// TestDetachedTTL: under KeepDetached with a DetachedTTL, a detached
// session with nothing running closes once the TTL has passed; one whose
// terminal runs is kept while it runs and closes a TTL after it ended; a
// session that is attached is never closed by it. On a clock the test
// moves: an hour passes when the test says so.
func TestDetachedTTL(t *testing.T) {
	t.Parallel()
	const ttl = time.Hour
	clk := newFakeClock()
	h := newHarness(t, Config{Detached: KeepDetached, DetachedTTL: ttl, clock: clk})
	a := h.on(h.connect())
	idle := a.newSession()
	a.run(idle, "echo done")
	a.exit(nil, idle, "term_1")
	busy := a.newSession()
	a.run(busy, "/bg "+trigger("go")+"; echo bye")
	a.output(busy, "term_1", "")
	kept := h.newSession() // attached to the harness's connection throughout

	a.c.Close()
	h.awaitArmed(clk, 1) // the idle session's expiry; the busy one has none
	if d := clk.untilNext(); d != ttl {
		t.Errorf("the idle session's expiry is due in %v, want the TTL %v", d, ttl)
	}
	clk.advance(ttl - time.Minute)
	if _, err := h.sup.live.get(idle); err != nil {
		t.Fatalf("the idle detached session closed before its TTL: %v", err)
	}
	clk.advance(time.Minute)
	h.awaitClosed(idle)

	clk.advance(2 * ttl)
	if _, err := h.sup.live.get(busy); err != nil {
		t.Fatalf("the session whose terminal runs was closed: %v", err)
	}
	h.release("go")
	h.await(busy, "term_1 exited", func(st *state) bool { return !st.work.live() })
	h.awaitArmed(clk, 1) // armed when its work ended
	if d := clk.untilNext(); d != ttl {
		t.Errorf("the busy session's expiry is due in %v after its work ended, want the TTL %v", d, ttl)
	}
	clk.advance(ttl - time.Minute)
	if _, err := h.sup.live.get(busy); err != nil {
		t.Fatalf("the detached session closed within a TTL of its work's end: %v", err)
	}
	clk.advance(time.Minute)
	h.awaitClosed(busy)
	if _, err := h.sup.live.get(kept); err != nil {
		t.Errorf("the attached session was closed: %v", err)
	}
}

// An upgrade in place neither restarts a detached session's TTL nor its
// "detached since": the new image closes it when the old one would have,
// and its status says when its connection went.
func TestDetachedTTLOutlivesAnUpgrade(t *testing.T) {
	t.Parallel()
	const ttl = time.Hour
	clk := newFakeClock()
	cfg := Config{Detached: KeepDetached, DetachedTTL: ttl, clock: clk}
	old := newHarness(t, cfg)
	a := old.on(old.connect())
	sid := a.newSession()
	a.run(sid, "echo done")
	a.exit(nil, sid, "term_1")
	a.c.Close()
	old.awaitArmed(clk, 1)
	since := sessionStatus(t, old.sup, sid).Since
	clk.advance(40 * time.Minute)

	data, files, thaw, err := old.sup.Freeze(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(thaw) // the old image's session, frozen until then; its own expiry closes it
	upgraded := newHarness(t, cfg)
	if err := upgraded.sup.Restore(data, files, nil); err != nil {
		t.Fatal(err)
	}
	if got := sessionStatus(t, upgraded.sup, sid).Since; !got.Equal(since) {
		t.Errorf("after the upgrade the session is detached since %v, want %v as before it", got, since)
	}
	clk.advance(20*time.Minute - time.Second)
	if _, err := upgraded.sup.live.get(sid); err != nil {
		t.Fatalf("the upgraded session closed before its TTL: %v", err)
	}
	clk.advance(time.Second)
	upgraded.awaitClosed(sid) // a TTL after it was detached, not after the upgrade
}

// sessionStatus returns session sid's status in sv.
func sessionStatus(t *testing.T, sv *Supervisor, sid string) SessionStatus {
	t.Helper()
	for _, ss := range sv.Sessions() {
		if ss.ID == sid {
			return ss
		}
	}
	t.Fatalf("no status of session %s", sid)
	return SessionStatus{}
}

// awaitArmed waits until clk has n timers armed.
func (h *harness) awaitArmed(clk *fakeClock, n int) {
	h.t.Helper()
	deadline := time.Now().Add(testloop.Wait)
	for clk.armed() != n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d timers armed, want %d", clk.armed(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitClosed waits until session sid has left the supervisor.
func (h *harness) awaitClosed(sid string) {
	h.t.Helper()
	deadline := time.Now().Add(testloop.Wait)
	for {
		if _, err := h.sup.live.get(sid); err != nil {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("session %s is still open", sid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSessionsStatus: Sessions shows each open session with its cwd,
// whether a connection is attached and since when, and its live
// terminals with their processes; a resume attaches it again.
func TestSessionsStatus(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Detached: KeepDetached})
	a := h.on(h.connect())
	sid := a.newSession()
	a.run(sid, "/bg echo ready; sleep 30")
	a.output(sid, "term_1", "ready")
	a.run(sid, "/bg echo short")
	a.exit(nil, sid, "term_2")
	a.run(sid, "/after 1h echo later")
	a.run(sid, "echo fg; sleep 30")
	a.output(sid, "term_3", "fg")

	find := func() SessionStatus {
		t.Helper()
		i := slices.IndexFunc(h.sup.Sessions(), func(s SessionStatus) bool { return s.ID == sid })
		if i < 0 {
			t.Fatalf("Sessions does not show %s", sid)
		}
		return h.sup.Sessions()[i]
	}
	st := find()
	if !st.Attached || st.Cwd != h.cwd || st.Scheduled != 1 || st.Title != "echo ready; sleep 30" {
		t.Errorf("attached session: %+v", st)
	}
	var ids []string
	for _, term := range st.Terminals {
		ids = append(ids, term.ID)
		if len(term.Pids) == 0 {
			t.Errorf("%s: no processes listed", term.ID)
		}
		if term.Foreground != (term.ID == "term_3") {
			t.Errorf("%s: foreground %v", term.ID, term.Foreground)
		}
	}
	if !slices.Equal(ids, []string{"term_1", "term_3"}) {
		t.Errorf("live terminals %v, want term_1 term_3", ids)
	}

	before := time.Now()
	a.c.Close()
	h.await(sid, "detached", func(st *state) bool { return st.out.client == nil })
	if st := find(); st.Attached || st.Since.Before(before) {
		t.Errorf("after the connection went away: attached %v since %v (it went away after %v)", st.Attached, st.Since, before)
	}
	h.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd}, nil)
	if st := find(); !st.Attached {
		t.Errorf("after session/resume: not attached")
	}
	h.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	if n := len(h.sup.Sessions()); n != 0 {
		t.Errorf("%d sessions after the close", n)
	}
}

// TestSessionsDuringALaunch: Sessions shows a session whose command's
// launch is held up, with that command's terminal once the launch has
// returned: it waits for the entry, as the ways in that answer at once
// do, rather than showing the session without the terminal it launches.
func TestSessionsDuringALaunch(t *testing.T) {
	t.Parallel()
	g := newGate(holdLaunch)
	h := gated(t, g)
	sid := h.newSession()
	line := "echo ready; sleep 30 " + slowTag
	h.run(sid, "/bg "+line)
	g.wait(t, line)

	got := make(chan []SessionStatus, 1)
	go func() { got <- h.sup.Sessions() }()
	select {
	case list := <-got:
		t.Fatalf("Sessions answered during the launch, before the session's event was complete: %+v", list)
	case <-time.After(200 * time.Millisecond):
	}
	g.release()
	var list []SessionStatus
	select {
	case list = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("Sessions did not answer once the launch returned")
	}
	if len(list) != 1 || list[0].ID != sid || len(list[0].Terminals) != 1 || list[0].Terminals[0].Command != line {
		t.Errorf("Sessions after the launch = %+v, want %s with its terminal running %q", list, sid, line)
	}
	h.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"}, nil)
	h.exit(nil, sid, "term_1")
}
