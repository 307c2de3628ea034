package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/sourcegraph/jsonrpc2"
)

// Client is the connection as an Agent sees it: where session updates go.
// Its methods never block on the peer.
type Client interface {
	// Update queues a session/update notification.
	Update(sessionID string, update any)
	// RequestPermission sends session/request_permission and calls done
	// with the answer, or with an error when ctx ends first (the request is
	// then withdrawn with $/cancel_request) or the connection closes. done
	// runs on its own goroutine.
	RequestPermission(ctx context.Context, p *PermissionRequest, done func(*PermissionResponse, error))
}

// Reply answers a request whose answer comes later; call it exactly once.
type Reply func(result any, err error)

// Agent is what a Conn serves. Methods run on the connection's read loop in
// the order requests arrive and must return promptly; work that takes time
// answers through a Reply. An error of type *Error is sent as is; any other
// error becomes -32603.
type Agent interface {
	Initialize(c Client, p *InitializeRequest) (*InitializeResponse, error)
	NewSession(c Client, p *NewSessionRequest) (*NewSessionResponse, error)
	ListSessions(c Client, p *ListSessionsRequest) (*ListSessionsResponse, error)
	ResumeSession(c Client, p *ResumeSessionRequest) (*ResumeSessionResponse, error)
	CloseSession(c Client, p *CloseSessionRequest, reply Reply)
	// Prompt's ctx is cancelled if the client withdraws the request with
	// $/cancel_request before it is answered.
	Prompt(ctx context.Context, c Client, p *PromptRequest, reply Reply)
	CancelSession(c Client, p *CancelSessionNotification)
	CancelTerminal(c Client, p *CancelTerminalRequest) error
	CancelToolCall(c Client, p *CancelToolCallRequest, reply Reply)
	SetConfigOption(c Client, p *SetConfigOptionRequest) (*SetConfigOptionResponse, error)
}

// Options configure a Conn.
type Options struct {
	MaxLine int          // largest accepted message; DefaultMaxLine if 0
	Log     *slog.Logger // slog.Default() if nil
}

// Conn serves an Agent over a newline-delimited JSON-RPC byte stream.
type Conn struct {
	agent       Agent
	w           *Writer
	log         *slog.Logger
	rpc         *jsonrpc2.Conn
	initialized atomic.Bool
	closeOnce   sync.Once
	requestSeq  atomic.Int64

	mu       sync.Mutex // guards deferred
	deferred map[jsonrpc2.ID]context.CancelFunc
}

var _ Client = (*Conn)(nil)

// NewConn starts serving agent: requests are read from r, everything is
// written to w. Done is closed when r ends.
func NewConn(r io.Reader, w io.Writer, agent Agent, opts Options) *Conn {
	if opts.MaxLine == 0 {
		opts.MaxLine = DefaultMaxLine
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	c := &Conn{agent: agent, w: NewWriter(w, opts.Log), log: opts.Log, deferred: make(map[jsonrpc2.ID]context.CancelFunc)}
	ready := make(chan struct{})
	stream := &objectStream{lines: newLineReader(r, opts.MaxLine), w: c.w, ready: ready}
	c.rpc = jsonrpc2.NewConn(context.Background(), stream, c, jsonrpc2.SetLogger(slogLogger{opts.Log}))
	close(ready) // the read loop may use c.rpc from now on
	return c
}

// Done is closed when the peer's input has ended.
func (c *Conn) Done() <-chan struct{} { return c.rpc.DisconnectNotify() }

// Close stops reading, writes everything queued, and stops the writer.
// Updates queued after Close are dropped.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		c.rpc.Close()
		c.w.Close()
	})
}

// Update implements Client.
func (c *Conn) Update(sessionID string, update any) { c.w.Update(sessionID, update) }

// RequestPermission implements Client.
func (c *Conn) RequestPermission(ctx context.Context, p *PermissionRequest, done func(*PermissionResponse, error)) {
	id := jsonrpc2.ID{Str: fmt.Sprintf("perm_%d", c.requestSeq.Add(1)), IsString: true}
	call, err := c.rpc.DispatchCall(ctx, "session/request_permission", p, jsonrpc2.PickID(id))
	if err != nil {
		go done(nil, err)
		return
	}
	go func() {
		var resp PermissionResponse
		err := call.Wait(ctx, &resp)
		if ctx.Err() != nil {
			c.rpc.Notify(context.Background(), "$/cancel_request", map[string]any{"requestId": id.Str})
			done(nil, ctx.Err())
			return
		}
		if err != nil {
			done(nil, err)
			return
		}
		done(&resp, nil)
	}()
}

// Handle implements jsonrpc2.Handler: it dispatches one request or
// notification on the read loop.
func (c *Conn) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	if req.Notif {
		if c.initialized.Load() {
			defer c.recoverPanic(req, nil)
			c.handleNotification(req)
		}
		return
	}
	var result any
	var err error
	func() {
		defer c.recoverPanic(req, &err)
		result, err = c.call(req)
	}()
	switch {
	case err != nil:
		conn.ReplyWithError(ctx, req.ID, toRPC(err))
	case result != deferred:
		conn.Reply(ctx, req.ID, result)
	}
}

// recoverPanic, deferred, turns a panic while handling req into a -32603
// error (into *err, for a request) and a log line, so that one bad request
// does not take the agent and every command it runs down with it.
func (c *Conn) recoverPanic(req *jsonrpc2.Request, err *error) {
	if r := recover(); r != nil {
		e := c.panicked(req, r)
		if err != nil {
			*err = e
		}
	}
}

