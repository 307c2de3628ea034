package acptest

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DefaultTimeout is how long Wait, WaitFor and Close wait by default.
const DefaultTimeout = 20 * time.Second

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets how long Wait, WaitFor, WaitAfter, Call and Close wait.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// WithPermissionHandler answers agent requests "session/request_permission"
// with the result h returns, for example
//
//	map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow"}}
//
// h runs on the reader goroutine after the request is in the transcript; it
// must not block for long or call t.Fatal. When h returns nil the request is
// left unanswered. Without a handler no request is answered: tests can answer
// with Respond.
func WithPermissionHandler(h func(Msg) any) Option {
	return func(c *Client) { c.permission = h }
}

// WithoutRaw drops Raw, Params and update.data of terminal_output_chunk
// messages once they are validated and their bytes are appended to the
// terminal, so that pushing many megabytes of output keeps only one decoded
// copy (the terminal's) in memory.
func WithoutRaw() Option {
	return func(c *Client) { c.dropChunks = true }
}

// WithCheckOnClose makes Close run Check once the reader has ended.
func WithCheckOnClose() Option {
	return func(c *Client) { c.checkOnClose = true }
}

// WithTolerated makes the client record the violations that ok accepts
// without reporting them: Violations still returns them, so that a test
// that sends or provokes a bad message on purpose can check that it was
// seen, and only it. ok runs on the reader goroutine and in Check.
func WithTolerated(ok func(Violation) bool) Option {
	return func(c *Client) { c.tolerated = ok }
}

// WithProtocolV1 makes the client speak ACP v1: every message is validated
// against the v1 schema (testdata/acp/schema.v1.json), output is
// reconstructed from the _meta.terminal_output strings of tool call
// updates, and Check applies the v1 rules (see Check). The test sends
// initialize with protocolVersion 1 itself; whether it advertises
// clientCapabilities._meta.terminal_output is read from that request.
// Whatever the option, the client speaks the version that the latest
// successful initialize answered with from that answer on.
func WithProtocolV1() Option {
	return func(c *Client) { c.version = 1 }
}

// Client talks to an agent over its stdin and stdout. A reader goroutine
// reads every line the agent writes, records it, validates it, and
// dispatches it. All methods are safe for concurrent use; Wait, WaitFor,
// WaitAfter, Call and MustCall call t.Fatal and so belong on the test
// goroutine.
type Client struct {
	t            reporter
	in           stdin
	r            reader
	timeout      time.Duration
	permission   func(Msg) any
	dropChunks   bool
	checkOnClose bool
	tolerated    func(Violation) bool // WithTolerated
	start        time.Time

	nextID    atomic.Int64
	closeOnce sync.Once

	mu sync.Mutex
	// version is the ACP version spoken: 2, or 1 (WithProtocolV1), until
	// an initialize is answered with another (the reader's negotiated).
	version  int
	msgs     []*Msg
	changed  chan struct{} // closed and replaced whenever msgs grows or the reader ends
	eof      bool
	readErr  error
	requests map[int64]*request // requests sent, by id
	sent     []*request         // requests sent, in order
	outLog   []outLine          // everything written to the agent, for Dump
	terms    terminals
	wire     []Violation     // violations found while reading
	reported map[string]bool // Check violations already reported
	quiet    bool            // the reader outlived Close: stop reporting
}

// request is a request the client sent.
type request struct {
	id        int64
	method    string
	sessionID string // params.sessionId, if any
	replay    bool   // session/resume with a non-null replayFrom, or (v1) session/load
	// termOutput: an initialize that advertises
	// clientCapabilities._meta.terminal_output (ACP v1).
	termOutput bool
	after      int // transcript length when it was sent
	answered   bool
}

// outLine is a line written to the agent.
type outLine struct {
	after int // transcript length when it was written
	at    time.Time
	text  string // truncated
}

// New returns a Client that reads the agent's stdout from agentStdout and
// writes to its stdin through agentStdin. It registers t.Cleanup(c.Close).
func New(t testing.TB, agentStdout io.Reader, agentStdin io.WriteCloser, opts ...Option) *Client {
	t.Helper()
	return newClient(t, agentStdout, agentStdin, opts...)
}

