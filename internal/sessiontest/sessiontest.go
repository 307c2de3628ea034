// Package sessiontest is the test harness of the packages that test the
// supervisor through the wire (supervisor, scenario): one agent served
// over pipes to a strict test client (protocol/acptest), in the
// containment mode the tests run in, with the waits those tests share.
// Every process a test starts carries a marker in its environment, so
// that the harness's cleanup can prove that none is left behind.
//
// It takes the agent as an interface, so that package supervisor's own
// tests can use it without an import cycle.
package sessiontest

import (
	"context"
	"crypto/rand"
	"encoding/json"
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

// Launcher holds the tests' commands in the containment mode that
// containtest.ModeEnv names; Main sets it.
var Launcher ptyio.Local

// Main is the TestMain of a package that uses the harness: it runs more
// tests at once than there are cores (they mostly wait for processes,
// timers and kill graces; a -parallel on the command line still wins),
// and runs them in the containment (containtest.Main), which it hands to
// Launcher. Main does not return.
func Main(m *testing.M) {
	testloop.Parallel(8)
	containtest.Main(m, func(c *contain.Containment) { Launcher = ptyio.Local{Containment: c} }, nil)
}

// Agent is what a harness serves: the supervisor.
type Agent interface {
	protocol.Agent
	// Shutdown closes every session, as the agent does when stdin ends.
	Shutdown(context.Context) error
	// Detach detaches the sessions of a connection that went away.
	Detach(context.Context, protocol.Client) error
	// Checks is the observer a connection is made with.
	Checks() protocol.Observer
}

// Marker returns a new environment entry that marks the processes of one
// test.
func Marker() string { return "SHELLAGENT_TEST=" + rand.Text() }

// Log returns a logger that writes to t's log.
func Log(t testing.TB) *slog.Logger { return slog.New(slog.NewTextHandler(Writer{t}, nil)) }

// Writer writes to a test's log, a line a call.
type Writer struct{ T testing.TB }

func (w Writer) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Harness is one agent served over pipes to a strict test client, C.
type Harness struct {
	T     *testing.T
	C     *acptest.Client
	Agent Agent
	Log   *slog.Logger
	// Cwd is a directory of the test's own, the sessions' cwd.
	Cwd string
	// Marker is in the environment of every process of the test.
	Marker string
	// Served is closed once C's connection is closed.
	Served chan struct{}
}

// New serves agent to a new client, initialized in v2, whose going away
// shuts the agent down (what cmd/shellagent does when stdin ends). At the
// end of the test the connection is closed, its transcript checked, and
// no process with marker may be left. The agent was made with marker in
// its commands' environment and with log.
func New(t *testing.T, agent Agent, log *slog.Logger, marker string, opts ...acptest.Option) *Harness {
	t.Helper()
	h := &Harness{T: t, Agent: agent, Log: log, Cwd: t.TempDir(), Marker: marker}
	h.C, h.Served = h.Serve(func(ctx context.Context, _ *protocol.Conn) error { return agent.Shutdown(ctx) }, opts...)
	t.Cleanup(h.Close)
	h.Initialize(h.C)
	return h
}

// Serve serves a new connection to the harness's agent, read by a strict
// test client. When the client goes away (its stdin ends), end runs, then
// the connection is flushed and closed; served is closed after that.
func (h *Harness) Serve(end func(context.Context, *protocol.Conn) error, opts ...acptest.Option) (c *acptest.Client, served chan struct{}) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := protocol.NewConn(inR, outW, h.Agent, protocol.Options{Log: h.Log, Observer: h.Agent.Checks(),
		Fronts: map[int]protocol.NewFront{v1front.ProtocolVersion: v1front.New}})
	served = make(chan struct{})
	go func() {
		defer close(served)
		<-conn.Done()
		ctx, cancel := context.WithTimeout(context.Background(), testloop.Wait)
		defer cancel()
		if err := end(ctx, conn); err != nil {
			h.T.Errorf("end of connection: %v", err)
		}
		conn.Close()
		outW.Close()
	}()
	// A wait of the client is for what is bound to happen: generous, for
	// a loaded machine; an option of the test's own comes after it.
	opts = append([]acptest.Option{acptest.WithTimeout(testloop.Wait)}, opts...)
	return acptest.New(h.T, outR, inW, opts...), served
}

// Connect serves one more connection to the harness's agent, whose owner
// calls Detach when its client goes away, as a server with many clients
// would, and initializes it in v2. The client is closed and its
// transcript checked at the end of the test (before the harness's own
// connection).
func (h *Harness) Connect(opts ...acptest.Option) *acptest.Client {
	h.T.Helper()
	c := h.ConnectUninitialized(opts...)
	h.Initialize(c)
	return c
}

// ConnectUninitialized is Connect for a client that initializes itself.
func (h *Harness) ConnectUninitialized(opts ...acptest.Option) *acptest.Client {
	c, served := h.Serve(func(ctx context.Context, conn *protocol.Conn) error { return h.Agent.Detach(ctx, conn.Client()) }, opts...)
	h.T.Cleanup(func() {
		c.Close()
		<-served
		c.Check()
	})
	return c
}

// Initialize initializes c in v2.
func (h *Harness) Initialize(c *acptest.Client) {
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
}

