package acptest

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSendAndCall(t *testing.T) {
	h := newHarness(t)
	if id := h.c.Send("initialize", map[string]any{"protocolVersion": 2}); id != 1 {
		t.Fatalf("first id = %d", id)
	}
	if got, want := h.next(), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}`; got != want {
		t.Fatalf("sent %s, want %s", got, want)
	}
	h.c.Notify("session/cancel", map[string]any{"sessionId": "s"})
	if got, want := h.next(), `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`; got != want {
		t.Fatalf("sent %s, want %s", got, want)
	}
	h.c.Send("session/list", nil)
	if got, want := h.next(), `{"jsonrpc":"2.0","id":2,"method":"session/list"}`; got != want {
		t.Fatalf("sent %s, want %s", got, want)
	}

	var wg sync.WaitGroup
	wg.Go(func() { // the agent
		h.agent(`{"jsonrpc":"2.0","id":2,"result":{"sessions":[]}}`)
		_ = h.next() // session/new
		h.agent(`{"jsonrpc":"2.0","id":3,"result":{"sessionId":"abc"}}`)
		_ = h.next() // session/close
		h.agent(`{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"bad"}}`)
	})
	if m := h.c.Wait(2); m.ReqMethod != "session/list" || string(m.Result) != `{"sessions":[]}` {
		t.Errorf("Wait(2) = %v", m)
	}
	var res struct{ SessionID string }
	h.c.MustCall("session/new", map[string]any{"cwd": "/"}, &res)
	if res.SessionID != "abc" {
		t.Errorf("MustCall result = %+v", res)
	}
	_, rerr := h.c.Call("session/close", map[string]any{"sessionId": "abc"})
	if rerr == nil || rerr.Code != -32602 || rerr.Error() != "jsonrpc error -32602: bad" {
		t.Errorf("Call error = %v", rerr)
	}
	wg.Wait()
	h.end()
	if errs := h.rec.Errors(); len(errs) != 0 {
		t.Errorf("errors: %q", errs)
	}
}

func TestPermissionHandler(t *testing.T) {
	var got Msg
	h := newHarness(t, WithPermissionHandler(func(m Msg) any {
		got = m
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow"}}
	}))
	h.agent(`{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s","title":"t","options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}`)
	if line, want := h.next(), `{"jsonrpc":"2.0","id":"p1","result":{"outcome":{"optionId":"allow","outcome":"selected"}}}`; line != want {
		t.Errorf("answered %s, want %s", line, want)
	}
	if got.SessionID != "s" || got.Seq != 0 {
		t.Errorf("handler got %+v", got)
	}
	h.end()
}

func TestRespondManually(t *testing.T) {
	h := newHarness(t)
	h.agent(`{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"s","title":"t","options":[]}}`)
	m := h.c.WaitFor("permission request", func(m *Msg) bool { return m.Method == "session/request_permission" })
	select {
	case l := <-h.sent:
		t.Fatalf("answered without a handler: %s", l)
	default:
	}
	h.c.Respond(m.ID, map[string]any{"outcome": map[string]any{"outcome": "cancelled"}})
	if line := h.next(); line != `{"jsonrpc":"2.0","id":9,"result":{"outcome":{"outcome":"cancelled"}}}` {
		t.Errorf("answered %s", line)
	}
	h.c.RespondError(m.ID, -32603, "oops")
	if line := h.next(); line != `{"jsonrpc":"2.0","id":9,"error":{"code":-32603,"message":"oops"}}` {
		t.Errorf("answered %s", line)
	}
	h.end()
}

func TestSendRawRegistersItsRequest(t *testing.T) {
	h := newHarness(t)
	h.c.SendRaw([]byte(`{"jsonrpc":"2.0","id":1000000,"method":"session/prompt","params":{"sessionId":"s"}}`))
	h.c.SendRaw([]byte(`not json`))
	if l := h.next(); !strings.Contains(l, "1000000") {
		t.Fatalf("sent %s", l)
	}
	if l := h.next(); l != "not json" {
		t.Fatalf("sent %s", l)
	}
	h.agent(`{"jsonrpc":"2.0","id":1000000,"result":{}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`)
	h.end()
	// Only the schema violation of the PromptResponse: the id is known.
	if errs := h.errorsContaining("PromptResponse"); len(errs) != 1 || len(h.rec.Errors()) != 1 {
		t.Errorf("errors: %q", h.rec.Errors())
	}
}

// fatal runs f as a test goroutine would and returns the fatal message.
func fatal(t *testing.T, h *harness, f func()) string {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
	fs := h.rec.Fatals()
	if len(fs) != 1 {
		t.Fatalf("fatals = %q, want 1", fs)
	}
	return fs[0]
}

func TestWaitForTimesOut(t *testing.T) {
	h := newHarness(t, WithTimeout(50*time.Millisecond))
	h.c.Send("initialize", nil)
	h.agent(update("s", `{"sessionUpdate":"state_update","state":"idle","background":[]}`))
	msg := fatal(t, h, func() {
		h.c.WaitFor("the moon", func(m *Msg) bool { return m.Kind == "moon" })
	})
	for _, want := range []string{"timed out after 50ms waiting for the moon", "#0 ", "state_update", `-> {"jsonrpc":"2.0","id":1,"method":"initialize"}`} {
		if !strings.Contains(msg, want) {
			t.Errorf("fatal %q does not contain %q", msg, want)
		}
	}
	h.end()
}

func TestWaitFailsFastAtEOF(t *testing.T) {
	h := newHarness(t)
	id := h.c.Send("initialize", nil)
	h.agentW.Close()
	start := time.Now()
	msg := fatal(t, h, func() { h.c.Wait(id) })
	if !strings.Contains(msg, "the agent closed its stdout") || time.Since(start) > 5*time.Second {
		t.Errorf("fatal = %q after %v", msg, time.Since(start))
	}
	h.end()
}

func TestWaitAfter(t *testing.T) {
	h := newHarness(t)
	idle := update("s", `{"sessionUpdate":"state_update","state":"idle","background":[]}`)
	h.agent(idle, idle, idle)
	isIdle := func(m *Msg) bool { return m.State() == "idle" }
	first := h.c.WaitFor("idle", isIdle)
	second := h.c.WaitAfter(first, "idle", isIdle)
	third := h.c.WaitAfter(second, "idle", isIdle)
	if first.Seq != 0 || second.Seq != 1 || third.Seq != 2 {
		t.Errorf("got %d %d %d", first.Seq, second.Seq, third.Seq)
	}
	// The fourth line is written while WaitAfter waits for it; a write
	// error is reported from the test goroutine.
	written := make(chan error, 1)
	go func() {
		_, err := io.WriteString(h.agentW, idle+"\n")
		written <- err
	}()
	if fourth := h.c.WaitAfter(third, "idle", isIdle); fourth.Seq != 3 {
		t.Errorf("fourth = %d", fourth.Seq)
	}
	if err := <-written; err != nil {
		t.Fatalf("writing the fourth line: %v", err)
	}
	h.end()
}

func TestOutputReconstruction(t *testing.T) {
	h := newHarness(t)
	h.agent(
		update("s", `{"sessionUpdate":"terminal_update","terminalId":"term_1"}`),
		update("s", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"`+b64("hel")+`"}`),
		update("s", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"`+b64("lo\r\n")+`"}`),
		update("t", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"`+b64("other session")+`"}`),
	)
	if got := string(h.c.Output("s", "term_1")); got != "hello\r\n" {
		t.Errorf("Output = %q", got)
	}
	h.agent(
		update("s", `{"sessionUpdate":"terminal_update","terminalId":"term_1","output":{"data":"`+b64("[snap]")+`"}}`),
		update("s", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"`+b64("!")+`"}`),
		update("s", `{"sessionUpdate":"terminal_update","terminalId":"term_1","output":null}`),
	)
	if got := string(h.c.Output("s", "term_1")); got != "[snap]!" {
		t.Errorf("Output = %q", got)
	}
	if n := h.c.Snapshots("s", "term_1"); n != 1 {
		t.Errorf("Snapshots = %d", n)
	}
	if got := string(h.c.Output("t", "term_1")); got != "other session" {
		t.Errorf("Output of the other session = %q", got)
	}
	if h.c.Output("s", "nope") != nil || h.c.Snapshots("s", "nope") != 0 {
		t.Errorf("unknown terminal has output")
	}

	// A resume with replay starts the terminals over; one without keeps them.
	h.c.Send("session/resume", map[string]any{"sessionId": "t", "cwd": "/"})
	if got := string(h.c.Output("t", "term_1")); got != "other session" {
		t.Errorf("Output after a resume without replay = %q", got)
	}
	h.c.Send("session/resume", map[string]any{"sessionId": "t", "cwd": "/", "replayFrom": map[string]any{"type": "start"}})
	if got := h.c.Output("t", "term_1"); got != nil {
		t.Errorf("Output after a resume with replay = %q", got)
	}
	h.end()
}

func TestWithoutRaw(t *testing.T) {
	h := newHarness(t, WithoutRaw())
	h.agent(
		update("s", `{"sessionUpdate":"terminal_update","terminalId":"term_1"}`),
		update("s", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"`+b64("abc")+`"}`),
	)
	h.end()
	ms := h.c.Transcript()
	if ms[0].Raw == nil || ms[0].Params == nil {
		t.Errorf("terminal_update lost its raw line")
	}
	if ms[1].Raw != nil || ms[1].Params != nil || ms[1].HasKey("data") || ms[1].TerminalID() != "term_1" {
		t.Errorf("chunk kept %s / %s / %v", ms[1].Raw, ms[1].Params, ms[1].Update)
	}
	if got := string(h.c.Output("s", "term_1")); got != "abc" {
		t.Errorf("Output = %q", got)
	}
	if d := h.c.Dump(); !strings.Contains(d, "dropped by WithoutRaw") {
		t.Errorf("Dump = %s", d)
	}
}

