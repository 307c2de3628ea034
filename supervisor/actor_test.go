package supervisor

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/actor"
	"shellagent/internal/sessiontest"
	"shellagent/protocol/acptest"
	"shellagent/ptyio"
	"shellagent/supervisor/settings"
)

// holdAt is where a gate holds up a command.
type holdAt int

const (
	holdLaunch  holdAt = iota // before it starts: a slow fork, a fork lock held by a reap pass
	holdReturn                // after it started and its process reported an event, before Launch returns
	holdMembers               // in each Members call: a slow scan of /proc for /ps
)

// gate is a ptyio.Launcher that holds up, at one point, every command
// whose line contains "# slow", until the test opens it; other commands
// pass. Each hold sends the command's line on held first.
type gate struct {
	ptyio.Launcher
	at       holdAt
	held     chan string
	open     chan struct{}
	openOnce sync.Once
}

const slowTag = "# slow"

// gateTimeout is when a gate opens by itself: a test whose requests are
// held up behind it (the request loop blocked in a launch) then fails on
// the order of what it saw instead of hanging.
const gateTimeout = 30 * time.Second

func newGate(at holdAt) *gate {
	return &gate{Launcher: sessiontest.Launcher, at: at, held: make(chan string), open: make(chan struct{})}
}

func (g *gate) release() { g.openOnce.Do(func() { close(g.open) }) }

func (g *gate) hold(line string) {
	g.held <- line
	<-g.open
}

func (g *gate) Launch(cmd ptyio.Command, out io.Writer, ev ptyio.Events) (ptyio.Process, error) {
	if !strings.Contains(cmd.Line, slowTag) {
		return g.Launcher.Launch(cmd, out, ev)
	}
	switch g.at {
	case holdLaunch:
		g.hold(cmd.Line)
		return g.Launcher.Launch(cmd, out, ev)
	case holdReturn:
		first := &firstEvent{Events: ev, happened: make(chan struct{})}
		p, err := g.Launcher.Launch(cmd, out, first)
		if err == nil {
			<-first.happened
		}
		g.hold(cmd.Line)
		return p, err
	}
	p, err := g.Launcher.Launch(cmd, out, ev)
	if err != nil {
		return nil, err
	}
	return heldMembers{p, g, cmd.Line}, nil
}

// firstEvent forwards a process's events and closes happened once the
// first one has been delivered.
type firstEvent struct {
	ptyio.Events
	once     sync.Once
	happened chan struct{}
}

func (e *firstEvent) ShellReturned(st ptyio.Status) {
	e.Events.ShellReturned(st)
	e.once.Do(func() { close(e.happened) })
}

func (e *firstEvent) Exited(x ptyio.Exit) {
	e.Events.Exited(x)
	e.once.Do(func() { close(e.happened) })
}

type heldMembers struct {
	ptyio.Process
	g    *gate
	line string
}

func (p heldMembers) Members() ([]ptyio.Member, error) {
	p.g.hold(p.line)
	return p.Process.Members()
}

// gated returns a harness whose slow commands go through g. The gate opens
// after gateTimeout, and at the end of the test at the latest (before the
// harness closes the sessions).
func gated(t *testing.T, g *gate) *harness {
	h := newHarness(t, Config{Launcher: g})
	timer := time.AfterFunc(gateTimeout, g.release)
	t.Cleanup(func() {
		timer.Stop()
		g.release()
	})
	return h
}

// before fails the test unless m came before the message that shows the
// gate open: what must not have waited for it.
func before(t *testing.T, m, opened *acptest.Msg, what string) {
	t.Helper()
	if m.Seq > opened.Seq {
		t.Errorf("%s came after the slow work of the other session returned (#%d > #%d): it was held up", what, m.Seq, opened.Seq)
	}
}