// panicked logs a recovered panic and returns the error to answer with.
func (c *Conn) panicked(req *jsonrpc2.Request, r any) error {
	c.log.Error("panic while handling a request", "method", req.Method, "panic", r, "stack", string(debug.Stack()))
	return fmt.Errorf("internal error while handling %s: %v", req.Method, r)
}

func (c *Conn) call(req *jsonrpc2.Request) (any, error) {
	if req.Method != "initialize" && !c.initialized.Load() {
		return nil, &Error{Code: CodeInvalidRequest, Message: req.Method + ": initialize first"}
	}
	h, ok := requests[req.Method]
	if !ok {
		return nil, &Error{Code: CodeMethodNotFound, Message: "method not found: " + req.Method}
	}
	result, err := h(c, req)
	if err != nil {
		return nil, err
	}
	if req.Method == "initialize" {
		c.initialized.Store(true)
	}
	return result, nil
}

// deferred is returned by handlers whose answer is sent later via a Reply.
var deferred = new(int)

func (c *Conn) handleNotification(req *jsonrpc2.Request) {
	switch req.Method {
	case "session/cancel":
		var p CancelSessionNotification
		if decodeParams(req.Params, &p) == nil && p.SessionID != "" {
			c.agent.CancelSession(c, &p)
		}
	case "$/cancel_request":
		c.withdraw(req.Params)
	default:
		// Unknown notifications are ignored.
	}
}

// reply returns the Reply of a request answered later, and a context that
// ends when the client withdraws the request ($/cancel_request) or once it
// is answered.
func (c *Conn) reply(id jsonrpc2.ID) (context.Context, Reply) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	c.deferred[id] = cancel
	c.mu.Unlock()
	var once sync.Once
	return ctx, func(result any, err error) {
		once.Do(func() {
			c.mu.Lock()
			delete(c.deferred, id)
			c.mu.Unlock()
			cancel()
			if err != nil {
				c.rpc.ReplyWithError(context.Background(), id, toRPC(err))
				return
			}
			c.rpc.Reply(context.Background(), id, result)
		})
	}
}

// withdraw serves $/cancel_request for a request still waiting for its
// answer.
func (c *Conn) withdraw(params *json.RawMessage) {
	var p struct {
		RequestID *jsonrpc2.ID `json:"requestId"`
	}
	if params == nil || json.Unmarshal(*params, &p) != nil || p.RequestID == nil {
		return
	}
	c.mu.Lock()
	cancel := c.deferred[*p.RequestID]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

type handler func(c *Conn, req *jsonrpc2.Request) (any, error)

// params is a request's params type: it can say what is wrong with it.
type params[T any] interface {
	*T
	validate() error
}

// now adapts a method answered at once.
func now[T any, P params[T]](f func(c *Conn, p P) (any, error)) handler {
	return func(c *Conn, req *jsonrpc2.Request) (any, error) {
		p, err := decode[T, P](req)
		if err != nil {
			return nil, err
		}
		return f(c, p)
	}
}

// later adapts a method answered through a Reply; ctx ends if the client
// withdraws the request.
func later[T any, P params[T]](f func(ctx context.Context, c *Conn, p P, reply Reply)) handler {
	return func(c *Conn, req *jsonrpc2.Request) (result any, err error) {
		p, err := decode[T, P](req)
		if err != nil {
			return nil, err
		}
		ctx, reply := c.reply(req.ID)
		defer func() {
			// A panic answers the request, unless it was answered already
			// (reply runs once).
			if r := recover(); r != nil {
				reply(nil, c.panicked(req, r))
				result, err = deferred, nil
			}
		}()
		f(ctx, c, p, reply)
		return deferred, nil
	}
}

func decode[T any, P params[T]](req *jsonrpc2.Request) (P, error) {
	p := P(new(T))
	if err := decodeParams(req.Params, p); err != nil {
		return nil, err
	}
	return p, p.validate()
}

var requests = map[string]handler{
	"initialize":     now(func(c *Conn, p *InitializeRequest) (any, error) { return c.agent.Initialize(c, p) }),
	"session/new":    now(func(c *Conn, p *NewSessionRequest) (any, error) { return c.agent.NewSession(c, p) }),
	"session/list":   now(func(c *Conn, p *ListSessionsRequest) (any, error) { return c.agent.ListSessions(c, p) }),
	"session/resume": now(func(c *Conn, p *ResumeSessionRequest) (any, error) { return c.agent.ResumeSession(c, p) }),
	"session/set_config_option": now(func(c *Conn, p *SetConfigOptionRequest) (any, error) {
		return c.agent.SetConfigOption(c, p)
	}),
	"terminal/cancel": now(func(c *Conn, p *CancelTerminalRequest) (any, error) {
		return struct{}{}, c.agent.CancelTerminal(c, p)
	}),
	"session/close": later(func(_ context.Context, c *Conn, p *CloseSessionRequest, reply Reply) {
		c.agent.CloseSession(c, p, reply)
	}),
	"session/prompt": later(func(ctx context.Context, c *Conn, p *PromptRequest, reply Reply) {
		c.agent.Prompt(ctx, c, p, reply)
	}),
	"tool_call/cancel": later(func(_ context.Context, c *Conn, p *CancelToolCallRequest, reply Reply) {
		c.agent.CancelToolCall(c, p, reply)
	}),
}

// slogLogger adapts slog to jsonrpc2's logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Printf(format string, v ...any) {
	s.l.Warn(fmt.Sprintf(format, v...))
}
