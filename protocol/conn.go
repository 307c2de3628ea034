package protocol

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"shellagent/acp"
	"shellagent/internal/jsonrpcline"

	"github.com/sourcegraph/jsonrpc2"
)

// Client is the connection as an Agent sees it: where session updates go.
// Its methods never block on the peer. Updates go out in the order they
// were queued, whichever goroutines queued them.
type Client interface {
	// Update queues a session/update notification. An *acp.TerminalUpdate
	// sent this way is plain data: use UpdateTerminal for a terminal whose
	// output the client should see.
	Update(sessionID string, update acp.Update)
	// UpdateTerminal queues a terminal_update together with the terminal's
	// output, read from out as mode says: the first call for a terminal
	// starts streaming it as terminal_output_chunk, a call whose update
	// has an exitStatus sends the rest of it and stops. Pass the same out
	// for every update of a terminal.
	UpdateTerminal(sessionID string, u *acp.TerminalUpdate, out OutputSource, mode OutputMode)
	// Release says that the session no longer reports to this client
	// (another connection resumed it): what was queued for it still goes
	// out, but its terminals' output is no longer streamed, nor held back
	// for this client.
	Release(sessionID string)
	// RequestPermission sends session/request_permission and calls done
	// with the answer, or with an error when ctx ends first (the request is
	// then withdrawn with $/cancel_request) or the connection closes. done
	// runs on its own goroutine.
	RequestPermission(ctx context.Context, p *acp.PermissionRequest, done func(*acp.PermissionResponse, error))
}

// PromptActed is implemented by a Client that must know when a prompt that
// acted at once beside a running turn (/bg, /ps, /stop while a command
// runs) is done: such a prompt ends no turn, so nothing else on the wire
// says so. The Agent calls Acted once every update the prompt causes has
// been queued, in order with them (from the goroutine that queues them),
// for the prompts of a session in the order they were inserted. The v1
// front (package protocol/v1front) answers the v1 session/prompt then; a
// v2 client needs nothing.
type PromptActed interface {
	Acted(sessionID string)
}

// Reply answers a request whose answer comes later; call it exactly once.
type Reply func(result any, err error)

// Agent is what a Conn serves. Methods run on the connection's read loop in
// the order requests arrive and must return promptly; work that takes time
// answers through a Reply. Their params have passed their Validate. An
// error of type *acp.Error is sent as is; any other error becomes -32603.
type Agent interface {
	// Initialize is called once the Conn has negotiated the version (see
	// Conn): the Agent answers in v2, whatever version the client speaks.
	Initialize(c Client, p *acp.InitializeRequest) (*acp.InitializeResponse, error)
	NewSession(c Client, p *acp.NewSessionRequest) (*acp.NewSessionResponse, error)
	ListSessions(c Client, p *acp.ListSessionsRequest) (*acp.ListSessionsResponse, error)
	ResumeSession(c Client, p *acp.ResumeSessionRequest) (*acp.ResumeSessionResponse, error)
	CloseSession(c Client, p *acp.CloseSessionRequest, reply Reply)
	// Prompt's ctx is cancelled if the client withdraws the request with
	// $/cancel_request before it is answered.
	Prompt(ctx context.Context, c Client, p *acp.PromptRequest, reply Reply)
	CancelSession(c Client, p *acp.CancelSessionNotification)
	// CancelTerminal answers through reply before it signals the
	// terminal, so the answer goes out before the exit status it causes.
	CancelTerminal(c Client, p *acp.CancelTerminalRequest, reply Reply)
	CancelToolCall(c Client, p *acp.CancelToolCallRequest, reply Reply)
	SetConfigOption(c Client, p *acp.SetConfigOptionRequest) (*acp.SetConfigOptionResponse, error)
}