// held waits until the gate holds up line.
func (g *gate) wait(t *testing.T, line string) {
	t.Helper()
	select {
	case got := <-g.held:
		if got != line {
			t.Fatalf("the gate held up %q, want %q", got, line)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the gate never held up %q", line)
	}
}

// barrier returns once the agent has read every request sent before it:
// its answer comes after the request loop has passed them.
func (h *harness) barrier() {
	h.t.Helper()
	h.c.MustCall("session/list", map[string]any{}, nil)
}

// silent reports what session sid said about its work (tool calls,
// terminals, agent messages) so far: nothing may have gone out while the
// event that launches it is not complete.
func (h *harness) silent(sid, while string) {
	h.t.Helper()
	h.never(sid, "reported "+while, func(m *acptest.Msg) bool {
		return m.Kind == acp.KindToolCall || m.Kind == acp.KindTerminal || m.Kind == acp.KindTerminalOutput || m.Kind == acp.KindAgentMessage
	})
}

// TestASlowLaunchHoldsUpNoOtherSession: while the launch of one session's
// command is held up, another session on the same connection is served in
// full (a prompt run to its end, /ps, set_config_option), and so are
// session/list and session/new. The slow session's own later requests wait
// for the launch without holding up the connection, and are served after
// it, in order.
func TestASlowLaunchHoldsUpNoOtherSession(t *testing.T) {
	t.Parallel()
	g := newGate(holdLaunch)
	h := gated(t, g)
	a, b := h.newSession(), h.newSession()
	line := "echo from-a " + slowTag
	h.run(a, line) // inserted and answered before the launch
	g.wait(t, line)

	h.run(b, "echo from-b")
	h.output(b, "term_1", "from-b")
	idle := h.idle(nil, b, acp.StopEndTurn)
	h.run(b, "/ps")
	bps := h.update(nil, b, acp.KindAgentMessage, "b's /ps", func(m *acptest.Msg) bool { return m.Text() == "No background work." })
	h.c.MustCall("session/set_config_option", map[string]any{"sessionId": b, "configId": settings.OptKillGrace, "type": "id", "value": "10s"}, nil)
	var list struct {
		Sessions []struct {
			SessionID string `json:"sessionId"`
		} `json:"sessions"`
	}
	h.c.MustCall("session/list", map[string]any{}, &list)
	if len(list.Sessions) != 2 {
		t.Errorf("session/list during a's launch: %+v", list)
	}
	c := h.newSession()

	cancel := h.c.Send("terminal/cancel", map[string]string{"sessionId": a, "terminalId": "term_1"})
	h.barrier()
	h.silent(a, "before its launch returned")
	if m := h.c.Updates(a); len(m) != 2 { // the prompt's event so far
		t.Errorf("a reported %d updates before its launch returned, want 2 (user_message, state_update running): %v", len(m), m)
	}

	g.release()
	announced := h.toolStatus(nil, a, "call_1", acp.StatusInProgress)
	before(t, idle, announced, "b's turn")
	before(t, bps, announced, "b's /ps")
	if m := h.c.Wait(cancel); m.Error != nil || m.Seq < announced.Seq {
		t.Errorf("terminal/cancel sent during the launch: answered %v at #%d, before the terminal was announced at #%d", m.Error, m.Seq, announced.Seq)
	}
	h.exit(announced, a, "term_1")
	h.idle(nil, a, acp.StopEndTurn)
	h.run(c, "true")
	h.idle(nil, c, acp.StopEndTurn)
}

// TestRequestsDuringALaunch: what arrives while a command's launch is held
// up applies to it once it is announced, as it would have right after: a
// cancel or a close stops it (one exitStatus, after its announcement), /bg
// moves it to the background.
func TestRequestsDuringALaunch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		during func(h *harness, sid string) int64 // a request id to wait for, or 0
		after  func(h *harness, sid string, announced *acptest.Msg)
	}{
		{"session/cancel", func(h *harness, sid string) int64 {
			h.c.Notify("session/cancel", map[string]string{"sessionId": sid})
			return 0
		}, func(h *harness, sid string, announced *acptest.Msg) {
			exit := h.exit(announced, sid, "term_1")
			if signalOf(exit) != "SIGTERM" {
				h.t.Errorf("exitStatus %v, want SIGTERM", exit.ExitStatus())
			}
			h.toolStatus(exit, sid, "call_1", acp.StatusCancelled)
			h.idle(exit, sid, acp.StopCancelled)
		}},
		{"terminal/cancel", func(h *harness, sid string) int64 {
			return h.c.Send("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"})
		}, func(h *harness, sid string, announced *acptest.Msg) {
			exit := h.exit(announced, sid, "term_1")
			h.toolStatus(exit, sid, "call_1", acp.StatusFailed)
			h.idle(exit, sid, acp.StopEndTurn)
		}},
		{"session/close", func(h *harness, sid string) int64 {
			return h.c.Send("session/close", map[string]string{"sessionId": sid})
		}, func(h *harness, sid string, announced *acptest.Msg) {
			exit := h.exit(announced, sid, "term_1")
			h.idle(exit, sid, acp.StopCancelled)
		}},
		// The terminal is unknown until the launch returns: the write and
		// the resize wait for it, and are answered {} after it.
		{"_shellagent/terminal/write", func(h *harness, sid string) int64 {
			return h.c.Send(acp.MethodWriteTerminal, map[string]string{"sessionId": sid, "terminalId": "term_1", "data": "eA=="})
		}, func(h *harness, sid string, announced *acptest.Msg) {
			answeredAfter(h, acp.MethodWriteTerminal, announced)
			h.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"}, nil)
			h.idle(h.exit(announced, sid, "term_1"), sid, acp.StopEndTurn)
		}},
		{"_shellagent/terminal/resize", func(h *harness, sid string) int64 {
			return h.c.Send(acp.MethodResizeTerminal, map[string]any{"sessionId": sid, "terminalId": "term_1", "size": map[string]int{"cols": 80, "rows": 20}})
		}, func(h *harness, sid string, announced *acptest.Msg) {
			resized := h.update(announced, sid, acp.KindTerminal, "the new size", func(m *acptest.Msg) bool { return m.Update["size"] != nil })
			answeredAfter(h, acp.MethodResizeTerminal, resized)
			h.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"}, nil)
			h.idle(h.exit(announced, sid, "term_1"), sid, acp.StopEndTurn)
		}},
		{"/bg", func(h *harness, sid string) int64 {
			return h.prompt(sid, "/bg")
		}, func(h *harness, sid string, announced *acptest.Msg) {
			h.update(announced, sid, acp.KindUserMessage, "/bg inserted after the announcement", nil)
			done := h.toolStatus(announced, sid, "call_1", acp.StatusCompleted)
			h.listed(done, sid, "term_1")
			h.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"}, nil)
			h.listed(h.exit(done, sid, "term_1"), sid)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGate(holdLaunch)
			h := gated(t, g)
			sid := h.newSession()
			line := "sleep 30 " + slowTag
			h.run(sid, line)
			g.wait(t, line)
			id := tt.during(h, sid)
			h.barrier()
			h.silent(sid, "while its command's launch was held up")
			g.release()
			if id != 0 {
				if m := h.c.Wait(id); m.Error != nil {
					t.Errorf("%s during the launch: %v", tt.name, m.Error)
				}
			}
			announced := h.update(nil, sid, acp.KindTerminal, "term_1 announced", func(m *acptest.Msg) bool { return m.TerminalID() == "term_1" })
			tt.after(h, sid, announced)
			exits := 0
			for _, m := range h.c.Updates(sid) {
				if m.Kind == acp.KindTerminal && m.ExitStatus() != nil {
					exits++
				}
			}
			if exits != 1 {
				t.Errorf("%d exitStatus for term_1, want 1", exits)
			}
		})
	}
}

