package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/contain"
	"shellagent/contain/containtest"
	"shellagent/internal/testloop"
	"shellagent/protocol"
	"shellagent/protocol/acptest"
	"shellagent/protocol/v1front"
	"shellagent/ptyio"
)

// launcher holds the tests' commands in the containment mode that
// SHELLAGENT_TEST_CONTAINMENT names (default auto).
var launcher ptyio.Local

func TestMain(m *testing.M) {
	// The tests mostly wait (for processes, timers, kill graces) rather
	// than compute: run more of them at once than there are cores. A
	// -parallel on the command line still wins.
	if err := flag.Set("test.parallel", "8"); err != nil {
		panic(err)
	}
	// Every Shutdown of the tests checks the promise at testloop.Bound:
	// under load the last final updates were seen to go out after 700 ms.
	shutdownSlack = testloop.Bound(shutdownSlack)
	containtest.Main(m, func(c *contain.Containment) { launcher = ptyio.Local{Containment: c} }, nil)
}

// harness is one agent served over pipes to a strict test client. Every
// process a test starts carries a marker in its environment, so that the
// cleanup can prove none is left behind.
type harness struct {
	t      *testing.T
	c      *acptest.Client
	sup    *Supervisor
	cwd    string
	marker string
	served chan struct{}
}

func newHarness(t *testing.T, cfg Config, opts ...acptest.Option) *harness {
	t.Helper()
	marker := "SHELLAGENT_TEST=" + rand.Text()
	cfg.Env = append(os.Environ(), marker)
	if cfg.Shell == "" {
		cfg.Shell = "/bin/sh"
	}
	if cfg.Launcher == nil {
		cfg.Launcher = launcher
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	h := &harness{t: t, sup: New(cfg), cwd: t.TempDir(), marker: marker}
	// What cmd/shellagent does when stdin ends: close every session.
	h.c, h.served = h.serve(func(ctx context.Context, _ *protocol.Conn) error { return h.sup.Shutdown(ctx) }, opts...)
	t.Cleanup(h.close)
	h.initialize(h.c)
	return h
}

// serve serves a new connection to the harness's supervisor, read by a
// strict test client. When the client goes away (its stdin ends), end
// runs, then the connection is flushed and closed; served is closed after
// that.
func (h *harness) serve(end func(context.Context, *protocol.Conn) error, opts ...acptest.Option) (c *acptest.Client, served chan struct{}) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	log := h.sup.cfg.Log
	conn := protocol.NewConn(inR, outW, h.sup, protocol.Options{Log: log, Observer: h.sup.Checks(),
		Fronts: map[int]protocol.NewFront{v1front.ProtocolVersion: v1front.New}})
	served = make(chan struct{})
	go func() {
		defer close(served)
		<-conn.Done()
		ctx, cancel := context.WithTimeout(context.Background(), testloop.Wait)
		defer cancel()
		if err := end(ctx, conn); err != nil {
			h.t.Errorf("end of connection: %v", err)
		}
		conn.Close()
		outW.Close()
	}()
	// A wait of the client is for what is bound to happen: generous, for
	// a loaded machine; an option of the test's own comes after it.
	opts = append([]acptest.Option{acptest.WithTimeout(testloop.Wait)}, opts...)
	return acptest.New(h.t, outR, inW, opts...), served
}

// connect serves one more connection to the harness's supervisor, whose
// owner calls Detach when its client goes away, as a server with many
// clients would, and initializes it in v2. The client is closed and its
// transcript checked at the end of the test (before the harness's own
// connection).
func (h *harness) connect(opts ...acptest.Option) *acptest.Client {
	h.t.Helper()
	c := h.connectUninitialized(opts...)
	h.initialize(c)
	return c
}

// connectUninitialized is connect for a client that initializes itself.
func (h *harness) connectUninitialized(opts ...acptest.Option) *acptest.Client {
	c, served := h.serve(func(ctx context.Context, conn *protocol.Conn) error { return h.sup.Detach(ctx, conn.Client()) }, opts...)
	h.t.Cleanup(func() {
		c.Close()
		<-served
		c.Check()
	})
	return c
}

func (h *harness) initialize(c *acptest.Client) {
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
}

// on returns the harness's helpers for another of its clients.
func (h *harness) on(c *acptest.Client) *harness {
	h2 := *h
	h2.c = c
	return &h2
}

// close ends the connection as a client that goes away does, checks the
// transcript, and checks that no process of the test is left.
func (h *harness) close() {
	h.c.Close()
	<-h.served
	h.c.Check()
	if left := acptest.ProcessesWith(h.marker); len(left) > 0 {
		h.t.Errorf("processes left behind: %v", left)
		for _, pid := range left {
			p, _ := os.FindProcess(pid)
			p.Kill()
		}
	}
}