// TerminalInput is what an Agent may serve besides Agent: typing into its
// terminals and sizing them, the extension methods
// _shellagent/terminal/write and _shellagent/terminal/resize. A Conn
// serves them, and so may a Front, when its Agent implements TerminalInput;
// otherwise they are unknown methods (-32601). Like Agent's, the methods
// run on the connection's read loop and must return promptly; they answer
// through reply, with {} once done (after what they queue: the resize's
// terminal_update), or with an error (a write that would block fails
// instead).
type TerminalInput interface {
	WriteTerminal(c Client, p *acp.WriteTerminalRequest, reply Reply)
	ResizeTerminal(c Client, p *acp.ResizeTerminalRequest, reply Reply)
}

// SessionDeleter is what an Agent may serve besides Agent: session/delete,
// which removes a session (closing it first if it is live) and its
// history for good. A Conn serves it in v2 when its Agent implements
// SessionDeleter; otherwise it is an unknown method (-32601).
type SessionDeleter interface {
	DeleteSession(c Client, p *acp.DeleteSessionRequest, reply Reply)
}

// SessionLooker is what an Agent may serve besides Agent: what any client
// may read of a live session without taking it from the client that has
// it and without a trace in it. _shellagent/session/look answers with
// what a slash command that only reads would say in the session, and
// _shellagent/service/read with the output of one of its services. A
// Conn serves them when its Agent implements SessionLooker (in v1, its
// front does); otherwise they are unknown methods (-32601).
type SessionLooker interface {
	LookSession(c Client, p *acp.LookSessionRequest, reply Reply)
	ReadService(c Client, p *acp.ReadServiceRequest, reply Reply)
}

// An Observer sees the messages of a connection that a client-side rule
// concerns: the requests the agent sends and withdraws, the responses the
// client sends, and its requests answered later. The Conn handles each
// message as it always does; the Observer only hears of it, and must
// return promptly. ClientChecks is the Observer that checks the rules only
// the connection sees.
type Observer interface {
	// Asked: the agent sent request id (as jsonrpc2 prints it) for
	// session. It runs on the goroutine that sends the request.
	Asked(id, sessionID string)
	// Withdrew: the agent withdrew request id with $/cancel_request. It
	// runs on the goroutine that waited for the answer.
	Withdrew(id string)
	// Answered: the client sent a response with id, before the Conn
	// handles it; result is its result, nil for an error. It runs on
	// the read loop.
	Answered(c Client, id string, result *json.RawMessage)
	// Requested: the client sent a request that is answered later
	// (through a Reply), with its params; inUse says whether another such
	// request with the same id still waits for its answer. It runs on
	// the read loop, before the request is handled.
	Requested(c Client, method, id string, params *json.RawMessage, inUse bool)
}

// Options configure a Conn.
type Options struct {
	MaxLine int          // largest accepted message; jsonrpcline.DefaultMaxLine if 0
	Log     *slog.Logger // slog.Default() if nil
	// StallTimeout is how long a write to the client may accept no bytes
	// before the client counts as stalled and terminal output is no longer
	// held back for it; DefaultStallTimeout if 0.
	StallTimeout time.Duration
	// Observer, if not nil, hears of the messages that client-side rules
	// concern (ClientChecks). Give each Conn its own.
	Observer Observer
	// Fronts serve the clients that ask initialize for another version
	// of ACP than the Agent's: Fronts[v] makes the Front of a connection
	// whose client asks for version v (v1front.New serves 1). A version
	// below acp.ProtocolVersion that no front serves is refused (-32022).
	Fronts map[int]NewFront
}