// answeredAfter fails the test unless the request of method was answered
// {} after m.
func answeredAfter(h *harness, method string, m *acptest.Msg) {
	h.t.Helper()
	for _, r := range h.c.Transcript() {
		if r.ReqMethod == method {
			if r.Seq < m.Seq || string(r.Result) != "{}" {
				h.t.Errorf("%s answered %s at #%d, before #%d %s", method, r, r.Seq, m.Seq, m)
			}
			return
		}
	}
	h.t.Errorf("%s not answered", method)
}

// TestEventsBeforeTheLaunchIsApplied: a process whose events come before
// its Launch has returned (it ended at once, or its shell returned) is
// still reported in order: its tool call and terminal first, then its
// output, then what the event says.
func TestEventsBeforeTheLaunchIsApplied(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		line  string
		after func(h *harness, sid string, announced *acptest.Msg)
	}{
		{"it exited", "echo early " + slowTag, func(h *harness, sid string, announced *acptest.Msg) {
			h.output(sid, "term_1", "early")
			exit := h.exit(announced, sid, "term_1")
			if code, ok := exitCode(exit); !ok || code != 0 {
				h.t.Errorf("exitStatus %v, want exit code 0", exit.ExitStatus())
			}
			h.idle(h.toolStatus(exit, sid, "call_1", acp.StatusCompleted), sid, acp.StopEndTurn)
		}},
		{"its shell returned", "sleep 30 & echo early " + slowTag, func(h *harness, sid string, announced *acptest.Msg) {
			h.output(sid, "term_1", "early")
			done := h.toolStatus(announced, sid, "call_1", acp.StatusCompleted)
			h.idle(done, sid, acp.StopEndTurn)
			h.listed(done, sid, "term_1")
			h.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"}, nil)
			h.listed(h.exit(done, sid, "term_1"), sid)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGate(holdReturn)
			h := gated(t, g)
			sid := h.newSession()
			h.run(sid, tt.line)
			g.wait(t, tt.line) // its process has reported an event to the session
			h.barrier()
			h.silent(sid, "before its launch returned")
			g.release()
			announced := h.toolStatus(nil, sid, "call_1", acp.StatusInProgress)
			h.update(announced, sid, acp.KindTerminal, "term_1 announced", func(m *acptest.Msg) bool { return m.TerminalID() == "term_1" })
			tt.after(h, sid, announced)
		})
	}
}