// TestLargeOutput pushes many megabytes through, as the agent's
// throughput tests do, and checks that no byte is lost.
func TestLargeOutput(t *testing.T) {
	h := newHarness(t, WithoutRaw())
	h.agent(update("s", `{"sessionUpdate":"terminal_update","terminalId":"term_1"}`))
	const chunk, chunks = 48 << 10, 200 // ~9.4 MiB
	payload := bytes.Repeat([]byte("0123456789abcdef"), chunk/16)
	line := update("s", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"`+b64(string(payload))+`"}`) + "\n"
	done := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < chunks && err == nil; i++ {
			_, err = io.WriteString(h.agentW, line)
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.end()
	out := h.c.Output("s", "term_1")
	if len(out) != chunk*chunks || !bytes.Equal(out[:chunk], payload) || !bytes.Equal(out[len(out)-chunk:], payload) {
		t.Errorf("Output has %d bytes, want %d", len(out), chunk*chunks)
	}
	if errs := h.rec.Errors(); len(errs) != 0 {
		t.Errorf("errors: %q", errs[0])
	}
}

func TestCheckOnClose(t *testing.T) {
	h := newHarness(t, WithCheckOnClose())
	h.agent(update("s", `{"sessionUpdate":"state_update","state":"idle"}`))
	h.end()
	if errs := h.errorsContaining("rule 1 "); len(errs) != 1 {
		t.Errorf("errors: %q", h.rec.Errors())
	}
}

// stuckReader blocks in Read until it is closed.
type stuckReader struct{ closed chan struct{} }

func (r *stuckReader) Read([]byte) (int, error) { <-r.closed; return 0, io.ErrClosedPipe }
func (r *stuckReader) Close() error             { close(r.closed); return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func TestCloseUnblocksAStuckAgent(t *testing.T) {
	rec := &recorder{parent: t}
	c := newClient(rec, &stuckReader{closed: make(chan struct{})}, nopWriteCloser{io.Discard}, WithTimeout(20*time.Millisecond))
	c.Close()
	if errs := rec.Errors(); len(errs) != 1 || !strings.Contains(errs[0], "did not close its stdout") {
		t.Errorf("errors: %q", errs)
	}
}

func TestStartBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{parent: t}
	t.Run("session", func(t *testing.T) {
		rec.parent = t
		c, cmd := startBinary(rec, exe, []string{"-test.run=^$"}, []string{fakeAgentEnv + "=1"})
		var init struct {
			ProtocolVersion int `json:"protocolVersion"`
		}
		c.MustCall("initialize", map[string]any{"protocolVersion": 2}, &init)
		var sess struct {
			SessionID string `json:"sessionId"`
		}
		c.MustCall("session/new", map[string]any{"cwd": "/"}, &sess)
		if init.ProtocolVersion != 2 || sess.SessionID != "s1" || len(c.Updates("s1")) != 1 || cmd.Process == nil {
			t.Errorf("got %+v %+v %s", init, sess, c.Dump())
		}
		c.Check()
	})
	if errs := rec.Errors(); len(errs) != 0 {
		t.Errorf("errors: %q", errs)
	}
	logs := strings.Join(rec.Logs(), "\n")
	for _, want := range []string{"agent stderr: got initialize", "agent stderr: got session/new", "agent stderr: bye (no newline)"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs %q lack %q", logs, want)
		}
	}
}

func TestStartBinaryReportsExitStatus(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{parent: t}
	t.Run("agent", func(t *testing.T) {
		rec.parent = t
		startBinary(rec, exe, []string{"-test.run=^$"}, []string{fakeAgentEnv + "=1", "ACPTEST_FAKE_EXIT=3"})
	})
	if errs := rec.Errors(); len(errs) != 1 || !strings.Contains(errs[0], "exit status 3") {
		t.Errorf("errors: %q", errs)
	}
}

func TestRPCErrorWithData(t *testing.T) {
	e := &RPCError{Code: -32602, Message: "bad", Data: json.RawMessage(`{"field":"cwd"}`)}
	if got := e.Error(); got != `jsonrpc error -32602: bad (data {"field":"cwd"})` {
		t.Errorf("Error() = %s", got)
	}
}
