package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	rpc         *jsonrpc2.Conn
	log         *slog.Logger
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
	c := &Conn{agent: agent, log: opts.Log, w: NewWriter(w, opts.Log), deferred: make(map[jsonrpc2.ID]context.CancelFunc)}
	ready := make(chan struct{})
	stream := &objectStream{lines: newLineReader(r, opts.MaxLine), w: c.w, ready: ready, close: func() error { return nil }}
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
			c.handleNotification(req)
		}
		return
	}
	result, err := c.call(req)
	switch {
	case err != nil:
		conn.ReplyWithError(ctx, req.ID, toRPC(err))
	case result != deferred:
		conn.Reply(ctx, req.ID, result)
	}
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
	if err == nil && req.Method == "initialize" {
		c.initialized.Store(true)
	}
	return result, err
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

// decode is the params decoding shared by every handler.
func decode[T any](req *jsonrpc2.Request, check func(*T) error) (*T, error) {
	p := new(T)
	if err := decodeParams(req.Params, p); err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func required(field, v string) error {
	if v == "" {
		return InvalidParams("%s: required", field)
	}
	return nil
}

var requests = map[string]handler{
	"initialize": func(c *Conn, req *jsonrpc2.Request) (any, error) {
		p, err := decode(req, func(p *InitializeRequest) error {
			if p.ProtocolVersion == nil {
				return InvalidParams("protocolVersion: required")
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return c.agent.Initialize(c, p)
	},
	"session/new": func(c *Conn, req *jsonrpc2.Request) (any, error) {
		p, err := decode(req, func(p *NewSessionRequest) error { return required("cwd", p.Cwd) })
		if err != nil {
			return nil, err
		}
		return c.agent.NewSession(c, p)
	},
	"session/list": func(c *Conn, req *jsonrpc2.Request) (any, error) {
		p := &ListSessionsRequest{}
		if req.Params != nil && string(*req.Params) != "null" {
			var err error
			if p, err = decode[ListSessionsRequest](req, nil); err != nil {
				return nil, err
			}
		}
		return c.agent.ListSessions(c, p)
	},
	"session/resume": func(c *Conn, req *jsonrpc2.Request) (any, error) {
		p, err := decode(req, func(p *ResumeSessionRequest) error {
			return errors.Join(required("sessionId", p.SessionID), required("cwd", p.Cwd))
		})
		if err != nil {
			return nil, firstError(err)
		}
		return c.agent.ResumeSession(c, p)
	},
	"session/close": func(c *Conn, req *jsonrpc2.Request) (any, error) {
		p, err := decode(req, func(p *CloseSessionRequest) error { return required("sessionId", p.SessionID) })
		if err != nil {
			return nil, err
		}
		_, reply := c.reply(req.ID)
		c.agent.CloseSession(c, p, reply)
		return deferred, nil
	},
	"session/prompt": func(c *Conn, req *jsonrpc2.Request) (any, error) {
		p, err := decode(req, func(p *PromptRequest) error {
			if err := required("sessionId", p.SessionID); err != nil {
				return err
			}
			if len(p.Prompt) == 0 {
				return InvalidParams("prompt: must be a non-empty array of content blocks")
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		ctx, reply := c.reply(req.ID)
		c.agent.Prompt(ctx, c, p, reply)
		return deferred, nil
	},
	"terminal/cancel": func(c *Conn, req *jsonrpc2.Request) (any, error) {
		p, err := decode(req, func(p *CancelTerminalRequest) error {
			return errors.Join(required("sessionId", p.SessionID), required("terminalId", p.TerminalID))
		})
		if err != nil {
			return nil, firstError(err)
		}
		if err := c.agent.CancelTerminal(c, p); err != nil {
			return nil, err
		}
		return struct{}{}, nil
	},
	"tool_call/cancel": func(c *Conn, req *jsonrpc2.Request) (any, error) {
		p, err := decode(req, func(p *CancelToolCallRequest) error {
			return errors.Join(required("sessionId", p.SessionID), required("toolCallId", p.ToolCallID))
		})
		if err != nil {
			return nil, firstError(err)
		}
		_, reply := c.reply(req.ID)
		c.agent.CancelToolCall(c, p, reply)
		return deferred, nil
	},
	"session/set_config_option": func(c *Conn, req *jsonrpc2.Request) (any, error) {
		p, err := decode(req, func(p *SetConfigOptionRequest) error {
			return errors.Join(required("sessionId", p.SessionID), required("configId", p.ConfigID))
		})
		if err != nil {
			return nil, firstError(err)
		}
		return c.agent.SetConfigOption(c, p)
	},
}

// firstError unwraps errors.Join so that the first problem is reported.
func firstError(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := j.Unwrap(); len(errs) > 0 {
			return errs[0]
		}
	}
	return err
}

// slogLogger adapts slog to jsonrpc2's logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Printf(format string, v ...any) {
	s.l.Warn(fmt.Sprintf(format, v...))
}