// newClient is New for any reporter.
func newClient(t reporter, agentStdout io.Reader, agentStdin io.WriteCloser, opts ...Option) *Client {
	t.Helper()
	c := &Client{
		t:        t,
		in:       stdin{w: agentStdin},
		timeout:  DefaultTimeout,
		version:  2,
		start:    time.Now(),
		changed:  make(chan struct{}),
		requests: make(map[int64]*request),
		terms:    make(terminals),
		reported: make(map[string]bool),
	}
	for _, o := range opts {
		o(c)
	}
	s, err := loadSchemas(c.version)
	if err != nil {
		t.Fatalf("%v", err)
		return nil
	}
	c.r = reader{c: c, out: agentStdout, done: make(chan struct{}), schemas: s, memo: make(map[string]string)}
	go c.r.loop()
	t.Cleanup(c.Close)
	return c
}

// envelope is an outgoing JSON-RPC message.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *wireError      `json:"error,omitempty"`
}

// wireError is an outgoing JSON-RPC error object.
type wireError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Send sends a request and returns its id (1, 2, 3, ...). A nil params is omitted.
func (c *Client) Send(method string, params any) int64 {
	c.t.Helper()
	body := marshal(c.t, params)
	id := c.nextID.Add(1)
	c.register(id, method, body)
	c.writeLine(envelope{JSONRPC: "2.0", ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: body}.line(c.t))
	return id
}

// Notify sends a notification. A nil params is omitted.
func (c *Client) Notify(method string, params any) {
	c.t.Helper()
	c.writeLine(envelope{JSONRPC: "2.0", Method: method, Params: marshal(c.t, params)}.line(c.t))
}

// Respond answers an agent request (for example session/request_permission)
// with a result.
func (c *Client) Respond(id json.RawMessage, result any) {
	c.t.Helper()
	body := marshal(c.t, result)
	if body == nil {
		body = json.RawMessage("null")
	}
	c.writeLine(envelope{JSONRPC: "2.0", ID: id, Result: body}.line(c.t))
}

// RespondError answers an agent request with an error.
func (c *Client) RespondError(id json.RawMessage, code int, message string) {
	c.t.Helper()
	c.writeLine(envelope{JSONRPC: "2.0", ID: id, Error: &wireError{Code: code, Message: message}}.line(c.t))
}

// SendRaw writes line and a newline as they are, for malformed-input tests.
// If line is a request with an integer id, the id is registered so that its
// response is validated and is not a violation; use ids that Send will not
// reach (for example 1000000 and up).
func (c *Client) SendRaw(line []byte) {
	c.t.Helper()
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &req) == nil && req.Method != "" {
		if id, err := strconv.ParseInt(string(req.ID), 10, 64); err == nil {
			c.register(id, req.Method, req.Params)
		}
	}
	c.writeLine(append(append(make([]byte, 0, len(line)+1), line...), '\n'))
}

// marshal encodes v, reporting a failure to t; nil stays nil.
func marshal(t reporter, v any) json.RawMessage {
	t.Helper()
	if v == nil {
		return nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Errorf("acptest: encoding %T: %v", v, err)
		return nil
	}
	return b
}

// register records a request before it is written, so that the reader can
// match its response.
func (c *Client) register(id int64, method string, params json.RawMessage) {
	var p struct {
		SessionID          string          `json:"sessionId"`
		ReplayFrom         json.RawMessage `json:"replayFrom"`
		ClientCapabilities struct {
			Meta struct {
				TerminalOutput bool `json:"terminal_output"`
			} `json:"_meta"`
		} `json:"clientCapabilities"`
	}
	_ = json.Unmarshal(params, &p) // params need not be an object
	req := &request{
		id:         id,
		method:     method,
		sessionID:  p.SessionID,
		replay:     method == "session/load" || method == "session/resume" && len(p.ReplayFrom) > 0 && string(p.ReplayFrom) != "null",
		termOutput: method == "initialize" && p.ClientCapabilities.Meta.TerminalOutput,
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	req.after = len(c.msgs)
	c.requests[id] = req
	c.sent = append(c.sent, req)
	if req.replay {
		c.terms.reset(req.sessionID)
	}
}

// line encodes e as one line, newline included; nil after reporting a
// failure to t.
func (e envelope) line(t reporter) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Errorf("acptest: encoding a message: %v", err)
		return nil
	}
	return append(b, '\n')
}

