package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"shellagent/acp"

	"github.com/sourcegraph/jsonrpc2"
)

// A Front serves a client that initialized the connection with another
// version of ACP than the Agent speaks (package protocol/v1front serves
// v1). It adapts that version's requests to calls of the same Agent, and
// it is the Client the Agent reports to, so that the Agent never knows
// which version its client speaks; it writes through the Wire it was made
// with.
//
// Initialize and the Methods run on the connection's read loop; the
// Client methods as Client says.
type Front interface {
	Client
	// Version is the ACP version the front speaks.
	Version() int
	// Initialize answers an initialize that asks for Version, with the
	// params as the client sent them, and returns the Encoding of what
	// the connection writes from then on (nil: v2's). It is called once,
	// on a front made for that initialize: when it succeeds, the
	// connection speaks the front's version with that encoding, until
	// another initialize succeeds before the first other request (which
	// makes a new front, or none); when it fails, nothing changes.
	Initialize(params *json.RawMessage) (result any, enc Encoding, err error)
	// Method returns how the front serves a request method after
	// initialize; false makes it unknown (-32601).
	Method(name string) (Method, bool)
}

// NewFront makes a Front of one connection, which writes through w: one
// for each initialize that asks for its version.
type NewFront func(w *Wire) Front

// Version returns the ACP version c speaks: a Front's own, else the
// Agent's (acp.ProtocolVersion). An Agent needs it only for what another
// version cannot express at all.
func Version(c Client) int {
	if f, ok := c.(Front); ok {
		return f.Version()
	}
	return acp.ProtocolVersion
}

// A Method is how a Conn serves one request method of a Front: made by
// AnswerNow or AnswerLater, which decode and validate the params (-32602)
// and answer a panic with -32603, as for the Agent's own version.
type Method struct{ h handler }

// AnswerNow serves a request answered as f returns, with f's result or
// error; follow, if not nil, runs right after the answer is queued.
func AnswerNow[T any, P interface {
	*T
	Validate() error
}](f func(p P) (result any, follow func(), err error)) Method {
	return Method{answeredThen(func(_ *Conn, p P) (any, func(), error) { return f(p) })}
}

// AnswerLater serves a request answered through reply, possibly after f
// returns; ctx ends if the client withdraws the request
// ($/cancel_request). The Observer hears of it (Observer.Requested).
func AnswerLater[T any, P interface {
	*T
	Validate() error
}](f func(ctx context.Context, p P, reply Reply)) Method {
	return Method{answeredByReply(func(ctx context.Context, _ *Conn, p P, reply Reply) { f(ctx, p, reply) })}
}

// DecodeParams decodes a request's params into v as the Conn does,
// reporting a mistake as a -32602 error that names the field; absent
// params decode as {}.
func DecodeParams(params *json.RawMessage, v any) error { return decodeParams(params, v) }

// A Wire is what a Conn gives its Front: the Agent, and the writer that
// the front queues what it reports on, in order with everything else the
// connection writes. Its methods never block on the peer and may be
// called from any goroutine.
type Wire struct{ c *Conn }

// Agent returns the Agent the connection serves.
func (w *Wire) Agent() Agent { return w.c.agent }

// Update queues a session update, encoded by the writer's encoding.
func (w *Wire) Update(sessionID string, update acp.Update) { w.c.w.update(sessionID, update) }

// UpdateTerminal queues a terminal update with the terminal's output, as
// Client.UpdateTerminal says.
func (w *Wire) UpdateTerminal(sessionID string, u *acp.TerminalUpdate, out OutputSource, mode OutputMode) {
	w.c.w.updateTerminal(sessionID, u, out, mode)
}

// Release stops streaming session's terminals, as Client.Release says.
func (w *Wire) Release(sessionID string) { w.c.w.release(sessionID) }

// Notify queues a session/update notification whose update is already
// in the front's shape: no encoding changes it.
func (w *Wire) Notify(sessionID string, update any) { w.c.w.notify(sessionID, update) }

// Attached queues the point where the client attaches to session again
// (session/resume, session/load): from there on the encoding
// (Encoding.Attached) takes the client to know none of the session's
// tool calls and terminals.
func (w *Wire) Attached(sessionID string) { w.c.w.attached(sessionID) }

// RequestPermission sends session/request_permission with params in the
// front's shape, as Client.RequestPermission says.
func (w *Wire) RequestPermission(ctx context.Context, sessionID string, params any, done func(*acp.PermissionResponse, error)) {
	w.c.requestPermission(ctx, sessionID, params, done)
}

