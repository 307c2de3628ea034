package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vbase64 "github.com/segmentio/asm/base64"

	"shellagent/internal/journal"
	"shellagent/protocol"
	"shellagent/supervisor"
)

// waitTimeout bounds every wait of a benchmark on the agent.
const waitTimeout = 2 * time.Minute

// agent is one shellagent served in-process as cmd/shellagent serves it:
// requests on a pipe, and everything it writes on a kernel pipe (os.Pipe)
// read by a client goroutine that parses every line and decodes every
// chunk, as a client must.
type agent struct {
	sup  *supervisor.Supervisor
	conn *protocol.Conn
	cmd  *exec.Cmd // instead of sup and conn: the agent is this process (daemon_test.go)
	c    *client
	cwd  string

	// server is the pid of the process that serves the sessions: cmd's,
	// or that of the daemon cmd relays to (startBinary).
	server int

	history *journal.Store // the sessions' history, if kept (startHistoryAgent)

	inR, inW   *os.File // the agent's stdin
	outR, outW *os.File // the agent's stdout

	mu       sync.Mutex
	launched map[string]int // terminals started per session: ids are term_1, term_2, ...
	closed   bool
}

// onData sees every decoded piece of terminal output, on the client's
// reader goroutine, with the time it was decoded. It must not block, and
// data is only valid during the call.
type onData func(t *term, data []byte, now time.Time)

// startAgent starts an agent that never moves foreground work to the
// background, with a client whose reader calls hook (if not nil) on every
// piece of output. Every command it runs has the marker in its environment.
// It is shut down at the end of the benchmark or test, or earlier with close.
func startAgent(tb testing.TB, hook onData) *agent {
	tb.Helper()
	return startAgentReading(tb, hook, nil)
}

// startAgentReading is startAgent with a client that reads the agent's
// stdout through read(stdout) if read is not nil.
func startAgentReading(tb testing.TB, hook onData, read func(io.Reader) io.Reader) *agent {
	tb.Helper()
	return startAgentWith(tb, hook, read, nil)
}