// Conn serves an Agent over a newline-delimited JSON-RPC byte stream.
//
// The client chooses the protocol with initialize: a protocolVersion that
// one of Options.Fronts serves gets a new front of that version, over the
// same Agent; any other from 2 on gets ACP v2, with the Conn itself as
// the Agent's Client; any other below 2 is refused (-32022). As the v2
// schema says, the client may repeat initialize before its first other
// request, and the latest successful one is authoritative: the
// connection speaks its version, with its capabilities, whatever the
// earlier ones chose. From the first other request on, they are the
// connection's for good: an initialize that asks for another version is
// refused (-32600), one of the same version is answered and changes
// nothing.
type Conn struct {
	agent       Agent
	w           *writer
	log         *slog.Logger
	rpc         *jsonrpc2.Conn
	stream      *objectStream // rpc's; responses go straight to it (send)
	initialized atomic.Bool
	closeOnce   sync.Once
	requestSeq  atomic.Int64

	fronts map[int]NewFront
	// front serves a client of another version, nil for v2. Owned by the
	// read loop: set by each successful initialize, read by the handlers.
	front Front
	// fixed: the client has sent a request other than initialize since
	// it initialized, so the version and capabilities of its latest
	// successful initialize are the connection's for good. Owned by the
	// read loop.
	fixed bool

	observer Observer // nil if none

	mu sync.Mutex // guards pending and answered
	// pending cancels the context of each request answered later, by
	// requestKey of its id.
	pending map[jsonrpc2.ID]context.CancelFunc
	// answered is closed once pending is empty, if Answered made it.
	answered chan struct{}

	asks askings // the permission requests in flight (own mutex)
}

// asking is a permission request the agent sent, until the agent hears
// of its end.
type asking struct {
	id        jsonrpc2.ID
	seq       int64 // the order it was asked in
	session   string
	ctx       context.Context // ends when the agent withdraws it
	withdrawn atomic.Bool     // its $/cancel_request is queued
}

// askings are a connection's permission requests in flight, by id, so
// that the answer to a session/close or session/delete goes after the
// $/cancel_request of each request of the session that it withdrew
// (nothing for a session follows its close's answer). Its methods are
// safe for concurrent use.
type askings struct {
	mu sync.Mutex
	m  map[string]*asking
}

func (as *askings) add(id jsonrpc2.ID, seq int64, session string, ctx context.Context) *asking {
	a := &asking{id: id, seq: seq, session: session, ctx: ctx}
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.m == nil {
		as.m = make(map[string]*asking)
	}
	as.m[id.Str] = a
	return a
}

func (as *askings) remove(id string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	delete(as.m, id)
}

// withdraw queues a's $/cancel_request on c, once: the Observer hears of
// it first.
func (as *askings) withdraw(c *Conn, a *asking) {
	if !a.withdrawn.CompareAndSwap(false, true) {
		return
	}
	if c.observer != nil {
		c.observer.Withdrew(a.id.String())
	}
	// Best effort: it fails only on a closed connection, where the
	// request is moot anyway.
	_ = c.rpc.Notify(context.Background(), "$/cancel_request", map[string]any{"requestId": a.id.Str})
}

// withdrawnFirst returns reply for the answer to a request that ends
// session (session/close, session/delete): once it succeeded, what it
// withdrew goes before it (the withdrawals' own goroutines may not have
// sent it yet), as nothing of the session follows the answer.
func (c *Conn) withdrawnFirst(session string, reply Reply) Reply {
	return func(result any, err error) {
		if err == nil {
			c.asks.flush(c, session)
		}
		reply(result, err)
	}
}

// flush queues on c the $/cancel_request of each request of session that
// the agent has withdrawn already and whose goroutine has not yet sent it.
func (as *askings) flush(c *Conn, session string) {
	as.mu.Lock()
	var ended []*asking
	for _, a := range as.m {
		if a.session == session && a.ctx.Err() != nil {
			ended = append(ended, a)
		}
	}
	as.mu.Unlock()
	slices.SortFunc(ended, func(x, y *asking) int { return cmp.Compare(x.seq, y.seq) })
	for _, a := range ended {
		as.withdraw(c, a)
	}
}

var _ Client = (*Conn)(nil)

