package scenario

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/protocol/acptest"
	"shellagent/supervisor"
	"shellagent/supervisor/kit"
)

// A long hold keeps a scenario playing while a test does something to
// its session.
const longHold = " 30s"

// message waits for an agent_message of sid that contains text.
func (h *harness) message(after *acptest.Msg, sid, text string) *acptest.Msg {
	h.T.Helper()
	return h.Update(after, sid, acp.KindAgentMessage, "a message saying "+text, func(m *acptest.Msg) bool {
		return strings.Contains(m.Text(), text)
	})
}

// noPlays waits until no scenario's goroutine runs.
func noPlays(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		if !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*play).run") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a scenario's goroutine outlived its session")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestScenarioCancelled: session/cancel of a scenario's turn, which the
// scenario does not await, stops it: the turn ends cancelled, the
// scenario says it is over and reports the list.
func TestScenarioCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, supervisor.Config{KillGrace: time.Second})
	sid := h.NewSession()
	h.Run(sid, "/scenario unknown-state"+longHold)
	odd := h.Update(nil, sid, acp.KindState, "the unknown state", func(m *acptest.Msg) bool { return m.State() == UnknownState })
	start := time.Now()
	h.C.Notify("session/cancel", map[string]string{"sessionId": sid})
	over := h.message(odd, sid, "Scenario unknown-state is over")
	h.Idle(over, sid, "cancelled")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the cancelled scenario took %v to end", d)
	}
	h.await("the play to end", func(sc *kit.Scene) bool { return sc.Overlay() == nil })
	h.Run(sid, "/scenario repeated-idle 0s") // the session plays again
	h.message(over, sid, "Scenario repeated-idle is over")
}

// TestScenarioClosed: a session that closes while a scenario plays stops
// the scenario's commands with the rest of its work (the Codex-style tool
// call ends cancelled, after its terminal's exit), and the scenario's
// goroutine ends.
func TestScenarioClosed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, supervisor.Config{KillGrace: time.Second})
	sid := h.NewSession()
	h.Run(sid, "/scenario codex-style"+longHold)
	end := h.Idle(nil, sid, "end_turn")
	if !sameIDs(end.Background(), []string{"term_1"}) {
		t.Fatalf("listed %v, want term_1", end.Background())
	}
	start := time.Now()
	h.C.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the close took %v", d)
	}
	exit := h.Exit(end, sid, "term_1")
	h.ToolStatus(exit, sid, "call_1", acp.StatusCancelled)
	noPlays(t)
}

// TestScenarioOneAtATime: a second /scenario while one still plays, its
// turn over, is refused with a message; the first plays on.
func TestScenarioOneAtATime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, supervisor.Config{KillGrace: time.Second})
	sid := h.NewSession()
	h.Run(sid, "/scenario silent-terminal"+longHold)
	end := h.Idle(nil, sid, "end_turn")
	h.Run(sid, "/scenario unknown-item 0s")
	h.message(end, sid, "Scenario silent-terminal is still playing")
	h.Never(sid, "the second scenario played", func(m *acptest.Msg) bool { return strings.Contains(m.Text(), "Scenario unknown-item.\n") })
	h.await("silent-terminal playing still", func(sc *kit.Scene) bool {
		p, ok := sc.Overlay().(*playOverlay)
		if !ok || p.sc.Name != "silent-terminal" {
			t.Errorf("playing %v, want silent-terminal still", sc.Overlay())
		}
		return true
	})
}

// TestScenarioInvalidNeedsTheFlag: the scenario that sends a message the
// schema forbids says so and plays nothing, unless the agent runs with
// --scenarios-invalid.
func TestScenarioInvalidNeedsTheFlag(t *testing.T) {
	t.Parallel()
	h := newHarness(t, supervisor.Config{})
	sid := h.NewSession()
	h.Run(sid, "/scenario malformed-background 0s")
	h.message(nil, sid, "plays only when shellagent runs with --scenarios-invalid")
	h.Idle(nil, sid, "end_turn")
	h.Never(sid, "a malformed list", func(m *acptest.Msg) bool { return m.Kind == "state_update" && !m.HasKey("background") })
}

// TestScenarioWhilePlaying: what a session does with its scenario's items
// in the middle of it: /ps lists the probe, /bg says the scenario holds
// the foreground, tool_call/cancel of a made-up tool call is refused as
// for any that cannot be cancelled, and a client that resumes gets the
// made-up tool call before the snapshot that lists it.
func TestScenarioWhilePlaying(t *testing.T) {
	t.Parallel()
	h := newHarness(t, supervisor.Config{KillGrace: time.Second})
	sid := h.NewSession()
	h.Run(sid, "/scenario unknown-status"+longHold)
	end := h.Idle(nil, sid, "end_turn")
	call := end.Background()[0].ID

	h.Run(sid, "/ps")
	h.message(end, sid, call+"  tool_call  listed by a scenario")
	err := h.CallErr("tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": call})
	if err == nil || err.Code != acp.CodeInvalidParams || !strings.Contains(err.Message, "a scenario made it up") {
		t.Errorf("tool_call/cancel of a made-up tool call: %v, want -32602", err)
	}

	other := h.Connect()
	other.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.Cwd}, nil)
	var announced bool
	for _, m := range other.Updates(sid) {
		if m.ToolCallID() == call && m.Status() == UnknownStatus && m.Update["title"] != nil {
			announced = true
		}
		if m.Kind == "state_update" && !announced {
			t.Errorf("the resumed client got a snapshot before the made-up tool call: %s", m.Raw)
		}
	}
	if !announced {
		t.Errorf("the resumed client never got the made-up tool call %s", call)
	}

	sid2 := h.on(other).NewSession()
	h.on(other).Run(sid2, "/scenario unknown-state"+longHold)
	h.on(other).Update(nil, sid2, acp.KindState, "the unknown state", func(m *acptest.Msg) bool { return m.State() == UnknownState })
	h.on(other).Run(sid2, "/bg")
	h.on(other).message(nil, sid2, "A scenario holds the foreground")
}

// TestParse: /scenario's arguments, as the kit reads them.
func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args  string
		name  string
		hold  time.Duration
		says  string // a part of the problem
		usage bool
	}{
		{args: "paused", name: "paused", hold: time.Second},
		{args: "paused 0s", name: "paused"},
		{args: "paused  2s", name: "paused", hold: 2 * time.Second},
		{args: "nosuch", says: `No scenario "nosuch": /scenario alone lists them.`},
		{args: "paused 2m", says: `"2m" is not a hold from 0 to 1m0s`, usage: true},
		{args: "paused -1s", says: "is not a hold", usage: true},
		{args: "paused 1s x", says: "takes a name and at most a hold", usage: true},
	}
	for _, tt := range tests {
		sc, hold, problem, usage := parse(tt.args)
		switch {
		case tt.says != "" && (!strings.Contains(problem, tt.says) || usage != tt.usage):
			t.Errorf("parse(%q): problem %q (usage %v), want one saying %q (usage %v)", tt.args, problem, usage, tt.says, tt.usage)
		case tt.says == "" && (problem != "" || sc == nil || sc.Name != tt.name || hold != tt.hold):
			t.Errorf("parse(%q) = %v, %s, %q; want %s, %s", tt.args, sc, hold, problem, tt.name, tt.hold)
		}
	}
}