// writeLine writes one newline-terminated line to the agent's stdin (nil:
// nothing), and reports a failure with t.Errorf unless the client has
// gone quiet.
func (c *Client) writeLine(line []byte) {
	c.t.Helper()
	if line == nil {
		return
	}
	c.mu.Lock()
	c.outLog = append(c.outLog, outLine{after: len(c.msgs), at: time.Now(), text: truncate(line[:len(line)-1], rawLimit)})
	c.mu.Unlock()

	if err := c.in.write(line); err != nil {
		c.mu.Lock()
		quiet := c.quiet
		c.mu.Unlock()
		if !quiet {
			c.t.Errorf("acptest: writing to the agent's stdin: %v", err)
		}
	}
}

// stdin is the agent's stdin, written one line at a time and closed once.
type stdin struct {
	w    io.WriteCloser
	mu   sync.Mutex // serializes writes
	once sync.Once
}

// write writes one line.
func (s *stdin) write(line []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.w.Write(line)
	return err
}

// close closes the agent's stdin once.
func (s *stdin) close() {
	// Best effort: a pipe's Close fails only if the agent closed it first.
	s.once.Do(func() { _ = s.w.Close() })
}

// Wait waits for the response to request id and returns it. It calls
// t.Fatal on timeout or if the agent closes its stdout first.
func (c *Client) Wait(id int64) *Msg {
	c.t.Helper()
	c.mu.Lock()
	req := c.requests[id]
	c.mu.Unlock()
	if req == nil {
		c.t.Fatalf("acptest: Wait(%d): no such request was sent", id)
		return nil
	}
	desc := fmt.Sprintf("the response to request %d (%s)", id, req.method)
	return c.waitFrom(req.after, desc, func(m *Msg) bool { return m.req == req })
}

// Call sends a request and waits for its response.
func (c *Client) Call(method string, params any) (json.RawMessage, *RPCError) {
	c.t.Helper()
	m := c.Wait(c.Send(method, params))
	if m == nil {
		return nil, nil
	}
	return m.Result, m.Error
}

// MustCall calls method, calls t.Fatal if the agent answers with an error,
// and decodes the result into result unless result is nil.
func (c *Client) MustCall(method string, params any, result any) {
	c.t.Helper()
	raw, rerr := c.Call(method, params)
	if rerr != nil {
		c.t.Fatalf("acptest: %s failed: %v", method, rerr)
		return
	}
	if result == nil {
		return
	}
	if err := json.Unmarshal(raw, result); err != nil {
		c.t.Fatalf("acptest: decoding the %s result %s: %v", method, truncate(raw, rawLimit), err)
	}
}

// WaitFor returns the first message of the transcript, in arrival order
// from its start, that satisfies pred, waiting for it if needed. It calls
// t.Fatal with desc and the tail of the transcript on timeout or if the
// agent closes its stdout first.
func (c *Client) WaitFor(desc string, pred func(*Msg) bool) *Msg {
	c.t.Helper()
	return c.waitFrom(0, desc, pred)
}

// WaitAfter is WaitFor restricted to the messages after after (all messages
// when after is nil).
func (c *Client) WaitAfter(after *Msg, desc string, pred func(*Msg) bool) *Msg {
	c.t.Helper()
	start := 0
	if after != nil {
		start = after.Seq + 1
	}
	return c.waitFrom(start, desc, pred)
}