// inspect runs f on the state of session sid, as the supervisor's own
// goroutines do: for what no client can see (a detached session, what it
// holds).
func (h *harness) inspect(sid string, f func(st *state)) {
	h.t.Helper()
	s, err := h.sup.session(sid)
	if err != nil {
		h.t.Fatal(err)
	}
	s.doWait(f)
}

// await polls the state of session sid until cond holds.
func (h *harness) await(sid, what string, cond func(st *state) bool) {
	h.t.Helper()
	deadline := time.Now().Add(testloop.Wait)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		ok := false
		h.inspect(sid, func(st *state) { ok = cond(st) })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("session %s: timed out waiting for %s", sid, what)
		}
		time.Sleep(pause)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (h *harness) newSession() string {
	var res struct {
		SessionID string `json:"sessionId"`
	}
	h.c.MustCall("session/new", map[string]any{"cwd": h.cwd}, &res)
	return res.SessionID
}

func text(s string) []map[string]string {
	return []map[string]string{{"type": "text", "text": s}}
}

// prompt sends a prompt and returns the request id.
func (h *harness) prompt(sid, line string) int64 {
	return h.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": text(line)})
}

// run sends a prompt and waits for it to be inserted.
func (h *harness) run(sid, line string) string {
	h.t.Helper()
	m := h.c.Wait(h.prompt(sid, line))
	if m.Error != nil {
		h.t.Fatalf("prompt %q: %v", line, m.Error)
	}
	return m.MessageID()
}

// update waits for the first session update of sid (after `after`, if not
// nil) of the given kind that also satisfies pred.
func (h *harness) update(after *acptest.Msg, sid, kind, desc string, pred func(*acptest.Msg) bool) *acptest.Msg {
	h.t.Helper()
	match := func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.Kind == kind && (pred == nil || pred(m))
	}
	if after == nil {
		return h.c.WaitFor(desc, match)
	}
	return h.c.WaitAfter(after, desc, match)
}

// never reports every update of sid that matches pred: what must not
// have happened.
func (h *harness) never(sid, what string, pred func(*acptest.Msg) bool) {
	h.t.Helper()
	for _, m := range h.c.Updates(sid) {
		if pred(m) {
			h.t.Errorf("%s: %s", what, m.Raw)
		}
	}
}

func (h *harness) idle(after *acptest.Msg, sid, stop string) *acptest.Msg {
	h.t.Helper()
	return h.update(after, sid, acp.KindState, "idle "+stop, func(m *acptest.Msg) bool {
		return m.State() == "idle" && m.StopReason() == stop
	})
}

func (h *harness) exit(after *acptest.Msg, sid, term string) *acptest.Msg {
	h.t.Helper()
	return h.update(after, sid, acp.KindTerminal, term+" exitStatus", func(m *acptest.Msg) bool {
		return m.TerminalID() == term && m.ExitStatus() != nil
	})
}

func (h *harness) toolStatus(after *acptest.Msg, sid, call, status string) *acptest.Msg {
	h.t.Helper()
	return h.update(after, sid, acp.KindToolCall, call+" "+status, func(m *acptest.Msg) bool {
		return m.ToolCallID() == call && m.Status() == status
	})
}

// listed waits for a state_update whose list is exactly want (terminal or
// tool call ids).
func (h *harness) listed(after *acptest.Msg, sid string, want ...string) *acptest.Msg {
	h.t.Helper()
	return h.update(after, sid, acp.KindState, fmt.Sprintf("background %v", want), func(m *acptest.Msg) bool {
		return sameIDs(m.Background(), want)
	})
}

func sameIDs(items []acptest.Item, want []string) bool {
	if len(items) != len(want) {
		return false
	}
	for i := range items {
		if items[i].ID != want[i] {
			return false
		}
	}
	return true
}

// output waits until the terminal's reconstructed output contains s.
func (h *harness) output(sid, term, s string) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(string(h.c.Output(sid, term)), s) {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s never printed %q; got %q", term, s, h.c.Output(sid, term))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) callErr(method string, params any) *acptest.RPCError {
	h.t.Helper()
	_, err := h.c.Call(method, params)
	return err
}

func exitCode(m *acptest.Msg) (int, bool) {
	v, ok := m.ExitStatus()["exitCode"].(float64)
	return int(v), ok
}

func signalOf(m *acptest.Msg) string {
	s, _ := m.ExitStatus()["signal"].(string)
	return s
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