// TestASlowPsHoldsUpNoOtherSession: /ps scans each listed terminal's
// processes outside the session's mutex: while the scan is held up,
// another session runs a prompt to its end.
func TestASlowPsHoldsUpNoOtherSession(t *testing.T) {
	t.Parallel()
	g := newGate(holdMembers)
	h := gated(t, g)
	a, b := h.newSession(), h.newSession()
	line := "sleep 30 " + slowTag
	h.run(a, "/bg "+line)
	h.listed(nil, a, "term_1")
	h.run(a, "/ps")
	g.wait(t, line)

	h.run(b, "echo from-b")
	h.output(b, "term_1", "from-b")
	idle := h.idle(nil, b, acp.StopEndTurn)
	h.barrier()
	h.never(a, "/ps answered before its scan returned", func(m *acptest.Msg) bool { return m.Kind == acp.KindAgentMessage })

	g.release()
	ps := h.update(nil, a, acp.KindAgentMessage, "a's /ps", nil)
	before(t, idle, ps, "b's turn")
	if !strings.Contains(ps.Text(), "term_1  terminal  "+line) || !strings.Contains(ps.Text(), ", pid ") {
		t.Errorf("/ps: %q", ps.Text())
	}
	h.c.MustCall("terminal/cancel", map[string]string{"sessionId": a, "terminalId": "term_1"}, nil)
	h.exit(ps, a, "term_1")
}

