package scenario

import (
	"context"
	"crypto/rand"
	"flag"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/contain"
	"shellagent/contain/containtest"
	"shellagent/protocol"
	"shellagent/protocol/acptest"
	"shellagent/protocol/v1front"
	"shellagent/ptyio"
	"shellagent/supervisor"
)

// launcher holds the tests' commands in the containment mode that
// SHELLAGENT_TEST_CONTAINMENT names (default auto).
var launcher ptyio.Local

func TestMain(m *testing.M) {
	if err := flag.Set("test.parallel", "8"); err != nil {
		panic(err)
	}
	containtest.Main(m, func(c *contain.Containment) { launcher = ptyio.Local{Containment: c} }, nil)
}

// harness is one agent, with the kit, served over pipes to a strict test
// client. Every process a test starts carries a marker in its
// environment, so that the cleanup can prove none is left behind.
type harness struct {
	t      *testing.T
	c      *acptest.Client
	sup    *supervisor.Supervisor
	kit    *seenKit
	cwd    string
	marker string
	served chan struct{}
}

// seenKit is the Kit that remembers the session it last played in, for
// what no client can see (inspect).
type seenKit struct {
	Kit
	mu   sync.Mutex
	last *supervisor.Session
}

func (k *seenKit) Play(sc *supervisor.Scene, args string) {
	k.mu.Lock()
	k.last = sc.Session()
	k.mu.Unlock()
	k.Kit.Play(sc, args)
}

func newHarness(t *testing.T, cfg supervisor.Config) *harness {
	t.Helper()
	marker := "SHELLAGENT_TEST=" + rand.Text()
	cfg.Env = append(os.Environ(), marker)
	cfg.Shell, cfg.Launcher = "/bin/sh", launcher
	cfg.Log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	k := &seenKit{Kit: Kit{Log: cfg.Log}}
	if cfg.Kit != nil {
		k.Kit = cfg.Kit.(Kit)
	}
	cfg.Kit = k
	h := &harness{t: t, sup: supervisor.New(cfg), kit: k, cwd: t.TempDir(), marker: marker}
	h.c, h.served = h.serve(func(ctx context.Context, _ *protocol.Conn) error { return h.sup.Shutdown(ctx) })
	t.Cleanup(h.close)
	h.initialize(h.c)
	return h
}

// serve serves a new connection to the harness's supervisor; when the
// client goes away, end runs, then the connection is closed and served
// closed.
func (h *harness) serve(end func(context.Context, *protocol.Conn) error) (c *acptest.Client, served chan struct{}) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := protocol.NewConn(inR, outW, h.sup, protocol.Options{Log: h.kit.Log, Observer: h.sup.Checks(),
		Fronts: map[int]protocol.NewFront{v1front.ProtocolVersion: v1front.New}})
	served = make(chan struct{})
	go func() {
		defer close(served)
		<-conn.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := end(ctx, conn); err != nil {
			h.t.Errorf("end of connection: %v", err)
		}
		conn.Close()
		outW.Close()
	}()
	return acptest.New(h.t, outR, inW), served
}

// connect serves one more connection, whose owner detaches its sessions
// when it goes away, initialized in v2; its transcript is checked at the
// end of the test.
func (h *harness) connect() *acptest.Client {
	h.t.Helper()
	c, served := h.serve(func(ctx context.Context, conn *protocol.Conn) error { return h.sup.Detach(ctx, conn.Client()) })
	h.t.Cleanup(func() {
		c.Close()
		<-served
		c.Check()
	})
	h.initialize(c)
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

// close ends the connection, checks the transcript, and checks that no
// process of the test is left.
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

// await polls the session the kit last played in until cond holds.
func (h *harness) await(what string, cond func(sc *supervisor.Scene) bool) {
	h.t.Helper()
	h.kit.mu.Lock()
	s := h.kit.last
	h.kit.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := false
		s.Do(func(sc *supervisor.Scene) { ok = cond(sc) })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
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

// run sends a prompt and waits for it to be inserted.
func (h *harness) run(sid, line string) {
	h.t.Helper()
	id := h.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": line}}})
	if m := h.c.Wait(id); m.Error != nil {
		h.t.Fatalf("prompt %q: %v", line, m.Error)
	}
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

// never reports every update of sid that matches pred.
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

func (h *harness) callErr(method string, params any) *acptest.RPCError {
	h.t.Helper()
	_, err := h.c.Call(method, params)
	return err
}