// An Encoding turns what the Agent reports, in its own shapes, into the
// wire lines of a Front's version. The writer's machinery (ordering,
// coalescing, streaming output from sources in turn, flow control) is the
// same whatever the encoding.
//
// Every method is called on the writer's goroutine only, except Output,
// which is called with the writer's lock held when a terminal's first
// update is queued.
type Encoding interface {
	// AppendUpdate appends the line(s), newline included, that carry a
	// session update; it may append nothing.
	AppendUpdate(dst []byte, sessionID string, update acp.Update) ([]byte, error)
	// Output returns the encoder of one terminal's output.
	Output(sessionID, terminalID string) OutputEncoder
	// Attached says that the client attaches to session again from this
	// point of the stream on (see Wire.Attached): it knows none of the
	// session's tool calls and terminals, even on the connection that
	// created them.
	Attached(sessionID string)
}

// An OutputEncoder encodes one terminal's output.
type OutputEncoder interface {
	// AppendChunk appends the line that carries the terminal's next bytes.
	AppendChunk(dst, p []byte) []byte
	// AppendReplacement appends the line that replaces the client's copy
	// of the output with data, dropped bytes after what the client had (or
	// after the terminal's start, for a client that had nothing). u, if
	// not nil, is the terminal update the replacement goes with.
	AppendReplacement(dst []byte, u *acp.TerminalUpdate, data []byte, dropped int64) ([]byte, error)
}

// AppendNotification appends a session/update notification with update
// as it is, newline included.
func AppendNotification(dst []byte, sessionID string, update any) ([]byte, error) {
	return appendNotification(dst, sessionID, update)
}

// frontEncoding is a Front's Encoding as the writer calls it.
type frontEncoding struct{ e Encoding }

func (f frontEncoding) appendUpdate(dst []byte, session string, update acp.Update) ([]byte, error) {
	return f.e.AppendUpdate(dst, session, update)
}

func (f frontEncoding) output(session, terminal string) outputEncoder {
	return frontOutput{f.e.Output(session, terminal)}
}

func (f frontEncoding) attached(session string) { f.e.Attached(session) }

// frontOutput is a Front's OutputEncoder as the writer calls it.
type frontOutput struct{ o OutputEncoder }

func (f frontOutput) appendChunk(dst, p []byte) []byte { return f.o.AppendChunk(dst, p) }

func (f frontOutput) appendReplacement(dst []byte, u *acp.TerminalUpdate, data []byte, dropped int64) ([]byte, error) {
	return f.o.AppendReplacement(dst, u, data, dropped)
}

// frontMethod returns the handler of method on a connection served by
// c.front.
func (c *Conn) frontMethod(method string) (handler, bool) {
	m, ok := c.front.Method(method)
	return m.h, ok && m.h != nil
}

// frontInitialize answers an initialize that asks for the version
// newFront serves, with a new front, which initializes the Agent; once it
// succeeds, the connection speaks through that front, unless its version
// is fixed already (the same version: see Conn).
func (c *Conn) frontInitialize(req *jsonrpc2.Request, newFront NewFront, reply Reply) {
	f := newFront(&Wire{c})
	result, enc, err := f.Initialize(req.Params)
	if err != nil || c.fixed {
		reply(result, err) // fixed: answered, and nothing changes
		return
	}
	var e encoding = acpV2{}
	if enc != nil {
		e = frontEncoding{enc}
	}
	c.speak(f, e)
	reply(result, nil)
}

// unsupported is the refusal of an initialize that asks for version v,
// which neither the Agent nor a front speaks.
func (c *Conn) unsupported(v int) error {
	supported := []int{acp.ProtocolVersion}
	for fv := range c.fronts {
		supported = append(supported, fv)
	}
	slices.Sort(supported)
	names := make([]string, len(supported))
	for i, sv := range supported {
		names[i] = strconv.Itoa(sv)
	}
	speaks := names[len(names)-1]
	if len(names) > 1 {
		speaks = strings.Join(names[:len(names)-1], ", ") + " and " + speaks
	}
	return &acp.Error{
		Code:    acp.CodeUnsupportedProto,
		Message: fmt.Sprintf("protocolVersion: %d is not supported; shellagent speaks %s", v, speaks),
		Data:    map[string]any{"requested": v, "supported": supported},
	}
}