// waitFrom waits for the first message at or after position start that
// satisfies pred. pred runs without the lock held.
func (c *Client) waitFrom(start int, desc string, pred func(*Msg) bool) *Msg {
	c.t.Helper()
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	next := start
	for {
		c.mu.Lock()
		var batch []*Msg
		if next < len(c.msgs) {
			batch = c.msgs[next:]
		}
		changed, eof, readErr := c.changed, c.eof, c.readErr
		c.mu.Unlock()
		for _, m := range batch {
			if pred(m) {
				return m
			}
		}
		next += len(batch)
		if eof {
			why := "the agent closed its stdout"
			if readErr != nil {
				why = fmt.Sprintf("reading the agent's stdout failed: %v", readErr)
			}
			c.t.Fatalf("acptest: waiting for %s: %s\n%s", desc, why, c.dump(tailLines))
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			c.t.Fatalf("acptest: timed out after %v waiting for %s\n%s", c.timeout, desc, c.dump(tailLines))
			return nil
		}
	}
}

// Transcript returns a copy of the list of messages received so far, in order.
func (c *Client) Transcript() []*Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Msg(nil), c.msgs...)
}

// Updates returns the session/update notifications of a session, in order.
func (c *Client) Updates(sessionID string) []*Msg {
	var out []*Msg
	for _, m := range c.Transcript() {
		if m.Method == "session/update" && m.SessionID == sessionID {
			out = append(out, m)
		}
	}
	return out
}

// Close closes the agent's stdin and waits for the reader to reach the end
// of the agent's stdout. If that takes longer than the timeout, it reports
// an error and closes agentStdout if it is an io.Closer. Close is
// idempotent; New registers it with t.Cleanup.
func (c *Client) Close() {
	c.t.Helper()
	c.closeOnce.Do(c.close)
}

func (c *Client) close() {
	c.t.Helper()
	c.in.close()
	if !c.r.wait(c.timeout) {
		c.t.Errorf("acptest: the agent did not close its stdout within %v of its stdin being closed", c.timeout)
		if cl, ok := c.r.out.(io.Closer); ok {
			_ = cl.Close() // Best effort: to unblock the reader; failing is reported below.
		}
		if !c.r.wait(5 * time.Second) {
			c.mu.Lock()
			c.quiet = true
			c.mu.Unlock()
			c.t.Errorf("acptest: the reader goroutine is stuck in Read; leaking it")
			return
		}
	}
	if c.checkOnClose {
		c.Check()
	}
}

// tailLines is how many lines failure messages show of the transcript.
const tailLines = 40

// Dump returns the transcript, one line per message, with the lines the
// client wrote interleaved: "#seq +elapsed <- line" for received messages
// and "+elapsed -> line" for sent ones.
func (c *Client) Dump() string { return c.dump(0) }

// dump renders the last n received messages (all when n is 0) and the
// lines sent among them (see transcriptText).
func (c *Client) dump(n int) string {
	c.mu.Lock()
	msgs, outs := c.msgs, c.outLog
	c.mu.Unlock()
	return transcriptText(msgs, outs, c.start, n)
}

// transcriptText renders the last n of msgs (all when n is 0) and the
// lines of outs sent among them, with times from start.
func transcriptText(msgs []*Msg, outs []outLine, start time.Time, n int) string {
	first := 0
	if n > 0 && len(msgs) > n {
		first = len(msgs) - n
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "transcript (%d messages received", len(msgs))
	if first > 0 {
		fmt.Fprintf(&sb, ", last %d shown", n)
	}
	sb.WriteString("):\n")
	o := 0
	for ; o < len(outs) && outs[o].after < first; o++ {
	}
	for i := first; i <= len(msgs); i++ {
		for ; o < len(outs) && outs[o].after <= i; o++ {
			fmt.Fprintf(&sb, "        +%.3fs -> %s\n", outs[o].at.Sub(start).Seconds(), outs[o].text)
		}
		if i < len(msgs) {
			m := msgs[i]
			fmt.Fprintf(&sb, "#%-5d +%.3fs <- %s\n", m.Seq, m.At.Sub(start).Seconds(), m)
		}
	}
	return sb.String()
}
