package lineclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"shellagent/acp"
	"shellagent/internal/jsonrpcline"
)

// maxLine is the longest line the client takes from the agent, in bytes:
// the cap the agent puts on the lines it reads.
const maxLine = jsonrpcline.DefaultMaxLine

// maxUnsent bounds the bytes of messages waiting for the agent to read
// them. An agent that lets more wait has stopped reading, and the
// connection fails rather than grow.
const maxUnsent = 16 << 20

// errLineTooLong reports a line over maxLine (jsonrpcline.ErrTooLong in
// the client's words); the reader skips it.
var errLineTooLong = fmt.Errorf("a line longer than %d MiB", maxLine>>20)

// conn is the client's side of a JSON-RPC 2.0 connection to the agent,
// one message per line: it frames and numbers what the client sends, keeps
// the calls that await an answer, matches answers to them, and reads the
// agent's lines with a size cap.
//
// Sending (call, notify, reply, replyError) is safe from any goroutine and
// never blocks on the agent: a goroutine of the conn's own writes the
// messages in the order they were sent. The agent's lines arrive on lines;
// the goroutine that takes them passes each to receive and runs the
// callbacks of the answers, so callbacks run on that goroutine only.
//
// A failure to encode or write, or an agent that leaves more than
// maxUnsent bytes unread, is kept: err returns the first failure, and
// failed is closed when it happens. After a failure, sends are traced but
// not written.
type conn struct {
	lines   chan inbound   // the agent's lines in order; closed at the end of its output
	read    chan struct{}  // closed when the reader has returned
	written chan struct{}  // closed when the writer has returned
	failure chan struct{}  // closed at the first failure
	r       io.ReadCloser  // the agent's stdout; read by the reader
	w       io.WriteCloser // the agent's stdin; written by the writer

	mu       sync.Mutex // guards the fields below
	wake     *sync.Cond // signalled when unsent grows or hungUp is set
	trace    io.Writer  // nil: no trace, or the trace failed
	traceErr error
	nextID   int64
	pending  map[string]func(*message) // callbacks of the calls awaiting an answer, by id
	unsent   [][]byte                  // lines the writer has yet to take
	queued   int                       // bytes sent but not yet written
	hungUp   bool                      // no more messages: the writer returns once unsent is written
	keepOpen bool                      // with hungUp: the writer leaves w open, for close
	broken   error                     // the first failure
}

// inbound is a line from the agent, or a line refused.
type inbound struct {
	line []byte
	err  error // errLineTooLong: a line was refused; reading goes on
}

// newConn starts a connection that reads the agent's lines from r and
// writes the client's to w, and traces both ways to trace if it is not
// nil. The conn closes r and w.
func newConn(r io.ReadCloser, w io.WriteCloser, trace io.Writer) *conn {
	c := &conn{
		lines:   make(chan inbound, 64),
		read:    make(chan struct{}),
		written: make(chan struct{}),
		failure: make(chan struct{}),
		r:       r,
		w:       w,
		trace:   trace,
		pending: make(map[string]func(*message)),
	}
	c.wake = sync.NewCond(&c.mu)
	go c.readLines()
	go c.writeLines()
	return c
}

// readLines sends each of the agent's lines to c.lines until the end of
// its output or a read error (r closed).
func (c *conn) readLines() {
	defer close(c.read)
	defer close(c.lines)
	lr := jsonrpcline.NewReader(c.r, maxLine)
	for {
		line, err := lr.Line()
		switch {
		case errors.Is(err, jsonrpcline.ErrTooLong):
			c.lines <- inbound{err: errLineTooLong}
		case err != nil:
			return
		default:
			c.lines <- inbound{line: bytes.Clone(line)}
		}
	}
}

// writeLines writes the sent lines in order. After hangUp it writes what
// is left, closes w unless told to keep it open, and returns.
func (c *conn) writeLines() {
	defer close(c.written)
	for {
		c.mu.Lock()
		for len(c.unsent) == 0 && !c.hungUp {
			c.wake.Wait()
		}
		batch, done, broken, keepOpen := c.unsent, c.hungUp, c.broken != nil, c.keepOpen
		c.unsent = nil
		c.mu.Unlock()
		for _, line := range batch {
			if broken {
				break
			}
			if _, err := c.w.Write(line); err != nil {
				c.fail(fmt.Errorf("lineclient: writing to the agent: %w", err))
				broken = true
			}
			c.mu.Lock()
			c.queued -= len(line)
			c.mu.Unlock()
		}
		if done && len(batch) == 0 {
			if !keepOpen {
				_ = c.w.Close() // Best effort: the agent may be gone.
			}
			return
		}
	}
}

// fail records err as the connection's failure if it is the first.
func (c *conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failLocked(err)
}

func (c *conn) failLocked(err error) {
	if c.broken == nil {
		c.broken = err
		close(c.failure)
	}
}

