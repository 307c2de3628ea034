package supervisor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/journal"
	"shellagent/internal/stack"
	"shellagent/outputbuf"
	"shellagent/protocol/acptest"
	"shellagent/supervisor/handover"
	"shellagent/supervisor/jobs"
	"shellagent/supervisor/kit"
)

// Freeze stops a session's terminal from being read (its ring does not
// grow while the process runs on) and writes the session; thaw, as after
// an exec that failed, lets everything go on: the client gets every tick
// once, in order, and new ones. Work that cannot be handed over is
// refused, before anything stops, naming it and its session. What the
// history's writer knows of the session's file goes with the session, so
// that the new image need not read it.
func TestFreezeThenThaw(t *testing.T) {
	store, err := journal.Open(journal.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h := newHarness(t, Config{History: store})
	sid := h.newSession()
	h.run(sid, "/bg i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done")
	var ring *outputbuf.Ring
	h.await(sid, "ticks", func(st *state) bool {
		if t := st.work.terminals["term_1"]; t != nil {
			ring = t.ring
		}
		return ring != nil && ring.Total() > 20
	})
	if err := h.sup.Precheck(); err != nil {
		t.Fatalf("Precheck with a background terminal: %v", err)
	}

	saved, files, thaw, err := h.sup.Freeze(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 { // the rings' bytes, the PTY master, the pidfd
		t.Errorf("Freeze handed %d files, want 3", len(files))
	}
	var fz handover.State
	if err := json.Unmarshal(saved, &fz); err != nil || len(fz.Sessions) != 1 || len(fz.Sessions[0].Terminals) != 1 || fz.Sessions[0].Terminals[0].Live == nil {
		t.Fatalf("Freeze wrote %s (%v); want one session with its live terminal", saved, err)
	}
	if d := fz.Sessions[0].Durable; d == nil || d.File == nil || d.File.Size == 0 || d.File.Terms["term_1"][2] == 0 {
		t.Errorf("Freeze handed the history over as %+v; want its file, with term_1's output", d)
	}
	before := ring.Total()
	time.Sleep(300 * time.Millisecond) // 6 ticks, held in the PTY
	if after := ring.Total(); after != before || fz.Sessions[0].Terminals[0].End != before {
		t.Errorf("while frozen the ring went from %d to %d bytes (frozen at %d); want no reads", before, after, fz.Sessions[0].Terminals[0].End)
	}
	thaw()

	var n int
	h.c.WaitFor("ticks after the thaw", func(*acptest.Msg) bool {
		n = ticksIn(h.c.Output(sid, "term_1"))
		return n < 0 || n >= 12
	})
	if n < 12 {
		t.Fatalf("after the thaw the output is %q: a tick missing or twice", h.c.Output(sid, "term_1"))
	}

	// A scheduled job is handed over with what the new image needs to
	// arm it for the same next run; a freeze that is thawed leaves it be.
	h.run(sid, "/after 1h echo later")
	if err := h.sup.Precheck(); err != nil {
		t.Errorf("Precheck with a scheduled job: %v", err)
	}
	saved, _, thaw, err = h.sup.Freeze(context.Background())
	if err != nil {
		t.Fatalf("Freeze with a scheduled job: %v", err)
	}
	thaw()
	fz = handover.State{}
	if err := json.Unmarshal(saved, &fz); err != nil {
		t.Fatal(err)
	}
	checkHist(t, fz.Sessions[0])
	var job *jobs.Frozen
	for _, c := range fz.Sessions[0].Calls {
		if data := c.Task["Job"]; data != nil {
			job = new(jobs.Frozen)
			if err := json.Unmarshal(data, job); err != nil {
				t.Fatal(err)
			}
		}
	}
	if job == nil || job.Line != "echo later" || time.Until(job.Next) < 59*time.Minute {
		t.Errorf("Freeze wrote the job as %+v; want echo later, due in an hour", job)
	}

	// A playing scenario is not handed over: refused, naming it and the
	// session, and nothing stops.
	h.await(sid, "a scenario's overlay", func(s *state) bool { s.kit.overlay = idleOverlay{}; return true })
	err = h.sup.Precheck()
	if err == nil || !strings.Contains(err.Error(), "a scenario plays") || !strings.Contains(err.Error(), sid) {
		t.Errorf("Precheck with a scenario: %v; want a refusal naming it and %s", err, sid)
	}
	if _, _, _, err := h.sup.Freeze(context.Background()); err == nil {
		t.Error("Freeze with a scenario succeeded")
	}
	h.c.WaitFor("ticks after the refused freeze", func(*acptest.Msg) bool {
		return ticksIn(h.c.Output(sid, "term_1")) >= n+3
	})
	h.await(sid, "no overlay", func(s *state) bool { s.kit.overlay = nil; return true })
}

// checkHist checks the Hist of each tool call and terminal of fs, part of
// the format: where the session's History holds it, 0 where it does not.
func checkHist(t *testing.T, fs handover.Session) {
	t.Helper()
	calls, terms := map[string]int{}, map[string]int{}
	for i, e := range fs.History {
		switch {
		case e.Call != "":
			calls[e.Call] = i
		case e.Term != "":
			terms[e.Term] = i
		}
	}
	if len(calls) == 0 || len(terms) == 0 {
		t.Errorf("the History holds %d tool calls and %d terminals, want some of each", len(calls), len(terms))
	}
	for _, c := range fs.Calls {
		if c.Hist != calls[c.ID] {
			t.Errorf("tool call %s is written at %d, the History holds it at %d", c.ID, c.Hist, calls[c.ID])
		}
	}
	for _, ft := range fs.Terminals {
		if ft.Hist != terms[ft.ID] {
			t.Errorf("terminal %s is written at %d, the History holds it at %d", ft.ID, ft.Hist, terms[ft.ID])
		}
	}
}

// idleOverlay is a scenario's overlay that lists and takes nothing.
type idleOverlay struct{}

func (idleOverlay) Listed() []acp.BackgroundItem            { return nil }
func (idleOverlay) Cancel(bool, string, bool) (bool, error) { return false, nil }
func (idleOverlay) Resumed(*kit.Scene)                      {}
func (idleOverlay) Closing()                                {}

// ticksIn counts the "tick N" lines of out, all complete and in order from
// 1; -1 if one is missing or twice.
func ticksIn(out []byte) int {
	lines := strings.Split(string(out), "\r\n")
	lines = lines[:len(lines)-1]
	for i, l := range lines {
		if l != "tick "+strconv.Itoa(i+1) {
			return -1
		}
	}
	return len(lines)
}

// A service that /down is stopping, and that ignores SIGTERM, holds
// the upgrade back only for its kill grace: Precheck waits for it to
// stop rather than refusing, and answers once it has.
func TestPrecheckWaitsForAStoppingService(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{KillGrace: 500 * time.Millisecond})
	dir := filepath.Join(h.cwd, "proj")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := "[services.stubborn]\ncommand = \"trap '' TERM; echo up; exec sleep 60\"\nready = \"up\"\n"
	if err := os.WriteFile(filepath.Join(dir, stack.TOMLFile), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	var res struct {
		SessionID string `json:"sessionId"`
	}
	h.c.MustCall("session/new", map[string]any{"cwd": dir}, &res)
	sid := res.SessionID
	h.run(sid, "/up")
	h.idle(h.agentText(nil, sid, "Ready: stubborn."), sid, acp.StopEndTurn)
	h.prompt(sid, "/down")
	stopping := func(st *state) bool {
		return st.stack != nil && st.stack.Service("stubborn").Info().Draining
	}
	h.await(sid, "/down stopping the service", stopping)
	if err := h.sup.Precheck(); err != nil {
		t.Fatalf("Precheck while /down stops a service: %v; want it to wait for the stop", err)
	}
	h.inspect(sid, func(st *state) {
		if stopping(st) {
			t.Error("Precheck answered while the service was still being stopped")
		}
	})
}

// The numbers of a tool call's and a terminal's state are written as
// they are in the state an upgrade hands over (handover.Call.State,
// handover.Terminal.State): they are part of its format, and never
// change.
func TestHandoverStates(t *testing.T) {
	for _, tt := range []struct {
		name      string
		got, want int
	}{
		{"callAsking", int(callAsking), 0},
		{"callScheduled", int(callScheduled), 1},
		{"callRunning", int(callRunning), 2},
		{"callPaused", int(callPaused), 3},
		{"callDone", int(callDone), 4},
		{"callRetired", int(callRetired), 5},
		{"termRunning", int(termRunning), 0},
		{"termStopping", int(termStopping), 1},
		{"termExited", int(termExited), 2},
		{"termRetired", int(termRetired), 3},
	} {
		if tt.got != tt.want {
			t.Errorf("%s is %d in the upgrade's format, want %d", tt.name, tt.got, tt.want)
		}
	}
}

// A session whose handover cannot be read is left out of the new image,
// and so is its history: the new image does not make it live, so that
// another process (or a later session/load) can still reopen it.
func TestThawRefusedLeavesTheHistoryFree(t *testing.T) {
	dir := t.TempDir()
	open := func() *journal.Store { return openJournal(t, dir) }
	oldStore := open()
	old := newHarness(t, Config{History: oldStore})
	sid := old.newSession()
	old.run(sid, "echo done")
	old.exit(nil, sid, "term_1")
	saved, files, thaw, err := old.sup.Freeze(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(thaw)
	if err := oldStore.Close(); err != nil { // the old image's exec lets go of its locks
		t.Fatal(err)
	}

	// A terminal that names no tool call of its session: thawWork refuses it.
	var fz handover.State
	if err := json.Unmarshal(saved, &fz); err != nil || len(fz.Sessions) != 1 || len(fz.Sessions[0].Terminals) != 1 {
		t.Fatalf("Freeze wrote %s (%v); want one session with one terminal", saved, err)
	}
	fz.Sessions[0].Terminals[0].Call = "call_nope"
	bad, err := json.Marshal(fz)
	if err != nil {
		t.Fatal(err)
	}
	upgraded := newHarness(t, Config{History: open()})
	if err := upgraded.sup.Restore(bad, files, nil); err == nil || !strings.Contains(err.Error(), "no tool call call_nope") {
		t.Fatalf("Restore of a terminal without its tool call: %v, want it refused", err)
	}
	if _, err := open().Reopen(sid); err != nil {
		t.Errorf("after the refused restore another store cannot reopen the session: %v", err)
	}
}