// startHistoryAgent is startAgent with each session's history kept on
// disk (Config.History), in a state directory of its own.
func startHistoryAgent(tb testing.TB) *agent {
	tb.Helper()
	var store *journal.Store
	var err error
	// The writer goroutine carries path=history, as the agent's do.
	pprof.Do(context.Background(), pprof.Labels("path", "history"), func(context.Context) {
		store, err = journal.Open(journal.Options{Dir: tb.TempDir(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() }) // after the agent's close: cleanups run last first
	a := startAgentWith(tb, nil, nil, store)
	a.history = store
	return a
}

// startAgentWith is startAgentReading with history (nil: none).
func startAgentWith(tb testing.TB, hook onData, read func(io.Reader) io.Reader, history *journal.Store) *agent {
	tb.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &agent{
		sup: supervisor.New(supervisor.Config{
			Shell:             "/bin/sh",
			ForegroundTimeout: 0, // never detach
			Env:               append(os.Environ(), marker),
			Log:               log,
			Launcher:          launcher,
			History:           history,
		}),
		cwd: tb.TempDir(),
		inR: inR, inW: inW, outR: outR, outW: outW,
		launched: make(map[string]int),
	}
	// Profile labels: every goroutine of the agent (the connection's, and
	// the PTY readers and waiters it starts) carries path=agent, or
	// path=history for an agent with history, the client's reader
	// path=client; see README.md.
	label := "agent"
	if history != nil {
		label = "history"
	}
	pprof.Do(context.Background(), pprof.Labels("path", label), func(context.Context) {
		a.conn = protocol.NewConn(inR, outW, a.sup, protocol.Options{Log: log})
	})
	var out io.Reader = outR
	if read != nil {
		out = read(outR)
	}
	pprof.Do(context.Background(), pprof.Labels("path", "client"), func(context.Context) {
		a.c = newClient(inW, out, hook)
	})
	tb.Cleanup(func() { a.close(tb) })
	a.c.call(tb, "initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "bench", "version": "1"}})
	return a
}

// close shuts the agent down as cmd/shellagent does when stdin ends: every
// session is closed (its commands stopped and waited for), the writer
// flushes, and the client reads to the end of the stream.
func (a *agent) close(tb testing.TB) {
	a.mu.Lock()
	closed := a.closed
	a.closed = true
	a.mu.Unlock()
	if closed {
		return
	}
	a.inW.Close()
	if a.cmd != nil {
		a.waitProcess(tb)
		return
	}
	select {
	case <-a.conn.Done():
	case <-time.After(waitTimeout):
		tb.Error("agent: the connection did not end after stdin closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := a.sup.Shutdown(ctx); err != nil {
		tb.Errorf("agent: %v", err)
	}
	a.conn.Close()
	a.outW.Close()
	<-a.c.done
	a.outR.Close()
	a.inR.Close()
	if err := a.c.error(); err != nil {
		tb.Errorf("client: %v", err)
	}
}

// newSession opens a session in the agent's directory.
func (a *agent) newSession(tb testing.TB) string {
	tb.Helper()
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(a.c.call(tb, "session/new", map[string]any{"cwd": a.cwd}), &res); err != nil || res.SessionID == "" {
		tb.Fatalf("session/new: %v (%q)", err, res.SessionID)
	}
	return res.SessionID
}

// prompt sends a prompt that starts a command (CMD or /bg CMD) on a session
// that is idle, waits for it to be inserted, and returns the id of the
// terminal it starts.
func (a *agent) prompt(tb testing.TB, sid, text string) string {
	tb.Helper()
	a.mu.Lock()
	a.launched[sid]++
	tid := "term_" + strconv.Itoa(a.launched[sid])
	a.mu.Unlock()
	a.c.call(tb, "session/prompt", map[string]any{
		"sessionId": sid,
		"prompt":    []map[string]string{{"type": "text", "text": text}},
	})
	return tid
}

// cancel sends terminal/cancel and waits for its answer.
func (a *agent) cancel(tb testing.TB, sid, tid string) {
	tb.Helper()
	a.c.call(tb, "terminal/cancel", map[string]any{"sessionId": sid, "terminalId": tid})
}

// client is the benchmark's end of the connection. Its reader goroutine
// parses every line: chunk lines with a hand-rolled scan and a base64
// decode into a reused buffer, everything else with encoding/json. The
// decode is segmentio/asm's, a vector decoder (AVX2, NEON) eight to ten
// times as fast as encoding/base64's: a lean client's, which leaves the
// agent the machine's two cores but for what any client must do, read the
// pipe.
type client struct {
	w    *os.File
	wmu  sync.Mutex
	seq  atomic.Int64
	hook onData
	done chan struct{} // closed when the reader has read the whole stream

	// undecoded makes the reader count each chunk's bytes from its base64's
	// length instead of decoding it (Binary/undecoded: the client's share
	// of a run). Chunks still have a hook called with nil data.
	undecoded atomic.Bool

	mu       sync.Mutex // guards what follows; the reader writes, waiters read
	pending  map[int64]chan response
	sessions map[string]*sess
	changed  chan struct{} // closed and replaced after every control message
	err      error         // the first problem with the stream

	// Owned by the reader.
	dec  []byte
	long []byte
}

type response struct {
	result json.RawMessage
	err    json.RawMessage
}

// sess is what the client knows of a session.
type sess struct {
	terms      map[string]*term
	turnsEnded int // state_updates with a stop reason
	background int // length of the last background list
}

// term is what the client knows of a terminal.
type term struct {
	id      string
	bytes   atomic.Int64 // output decoded: chunks and replacement snapshots
	chunks  atomic.Int64 // terminal_output_chunk lines
	dropped atomic.Int64 // bytes the agent reported dropped (droppedBytes)

	// Guarded by client.mu.
	announced bool
	listed    bool // some state_update listed it
	exit      json.RawMessage
	exitAt    time.Time // when the reader decoded the exitStatus
}

func newClient(w *os.File, r io.Reader, hook onData) *client {
	c := &client{
		w: w, hook: hook, done: make(chan struct{}),
		pending:  make(map[int64]chan response),
		sessions: make(map[string]*sess),
		changed:  make(chan struct{}),
	}
	go c.read(r)
	return c
}

func (c *client) error() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *client) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// call sends a request and returns its result; an error answer, a broken
// stream or a timeout fails tb.
func (c *client) call(tb testing.TB, method string, params any) json.RawMessage {
	tb.Helper()
	id := c.seq.Add(1)
	ch := make(chan response, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		tb.Fatal(err)
	}
	c.wmu.Lock()
	_, err = c.w.Write(append(msg, '\n'))
	c.wmu.Unlock()
	if err != nil {
		tb.Fatalf("%s: %v", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			tb.Fatalf("%s: error %s", method, r.err)
		}
		return r.result
	case <-c.done:
		tb.Fatalf("%s: the stream ended before the answer (%v)", method, c.error())
	case <-time.After(waitTimeout):
		tb.Fatalf("%s: no answer in %v", method, waitTimeout)
	}
	return nil
}

// wait waits until cond, evaluated under the client's lock after each
// control message, holds.
func (c *client) wait(tb testing.TB, desc string, cond func() bool) {
	tb.Helper()
	timeout := time.After(waitTimeout)
	for {
		c.mu.Lock()
		ok, ch, err := cond(), c.changed, c.err
		c.mu.Unlock()
		switch {
		case ok:
			return
		case err != nil:
			tb.Fatalf("waiting for %s: %v", desc, err)
		}
		select {
		case <-ch:
		case <-c.done:
			c.mu.Lock()
			ok = cond()
			c.mu.Unlock()
			if !ok {
				tb.Fatalf("waiting for %s: the stream ended (%v)", desc, c.error())
			}
			return
		case <-timeout:
			tb.Fatalf("waiting for %s: nothing in %v", desc, waitTimeout)
		}
	}
}

// lookup returns a terminal the client has seen, or nil; call with c.mu
// held (or on the reader).
func (c *client) lookup(sid, tid string) *term {
	if s := c.sessions[sid]; s != nil {
		return s.terms[tid]
	}
	return nil
}

// terminal waits for a terminal's announcement and returns it.
func (c *client) terminal(tb testing.TB, sid, tid string) *term {
	tb.Helper()
	var t *term
	c.wait(tb, tid+" announced", func() bool {
		t = c.lookup(sid, tid)
		return t != nil && t.announced
	})
	return t
}

// waitExit waits for a terminal's exitStatus and returns it and the time
// the reader decoded it.
func (c *client) waitExit(tb testing.TB, sid, tid string) (json.RawMessage, time.Time) {
	tb.Helper()
	var t *term
	c.wait(tb, tid+" exitStatus", func() bool {
		t = c.lookup(sid, tid)
		return t != nil && t.exit != nil
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.exit, t.exitAt
}

// waitListed waits until a state_update has listed every terminal of tids.
func (c *client) waitListed(tb testing.TB, sid string, tids ...string) {
	tb.Helper()
	c.wait(tb, fmt.Sprintf("%d terminals listed", len(tids)), func() bool {
		for _, tid := range tids {
			if t := c.lookup(sid, tid); t == nil || !t.listed {
				return false
			}
		}
		return true
	})
}

// turnsEnded returns how many turns of sid have ended so far.
func (c *client) turnsEnded(sid string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[sid]; s != nil {
		return s.turnsEnded
	}
	return 0
}

// waitTurnsEnded waits until n turns of sid have ended.
func (c *client) waitTurnsEnded(tb testing.TB, sid string, n int) {
	tb.Helper()
	c.wait(tb, fmt.Sprintf("turn %d ended", n), func() bool {
		s := c.sessions[sid]
		return s != nil && s.turnsEnded >= n
	})
}

// waitBackgroundEmpty waits until the last state_update of sid lists nothing.
func (c *client) waitBackgroundEmpty(tb testing.TB, sid string) {
	tb.Helper()
	c.wait(tb, "an empty background list", func() bool {
		s := c.sessions[sid]
		return s != nil && s.background == 0
	})
}

// read parses the agent's output to its end. It never stops early: an agent
// whose reader stops would block on a full pipe.
func (c *client) read(r io.Reader) {
	defer close(c.done)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: a replacement snapshot.
			c.long = append(c.long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				c.long = append(c.long, line...)
			}
			line = c.long
		}
		if err != nil {
			if len(line) > 0 {
				c.fail(fmt.Errorf("the stream ended inside a line: %q", truncate(line)))
			}
			if !errors.Is(err, io.EOF) {
				c.fail(err)
			}
			return
		}
		c.handle(bytes.TrimRight(line, "\r\n"))
		if cap(c.long) > 4<<20 {
			c.long = nil
		}
	}
}

var (
	chunkTag      = []byte(`"terminal_output_chunk"`)
	sessionIDKey  = []byte(`"sessionId":"`)
	terminalIDKey = []byte(`"terminalId":"`)
	dataKey       = []byte(`"data":"`)
)

func (c *client) handle(line []byte) {
	if len(line) == 0 {
		return
	}
	if bytes.Contains(line, chunkTag) && c.chunk(line) {
		return
	}
	c.control(line)
}

// chunk is the fast path for a terminal_output_chunk line. It returns false
// for a line it cannot take apart by scanning (escapes in the values), which
// then goes through encoding/json.
func (c *client) chunk(line []byte) bool {
	sid, tid, data := field(line, sessionIDKey), field(line, terminalIDKey), field(line, dataKey)
	if sid == nil || tid == nil || data == nil || bytes.IndexByte(data, '\\') >= 0 {
		return false
	}
	t := c.lookup(string(sid), string(tid))
	if t == nil {
		c.fail(fmt.Errorf("output of %s before its terminal_update", tid))
		return true
	}
	c.output(t, data)
	t.chunks.Add(1)
	return true
}

// output decodes base64 output of t and counts it.
func (c *client) output(t *term, data []byte) {
	if c.undecoded.Load() {
		t.bytes.Add(int64(base64.RawStdEncoding.DecodedLen(len(bytes.TrimRight(data, "=")))))
		if c.hook != nil {
			c.hook(t, nil, time.Now())
		}
		return
	}
	n := vbase64.StdEncoding.DecodedLen(len(data))
	if cap(c.dec) < n {
		c.dec = make([]byte, n)
	}
	m, err := vbase64.StdEncoding.Decode(c.dec[:n], data)
	if err != nil {
		c.fail(fmt.Errorf("%s: bad base64: %v", t.id, err))
		return
	}
	t.bytes.Add(int64(m))
	if c.hook != nil {
		c.hook(t, c.dec[:m], time.Now())
	}
}

// field returns the string value that follows key, up to the next quote.
func field(line, key []byte) []byte {
	_, v, ok := bytes.Cut(line, key)
	if !ok {
		return nil
	}
	v, _, ok = bytes.Cut(v, []byte{'"'})
	if !ok {
		return nil
	}
	return v
}

// wireMsg is every other message, as far as the benchmarks need it.
type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	Params *struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			SessionUpdate string          `json:"sessionUpdate"`
			TerminalID    string          `json:"terminalId"`
			State         string          `json:"state"`
			StopReason    string          `json:"stopReason"`
			ExitStatus    json.RawMessage `json:"exitStatus"`
			Data          string          `json:"data"`
			Background    []struct {
				Type       string `json:"type"`
				TerminalID string `json:"terminalId"`
			} `json:"background"`
			Output *struct {
				Data string `json:"data"`
				Meta struct {
					Shellagent struct {
						DroppedBytes int64 `json:"droppedBytes"`
					} `json:"shellagent"`
				} `json:"_meta"`
			} `json:"output"`
		} `json:"update"`
	} `json:"params"`
}

func (c *client) control(line []byte) {
	var m wireMsg
	if err := json.Unmarshal(line, &m); err != nil {
		c.fail(fmt.Errorf("bad line %q: %v", truncate(line), err))
		return
	}
	now := time.Now()
	if m.Method == "" {
		c.answer(&m)
		return
	}
	if m.Method != "session/update" || m.Params == nil {
		if m.ID != nil {
			c.fail(fmt.Errorf("unexpected request %s", m.Method))
		}
		return
	}
	sid, u := m.Params.SessionID, &m.Params.Update
	if u.SessionUpdate == "terminal_output_chunk" { // one the fast path left
		t := c.lookup(sid, u.TerminalID)
		if t == nil {
			c.fail(fmt.Errorf("output of %s before its terminal_update", u.TerminalID))
			return
		}
		c.output(t, []byte(u.Data))
		t.chunks.Add(1)
		return
	}
	c.mu.Lock()
	defer c.broadcast()
	s := c.sessions[sid]
	if s == nil {
		s = &sess{terms: make(map[string]*term)}
		c.sessions[sid] = s
	}
	switch u.SessionUpdate {
	case "terminal_update":
		t := s.terms[u.TerminalID]
		if t == nil {
			t = &term{id: u.TerminalID}
			s.terms[u.TerminalID] = t
		}
		t.announced = true
		if o := u.Output; o != nil {
			t.dropped.Add(o.Meta.Shellagent.DroppedBytes)
			c.output(t, []byte(o.Data))
		}
		if len(u.ExitStatus) > 0 && string(u.ExitStatus) != "null" {
			t.exit, t.exitAt = append(json.RawMessage(nil), u.ExitStatus...), now
		}
	case "state_update":
		if u.StopReason != "" {
			s.turnsEnded++
		}
		s.background = len(u.Background)
		for _, it := range u.Background {
			if t := s.terms[it.TerminalID]; it.Type == "terminal" && t != nil {
				t.listed = true
			}
		}
	}
}

// broadcast wakes the waiters; it is deferred with c.mu held and releases it.
func (c *client) broadcast() {
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *client) answer(m *wireMsg) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	c.mu.Lock()
	defer c.broadcast()
	ch := c.pending[id]
	if err != nil || ch == nil {
		if c.err == nil {
			c.err = fmt.Errorf("answer to no request: id %s, error %s", m.ID, m.Error)
		}
		return
	}
	delete(c.pending, id)
	ch <- response{result: m.Result, err: m.Error}
}

func truncate(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}