// TestSlowWorkReadsStraightDown: an entry that does slow work finishes
// it, in the order it is written, before the next entry runs; meanwhile
// peek answers with what the state was when the slow work began (not
// what came before, nor what follows in the entry), and doWait waits for
// the whole entry.
func TestSlowWorkReadsStraightDown(t *testing.T) {
	t.Parallel()
	sv := New(Config{Launcher: failLauncher{}, Log: discardLog})
	c := newQuietClient()
	sid := must(sv.NewSession(c, &acp.NewSessionRequest{Cwd: t.TempDir()})).SessionID
	s := must(sv.live.get(sid))
	var log []string
	open, slowed := make(chan struct{}), make(chan struct{})
	s.do(func(st *state) {
		st.title = "before"
		log = append(log, "before")
		st.s.slow()
		close(slowed)
		<-open
		log = append(log, "after the slow work")
		st.title = "after"
	})
	s.do(func(*state) { log = append(log, "next entry") })
	<-slowed
	if title := s.peek().title; title != "before" {
		t.Errorf("peek during slow work: title %q, want %q", title, "before")
	}
	waited := make(chan []string, 1)
	go s.doWait(func(*state) { waited <- slices.Clone(log) })
	select {
	case got := <-waited:
		t.Fatalf("doWait ran during the slow work, with %v", got)
	case <-time.After(50 * time.Millisecond):
	}
	close(open)
	want := []string{"before", "after the slow work", "next entry"}
	if got := <-waited; !slices.Equal(got, want) {
		t.Errorf("entries ran %v, want %v", got, want)
	}
	if title := s.peek().title; title != "after" {
		t.Errorf("peek after the slow work: title %q, want %q", title, "after")
	}
	if err := sv.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestABusySessionQueuesEntriesInOrder: while a session's actor does slow
// work, entries queue without waiting and then run in the order they
// came; beyond actor.MaxQueued the next one waits for room; reads (peek, here
// session/list) never wait.
func TestABusySessionQueuesEntriesInOrder(t *testing.T) {
	t.Parallel()
	sv := New(Config{Launcher: failLauncher{}, Log: discardLog})
	c := newQuietClient()
	sid := must(sv.NewSession(c, &acp.NewSessionRequest{Cwd: t.TempDir()})).SessionID
	s := must(sv.live.get(sid))
	var order []int
	open := make(chan struct{})
	s.do(func(st *state) {
		st.s.slow()
		<-open
		order = append(order, -1)
	})
	const entries = actor.MaxQueued + 10
	var entered atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range entries {
			s.do(func(*state) { order = append(order, i) })
			entered.Add(1)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for entered.Load() < actor.MaxQueued && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // room to go wrong
	if n := entered.Load(); n != actor.MaxQueued {
		t.Errorf("%d entries entered a session busy with slow work, want %d (then wait for room)", n, actor.MaxQueued)
	}
	if _, err := sv.ListSessions(c, &acp.ListSessionsRequest{}); err != nil {
		t.Error(err)
	}
	close(open)
	<-done
	want := []int{-1}
	for i := range entries {
		want = append(want, i)
	}
	var got []int
	s.doWait(func(*state) { got = slices.Clone(order) })
	if !slices.Equal(got, want) {
		t.Errorf("entries ran in the order %v…, want -1, 0, 1, …", got[:min(len(got), 10)])
	}
	if err := sv.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// saidClient is a quietClient that also records the agent's messages.
type saidClient struct {
	*quietClient
	mu    sync.Mutex
	said  []string
	acted chan []string // what had been said at each Acted
}

// Acted implements protocol.PromptActed.
func (c *saidClient) Acted(string) { c.acted <- c.messages() }

func (c *saidClient) Update(sid string, u acp.Update) {
	c.quietClient.Update(sid, u)
	if m, ok := u.(*acp.Message); ok && m.SessionUpdate == acp.KindAgentMessage {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.said = append(c.said, m.Content[0].Text)
	}
}

func (c *saidClient) messages() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.said)
}

// TestAnImmediatePromptSaysWhenItHasActed: a prompt that acts at once
// beside the foreground turn has no turn to end, so the session tells its
// client when what it does has been sent (the v1 front answers it then),
// even when that takes slow work: here /ps's scan, held up, of a session
// whose actor was busy with a launch when the prompt came. Prompt itself does not
// wait for it.
func TestAnImmediatePromptSaysWhenItHasActed(t *testing.T) {
	t.Parallel()
	g := newGate(holdMembers)
	t.Cleanup(g.release)
	marker := "SHELLAGENT_TEST=" + t.Name()
	sv := New(Config{Launcher: g, Shell: "/bin/sh", Env: append(os.Environ(), marker), Log: discardLog})
	c := &saidClient{quietClient: newQuietClient(), acted: make(chan []string, 1)}
	sid := must(sv.NewSession(c, &acp.NewSessionRequest{Cwd: t.TempDir()})).SessionID
	prompt := func(line string) {
		sv.Prompt(context.Background(), c, &acp.PromptRequest{SessionID: sid, Prompt: []acp.ContentBlock{acp.TextBlock(line)}}, func(any, error) {})
	}
	line := "sleep 30 " + slowTag
	prompt("/bg " + line)
	c.waitIdles(t, 1)
	prompt("sleep 30") // the foreground; its launch may still be in flight
	prompt("/ps")      // returns at once
	g.wait(t, line)
	select {
	case said := <-c.acted:
		t.Fatalf("the /ps said it had acted while its scan was held up, having said %q", said)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	select {
	case said := <-c.acted:
		if len(said) != 1 || !strings.HasPrefix(said[0], "Background work:\nterm_1  terminal  "+line) {
			t.Errorf("when the /ps said it had acted, the agent had said %q", said)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the /ps never said it had acted")
	}
	if err := sv.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	if left := acptest.ProcessesWith(marker); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}