// On returns the harness's helpers for another of its clients.
func (h *Harness) On(c *acptest.Client) *Harness {
	h2 := *h
	h2.C = c
	return &h2
}

// Close ends the connection as a client that goes away does, checks the
// transcript, and checks that no process of the test is left.
func (h *Harness) Close() {
	h.C.Close()
	<-h.Served
	h.C.Check()
	if left := acptest.ProcessesWith(h.Marker); len(left) > 0 {
		h.T.Errorf("processes left behind: %v", left)
		for _, pid := range left {
			p, _ := os.FindProcess(pid)
			p.Kill()
		}
	}
}

// NewSession makes a session in Cwd.
func (h *Harness) NewSession() string {
	var res struct {
		SessionID string `json:"sessionId"`
	}
	h.C.MustCall("session/new", map[string]any{"cwd": h.Cwd}, &res)
	return res.SessionID
}

// Text is a prompt of one text block.
func Text(s string) []map[string]string {
	return []map[string]string{{"type": "text", "text": s}}
}

// Prompt sends a prompt and returns the request id.
func (h *Harness) Prompt(sid, line string) int64 {
	return h.C.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": Text(line)})
}

// Run sends a prompt, waits for it to be inserted, and returns its
// message id.
func (h *Harness) Run(sid, line string) string {
	h.T.Helper()
	m := h.C.Wait(h.Prompt(sid, line))
	if m.Error != nil {
		h.T.Fatalf("prompt %q: %v", line, m.Error)
	}
	return m.MessageID()
}

// Update waits for the first session update of sid (after `after`, if not
// nil) of the given kind that also satisfies pred.
func (h *Harness) Update(after *acptest.Msg, sid, kind, desc string, pred func(*acptest.Msg) bool) *acptest.Msg {
	h.T.Helper()
	match := func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.Kind == kind && (pred == nil || pred(m))
	}
	if after == nil {
		return h.C.WaitFor(desc, match)
	}
	return h.C.WaitAfter(after, desc, match)
}

// Never reports every update of sid that matches pred: what must not have
// happened.
func (h *Harness) Never(sid, what string, pred func(*acptest.Msg) bool) {
	h.T.Helper()
	for _, m := range h.C.Updates(sid) {
		if pred(m) {
			h.T.Errorf("%s: %s", what, m.Raw)
		}
	}
}

// Idle waits for a state_update idle with the stop reason.
func (h *Harness) Idle(after *acptest.Msg, sid, stop string) *acptest.Msg {
	h.T.Helper()
	return h.Update(after, sid, acp.KindState, "idle "+stop, func(m *acptest.Msg) bool {
		return m.State() == "idle" && m.StopReason() == stop
	})
}

// Exit waits for the exitStatus of term.
func (h *Harness) Exit(after *acptest.Msg, sid, term string) *acptest.Msg {
	h.T.Helper()
	return h.Update(after, sid, acp.KindTerminal, term+" exitStatus", func(m *acptest.Msg) bool {
		return m.TerminalID() == term && m.ExitStatus() != nil
	})
}

// ToolStatus waits for an update of tool call call with the status.
func (h *Harness) ToolStatus(after *acptest.Msg, sid, call, status string) *acptest.Msg {
	h.T.Helper()
	return h.Update(after, sid, acp.KindToolCall, call+" "+status, func(m *acptest.Msg) bool {
		return m.ToolCallID() == call && m.Status() == status
	})
}

// Listed waits for a state_update whose list is exactly want (terminal or
// tool call ids).
func (h *Harness) Listed(after *acptest.Msg, sid string, want ...string) *acptest.Msg {
	h.T.Helper()
	return h.Update(after, sid, acp.KindState, fmt.Sprintf("background %v", want), func(m *acptest.Msg) bool {
		return SameIDs(m.Background(), want)
	})
}

// SameIDs reports whether items are want, in order.
func SameIDs(items []acptest.Item, want []string) bool {
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

// Output waits until the terminal's reconstructed output contains s.
func (h *Harness) Output(sid, term, s string) {
	h.T.Helper()
	deadline := time.Now().Add(testloop.Wait)
	for !strings.Contains(string(h.C.Output(sid, term)), s) {
		if time.Now().After(deadline) {
			h.T.Fatalf("%s never printed %q; got %q", term, s, h.C.Output(sid, term))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CallErr calls method and returns its error, if any.
func (h *Harness) CallErr(method string, params any) *acptest.RPCError {
	h.T.Helper()
	_, err := h.C.Call(method, params)
	return err
}

// Poll calls cond until it holds, failing the test after testloop.Wait;
// what names what it waits for.
func Poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testloop.Wait)
	for pause := 100 * time.Microsecond; !cond(); pause = min(2*pause, 10*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(pause)
	}
}

// ExitCode is the exit code of an exitStatus update, if it has one.
func ExitCode(m *acptest.Msg) (int, bool) {
	v, ok := m.ExitStatus()["exitCode"].(float64)
	return int(v), ok
}

// SignalOf is the signal of an exitStatus update, if any.
func SignalOf(m *acptest.Msg) string {
	s, _ := m.ExitStatus()["signal"].(string)
	return s
}

// MustJSON is v in JSON.
func MustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