// failed is closed at the connection's first failure.
func (c *conn) failed() <-chan struct{} { return c.failure }

// err returns the connection's first failure, else the trace's, or nil.
func (c *conn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return c.broken
	}
	return c.traceErr
}

// send encodes m, traces it and queues it for the writer.
func (c *conn) send(m *message) {
	m.JSONRPC = "2.0"
	line, err := json.Marshal(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failLocked(fmt.Errorf("lineclient: encoding a message: %w", err))
		return
	}
	c.traceLocked("client", line)
	switch {
	case c.broken != nil || c.hungUp:
		return
	case c.queued > 0 && c.queued+len(line) > maxUnsent:
		c.failLocked(fmt.Errorf("lineclient: the agent has left %d bytes of the client's messages unread: it is not reading", c.queued))
		return
	}
	c.unsent = append(c.unsent, append(line, '\n'))
	c.queued += len(line) + 1
	c.wake.Signal()
}

// call sends a request. then runs with the answer, on the goroutine that
// passes the answer to receive.
func (c *conn) call(method string, params any, then func(*message)) {
	raw, err := json.Marshal(params)
	c.mu.Lock()
	c.nextID++
	id := strconv.FormatInt(c.nextID, 10)
	if err != nil {
		c.failLocked(fmt.Errorf("lineclient: encoding %s params: %w", method, err))
		c.mu.Unlock()
		return
	}
	c.pending[id] = then
	c.mu.Unlock()
	c.send(&message{ID: json.RawMessage(id), Method: method, Params: raw})
}

// notify sends a notification.
func (c *conn) notify(method string, params any) {
	raw, err := json.Marshal(params)
	if err != nil {
		c.fail(fmt.Errorf("lineclient: encoding %s params: %w", method, err))
		return
	}
	c.send(&message{Method: method, Params: raw})
}

// reply answers the agent's request id with result.
func (c *conn) reply(id json.RawMessage, result any) {
	raw, err := json.Marshal(result)
	if err != nil {
		c.fail(fmt.Errorf("lineclient: encoding the answer to %s: %w", id, err))
		return
	}
	c.send(&message{ID: id, Result: raw})
}

// replyError answers the agent's request id with an error.
func (c *conn) replyError(id json.RawMessage, code int64, text string) {
	c.send(&message{ID: id, Error: &acp.Error{Code: code, Message: text}})
}

// receive traces a line from the agent and decodes it. For the answer to
// a pending call, then is the call's callback, and the call no longer
// awaits an answer; then is nil for an answer to no call.
func (c *conn) receive(line []byte) (m *message, then func(*message), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.traceLocked("agent", line)
	m = new(message)
	if err := json.Unmarshal(line, m); err != nil {
		return nil, nil, err
	}
	if m.isResponse() {
		then = c.pending[string(m.ID)]
		delete(c.pending, string(m.ID))
	}
	return m, then, nil
}

// traceLocked writes a line to the trace, if there is one. A trace that
// fails is dropped.
func (c *conn) traceLocked(from string, line []byte) {
	if c.trace == nil {
		return
	}
	if _, err := c.trace.Write(traceLine(from, line)); err != nil {
		c.traceErr = fmt.Errorf("lineclient: writing the trace: %w", err)
		c.trace = nil
	}
}

// hangUp says the client has nothing more to send. With eof the writer
// writes what waits, then closes the agent's stdin, which asks the agent
// to exit. Without, what waits is dropped and stdin stays open until
// close: an agent that is then sent SIGTERM gets one request to end, not
// two (shellagent takes the first and leaves a second signal to its
// default action). The agent's lines from here on are read and dropped,
// so that a full pipe never keeps the agent from exiting: nothing else
// may take c.lines after hangUp.
func (c *conn) hangUp(eof bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hungUp {
		return
	}
	c.hungUp, c.keepOpen = true, !eof
	if !eof {
		c.unsent = nil
	}
	c.wake.Signal()
	go func() {
		for range c.lines {
		}
	}()
}

// close hangs up (without eof) if that is not done, then closes both
// pipes now, which
// ends a write that the agent does not take and a read of a pipe that a
// leftover process holds open, and waits for the reader and the writer to
// return.
func (c *conn) close() {
	c.hangUp(false)
	_ = c.w.Close() // Best effort: the writer may have closed it.
	_ = c.r.Close() // Best effort: ends the reader; nothing more is wanted.
	<-c.written
	<-c.read
}

// traceLine renders a line for the trace: {"client":MSG} or {"agent":MSG},
// with the message embedded verbatim, or as a JSON string if it is not
// valid JSON.
func traceLine(from string, line []byte) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"` + from + `":`)
	if json.Valid(line) {
		buf.Write(bytes.TrimSpace(line))
	} else {
		s, _ := json.Marshal(string(line)) // Safe: a string always encodes.
		buf.Write(s)
	}
	buf.WriteString("}\n")
	return buf.Bytes()
}