// NewConn starts serving agent: requests are read from r, everything is
// written to w. Done is closed when r ends.
func NewConn(r io.Reader, w io.Writer, agent Agent, opts Options) *Conn {
	if opts.MaxLine == 0 {
		opts.MaxLine = jsonrpcline.DefaultMaxLine
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	c := &Conn{
		agent: agent, w: newWriter(w, opts.Log, opts.StallTimeout), log: opts.Log,
		observer: opts.Observer, pending: make(map[jsonrpc2.ID]context.CancelFunc), fronts: opts.Fronts,
	}
	ready := make(chan struct{})
	c.stream = &objectStream{msgs: jsonrpcline.NewReader(r, opts.MaxLine), w: c.w, ready: ready, log: opts.Log}
	c.rpc = jsonrpc2.NewConn(context.Background(), c.stream, rpcHandler{c},
		jsonrpc2.SetLogger(slogLogger{opts.Log}), jsonrpc2.OnRecv(c.received))
	close(ready) // the read loop may use c.rpc from now on
	return c
}

// Done is closed when the peer's input has ended.
func (c *Conn) Done() <-chan struct{} { return c.rpc.DisconnectNotify() }

// Close stops reading, writes everything queued, and stops the writer.
// Updates queued after Close are dropped.
func (c *Conn) Close() { c.CloseBy(time.Time{}) }

// CloseBy is Close with a deadline for the output: what is queued is
// written until cut; then the line under way, if any, is finished and
// nothing more is written, so that a client that takes the rest of that
// line before the process exits holds whole lines only, never a torn
// last one. CloseBy returns once the output has ended; a caller that must
// exit gives it until its own deadline, a little after cut. A zero cut
// is no deadline.
func (c *Conn) CloseBy(cut time.Time) {
	c.closeOnce.Do(func() {
		// Best effort: jsonrpc2 reports only that it was closed already.
		_ = c.rpc.Close()
		c.w.close(cut)
	})
}

// Idle reports whether output waits for the client and the client has
// taken none of it for d. A caller of CloseBy asks it to tell a client
// that takes the line under way slowly from one that takes nothing.
func (c *Conn) Idle(d time.Duration) bool { return c.w.peer.idle(d) }

// Update implements Client.
func (c *Conn) Update(sessionID string, update acp.Update) { c.w.update(sessionID, update) }

// UpdateTerminal implements Client.
func (c *Conn) UpdateTerminal(sessionID string, u *acp.TerminalUpdate, out OutputSource, mode OutputMode) {
	c.w.updateTerminal(sessionID, u, out, mode)
}

// Release implements Client.
func (c *Conn) Release(sessionID string) { c.w.release(sessionID) }

// RequestPermission implements Client.
func (c *Conn) RequestPermission(ctx context.Context, p *acp.PermissionRequest, done func(*acp.PermissionResponse, error)) {
	c.requestPermission(ctx, p.SessionID, p, done)
}

// requestPermission sends session/request_permission with params p for
// session, as Client.RequestPermission says.
func (c *Conn) requestPermission(ctx context.Context, session string, p any, done func(*acp.PermissionResponse, error)) {
	seq := c.requestSeq.Add(1)
	id := jsonrpc2.ID{Str: fmt.Sprintf("perm_%d", seq), IsString: true}
	if c.observer != nil {
		c.observer.Asked(id.String(), session) // before any answer can come
	}
	a := c.asks.add(id, seq, session, ctx)
	call, err := c.rpc.DispatchCall(ctx, "session/request_permission", p, jsonrpc2.PickID(id))
	if err != nil {
		c.asks.remove(id.Str)
		go done(nil, err)
		return
	}
	go func() {
		defer c.asks.remove(id.Str)
		var resp acp.PermissionResponse
		err := call.Wait(ctx, &resp)
		if ctx.Err() != nil {
			c.asks.withdraw(c, a)
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

// received sees every message the client sends, before it is handled
// (jsonrpc2.OnRecv): the Observer hears of each response.
func (c *Conn) received(_ *jsonrpc2.Request, resp *jsonrpc2.Response) {
	if resp != nil && c.observer != nil {
		c.observer.Answered(c.client(), resp.ID.String(), resp.Result)
	}
}

// rpcHandler is the jsonrpc2.Handler of a Conn.
type rpcHandler struct{ c *Conn }

// Handle dispatches one request or notification on the read loop.
func (h rpcHandler) Handle(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) {
	c := h.c
	if req.Notif {
		if c.initialized.Load() {
			defer func() {
				if r := recover(); r != nil {
					_ = c.panicked(req, r) // logged; a notification has no answer to carry it
				}
			}()
			c.handleNotification(req)
		}
		return
	}
	if req.Method != "initialize" && !c.initialized.Load() {
		c.replyNow(req.ID)(nil, &acp.Error{Code: acp.CodeInvalidRequest, Message: req.Method + ": initialize first"})
		return
	}
	handle, ok := requests[req.Method]
	if req.Method != "initialize" {
		c.fixed = true
		if c.front != nil {
			handle, ok = c.frontMethod(req.Method)
		}
	}
	if !ok {
		c.replyNow(req.ID)(nil, methodNotFound(req.Method))
		return
	}
	handle(c, req)
}

func methodNotFound(method string) error {
	return &acp.Error{Code: acp.CodeMethodNotFound, Message: "method not found: " + method}
}

// Client returns the Client this connection hands its Agent: the Conn
// itself, or its Front once the peer initialized with the front's version.
// It is what a server with many connections passes to the Agent when one
// of them goes away (Supervisor.Detach). Call it once Done is closed, or
// from an Agent method: the read loop decides it.
func (c *Conn) Client() Client { return c.client() }

// client is the Client the Agent reports to: the Conn, or its front.
func (c *Conn) client() Client {
	if c.front != nil {
		return c.front
	}
	return c
}

// panicked logs a panic recovered while handling req and returns the
// -32603 error to answer with: one bad request does not take the agent,
// and every command it runs, down with it.
func (c *Conn) panicked(req *jsonrpc2.Request, r any) error {
	c.log.Error("panic while handling a request", "method", req.Method, "panic", r, "stack", string(debug.Stack()))
	return fmt.Errorf("internal error while handling %s: %v", req.Method, r)
}

func (c *Conn) handleNotification(req *jsonrpc2.Request) {
	switch req.Method {
	case "session/cancel":
		p, err := decode[acp.CancelSessionNotification](req)
		if err != nil {
			// A notification has no answer: the log is the only place
			// to say why nothing was cancelled.
			c.log.Warn("ignored session/cancel", "err", err)
			return
		}
		c.agent.CancelSession(c.client(), p)
	case "$/cancel_request":
		c.withdraw(req.Params)
	default:
		// Unknown notifications are ignored.
	}
}

// replyNow returns the Reply of a request answered before its handler
// returns.
func (c *Conn) replyNow(id jsonrpc2.ID) Reply {
	return func(result any, err error) { c.send(id, result, err) }
}

// maxAwaiting bounds the requests of one connection that await their
// answer (prompts held behind the foreground, closes under way): each
// holds memory until it is answered, and a client can send them faster
// than they are answered. Past it, a request that would wait is refused
// at once (-32600), and the connection goes on.
const maxAwaiting = 1000

// errIDInUse is replyLater's refusal of an id that a request awaiting its
// answer has already.
var errIDInUse = errors.New("id in use")

// replyLater takes id as a request's that is answered later, and returns
// its Reply and a context that ends when the client withdraws the request
// ($/cancel_request) or once it is answered. It takes nothing and returns
// the error to answer with at once: errIDInUse if a request with id awaits
// its answer already (two requests under one id could not be told apart:
// the first answer would end the second's withdrawal, and the count of
// what awaits an answer), or a *acp.Error if maxAwaiting requests do.
func (c *Conn) replyLater(id jsonrpc2.ID, method string) (ctx context.Context, reply Reply, err error) {
	key := requestKey(id)
	c.mu.Lock()
	if _, taken := c.pending[key]; taken {
		c.mu.Unlock()
		return nil, nil, errIDInUse
	}
	if n := len(c.pending); n >= maxAwaiting {
		c.mu.Unlock()
		return nil, nil, &acp.Error{Code: acp.CodeInvalidRequest,
			Message: fmt.Sprintf("%s: %d requests of this connection await their answers already, the most it keeps; wait for their answers (or withdraw them) before sending more", method, n),
			Data:    map[string]int{"awaiting": n}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.pending[key] = cancel
	c.mu.Unlock()
	var once sync.Once
	return ctx, func(result any, err error) {
		once.Do(func() {
			c.mu.Lock()
			delete(c.pending, key)
			if len(c.pending) == 0 && c.answered != nil {
				close(c.answered)
				c.answered = nil
			}
			c.mu.Unlock()
			cancel()
			c.send(id, result, err)
		})
	}, nil
}

// Answered returns a channel that is closed once no request read so far
// awaits its answer: a caller that closes the connection after its input
// ended waits on it so as to answer what came before (a session/close
// under way), as long as it may wait.
func (c *Conn) Answered() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		done := make(chan struct{})
		close(done)
		return done
	}
	if c.answered == nil {
		c.answered = make(chan struct{})
	}
	return c.answered
}

// send queues the response to request id. It goes straight to the
// writer, not through jsonrpc2, which refuses to send once the peer's
// input has ended: the answer to a request read before the end (a prompt
// inserted, a close carried out) still goes out, until Close.
func (c *Conn) send(id jsonrpc2.ID, result any, err error) {
	resp := &jsonrpc2.Response{ID: id}
	if err == nil {
		err = resp.SetResult(result)
		if err != nil {
			c.log.Error("a result that does not marshal", "id", id, "err", err)
		}
	}
	if err != nil {
		resp.Result, resp.Error = nil, toRPC(err)
	}
	if err := c.stream.WriteObject(resp); err != nil {
		c.log.Error("a response that does not marshal", "id", id, "err", err)
	}
}

// withdraw serves $/cancel_request for a request still waiting for its
// answer.
func (c *Conn) withdraw(params *json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if params == nil || json.Unmarshal(*params, &p) != nil || p.RequestID == nil {
		return
	}
	raw := p.RequestID
	if jsonrpcline.ValidID(raw) == nil {
		return
	}
	if mustCarry(raw) {
		raw = carriedID(raw)
	}
	var id jsonrpc2.ID
	if json.Unmarshal(raw, &id) != nil {
		return
	}
	c.mu.Lock()
	cancel := c.pending[requestKey(id)]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// requestKey returns the id under which a request waits in pending: one
// key for every way of writing the same number (1, 1.0, 1e0), as JSON-RPC
// compares ids by value.
func requestKey(id jsonrpc2.ID) jsonrpc2.ID {
	raw, ok := strings.CutPrefix(id.Str, carriedIDPrefix)
	if !id.IsString || !ok {
		return id
	}
	v, _ := jsonrpcline.IntID([]byte(raw)) // checked when it was read
	if v >= 0 {
		return jsonrpc2.ID{Num: uint64(v)}
	}
	return jsonrpc2.ID{Str: carriedIDPrefix + strconv.FormatInt(v, 10), IsString: true}
}

type handler func(c *Conn, req *jsonrpc2.Request)

// params is a request's params type: it can say what is wrong with it.
type params[T any] interface {
	*T
	Validate() error
}

// answeredAtOnce adapts a method whose result is the answer: it decodes
// and validates the params, calls f and answers with what f returns.
func answeredAtOnce[T any, P params[T]](f func(c *Conn, p P) (any, error)) handler {
	return answeredThen(func(c *Conn, p P) (any, func(), error) {
		result, err := f(c, p)
		return result, nil, err
	})
}

// answeredThen is answeredAtOnce for a method with more to send once it
// has answered: follow, if not nil, runs right after the answer is
// queued.
func answeredThen[T any, P params[T]](f func(c *Conn, p P) (result any, follow func(), err error)) handler {
	return func(c *Conn, req *jsonrpc2.Request) {
		reply := c.replyNow(req.ID)
		answered := false
		defer func() {
			// A panic before the answer is answered -32603.
			if r := recover(); r != nil && !answered {
				reply(nil, c.panicked(req, r))
			} else if r != nil {
				_ = c.panicked(req, r) // logged; the request was answered already
			}
		}()
		p, err := decode[T, P](req)
		if err != nil {
			reply(nil, err)
			return
		}
		result, follow, err := f(c, p)
		answered = true
		reply(result, err)
		if follow != nil {
			follow()
		}
	}
}

// answeredByReply adapts a method that answers through a Reply, possibly
// after it returns; ctx ends if the client withdraws the request.
func answeredByReply[T any, P params[T]](f func(ctx context.Context, c *Conn, p P, reply Reply)) handler {
	return func(c *Conn, req *jsonrpc2.Request) {
		ctx, reply, err := c.replyLater(req.ID, req.Method)
		c.requested(req, errors.Is(err, errIDInUse)) // the client checks note an id in use
		if errors.Is(err, errIDInUse) {
			err = &acp.Error{Code: acp.CodeInvalidRequest, Message: fmt.Sprintf("id %s: a request with this id awaits its answer; give each request in flight an id of its own", req.ID)}
		}
		if err != nil {
			c.replyNow(req.ID)(nil, err)
			return
		}
		defer func() {
			// A panic answers the request -32603, unless f answered it
			// already (reply runs once).
			if r := recover(); r != nil {
				reply(nil, c.panicked(req, r))
			}
		}()
		p, err := decode[T, P](req)
		if err != nil {
			reply(nil, err)
			return
		}
		f(ctx, c, p, reply)
	}
}

// requested tells the Observer of a request answered later; inUse: one
// under its id awaits its answer.
func (c *Conn) requested(req *jsonrpc2.Request, inUse bool) {
	if c.observer == nil {
		return
	}
	c.observer.Requested(c.client(), req.Method, req.ID.String(), req.Params, inUse)
}

func decode[T any, P params[T]](req *jsonrpc2.Request) (P, error) {
	p := P(new(T))
	if err := decodeParams(req.Params, p); err != nil {
		return nil, err
	}
	return p, p.Validate()
}

// optional adapts a method of A, what an Agent may serve besides Agent
// (TerminalInput, SessionDeleter, SessionLooker): it answers -32601 when
// the Agent does not serve A.
func optional[A any, T any, P params[T]](f func(a A, c *Conn, p P, reply Reply)) handler {
	serve := answeredByReply(func(_ context.Context, c *Conn, p P, reply Reply) {
		f(c.agent.(A), c, p, reply)
	})
	return func(c *Conn, req *jsonrpc2.Request) {
		if _, ok := c.agent.(A); !ok {
			c.replyNow(req.ID)(nil, methodNotFound(req.Method))
			return
		}
		serve(c, req)
	}
}

var (
	writeTerminal = optional(func(ti TerminalInput, c *Conn, p *acp.WriteTerminalRequest, reply Reply) {
		ti.WriteTerminal(c.client(), p, reply)
	})
	resizeTerminal = optional(func(ti TerminalInput, c *Conn, p *acp.ResizeTerminalRequest, reply Reply) {
		ti.ResizeTerminal(c.client(), p, reply)
	})
	deleteSession = optional(func(d SessionDeleter, c *Conn, p *acp.DeleteSessionRequest, reply Reply) {
		d.DeleteSession(c.client(), p, c.withdrawnFirst(p.SessionID, reply))
	})
	lookSession = optional(func(l SessionLooker, c *Conn, p *acp.LookSessionRequest, reply Reply) {
		l.LookSession(c.client(), p, reply)
	})
	readService = optional(func(l SessionLooker, c *Conn, p *acp.ReadServiceRequest, reply Reply) {
		l.ReadService(c.client(), p, reply)
	})
)

// initialize serves initialize: it chooses the protocol of the connection.
func initialize(c *Conn, req *jsonrpc2.Request) {
	reply := c.replyNow(req.ID)
	defer func() {
		// A panic in decode or the Agent comes before the answer: answer
		// it -32603.
		if r := recover(); r != nil {
			reply(nil, c.panicked(req, r))
		}
	}()
	p, err := decode[acp.InitializeRequest](req)
	if err != nil {
		reply(nil, err)
		return
	}
	v := int(*p.ProtocolVersion)
	newFront, want := c.fronts[v], acp.ProtocolVersion
	if newFront != nil {
		want = v
	}
	switch {
	case newFront == nil && v < acp.ProtocolVersion:
		reply(nil, c.unsupported(v))
	case c.fixed && want != Version(c.client()):
		reply(nil, &acp.Error{Code: acp.CodeInvalidRequest, Message: fmt.Sprintf(
			"initialize: this connection speaks ACP v%d for good since its first request after initialize; initialize may ask for another version only before it", Version(c.client()))})
	case newFront != nil:
		c.frontInitialize(req, newFront, reply)
	default:
		result, err := c.agent.Initialize(c, p)
		if err == nil && !c.fixed {
			c.speak(nil, acpV2{})
		}
		reply(result, err)
	}
}

// speak makes the connection serve front (nil: v2 itself) with enc for
// what it writes from now on: the choice of a successful initialize,
// which replaces whatever an earlier one chose. It runs before the first
// other request, so that nothing of the earlier choice was queued.
func (c *Conn) speak(front Front, enc encoding) {
	c.front = front
	c.w.setEncoding(enc)
	c.initialized.Store(true)
}

var requests = map[string]handler{
	"initialize":     initialize,
	"session/new":    answeredAtOnce(func(c *Conn, p *acp.NewSessionRequest) (any, error) { return c.agent.NewSession(c, p) }),
	"session/list":   answeredAtOnce(func(c *Conn, p *acp.ListSessionsRequest) (any, error) { return c.agent.ListSessions(c, p) }),
	"session/resume": answeredAtOnce(func(c *Conn, p *acp.ResumeSessionRequest) (any, error) { return c.agent.ResumeSession(c, p) }),
	"session/set_config_option": answeredAtOnce(func(c *Conn, p *acp.SetConfigOptionRequest) (any, error) {
		return c.agent.SetConfigOption(c, p)
	}),
	"terminal/cancel": answeredByReply(func(_ context.Context, c *Conn, p *acp.CancelTerminalRequest, reply Reply) {
		c.agent.CancelTerminal(c, p, reply)
	}),
	"session/close": answeredByReply(func(_ context.Context, c *Conn, p *acp.CloseSessionRequest, reply Reply) {
		c.agent.CloseSession(c, p, c.withdrawnFirst(p.SessionID, reply))
	}),
	"session/prompt": answeredByReply(func(ctx context.Context, c *Conn, p *acp.PromptRequest, reply Reply) {
		c.agent.Prompt(ctx, c, p, reply)
	}),
	"tool_call/cancel": answeredByReply(func(_ context.Context, c *Conn, p *acp.CancelToolCallRequest, reply Reply) {
		c.agent.CancelToolCall(c, p, reply)
	}),
	acp.MethodWriteTerminal:  writeTerminal,
	acp.MethodResizeTerminal: resizeTerminal,
	acp.MethodLookSession:    lookSession,
	acp.MethodReadService:    readService,
	"session/delete":         deleteSession,
}

// slogLogger adapts slog to jsonrpc2's logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Printf(format string, v ...any) {
	s.l.Warn(fmt.Sprintf(format, v...))
}
