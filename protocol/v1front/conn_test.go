package v1front

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"shellagent/acp"
	"shellagent/internal/wiretest"
	"shellagent/protocol"
)

// What the tests of package protocol have, for a Conn with the v1 front.

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// v1Options are the options of a Conn that serves v1 through this front.
func v1Options() protocol.Options {
	return protocol.Options{Log: discardLog(), Fronts: map[int]protocol.NewFront{ProtocolVersion: New}}
}

// stubAgent answers every method at once, except Prompt, which it answers
// only when the client withdraws the request.
type stubAgent struct{}

func (stubAgent) Initialize(protocol.Client, *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	return &acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersion}, nil
}
func (stubAgent) NewSession(protocol.Client, *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	return &acp.NewSessionResponse{SessionID: "s"}, nil
}
func (stubAgent) ListSessions(protocol.Client, *acp.ListSessionsRequest) (*acp.ListSessionsResponse, error) {
	return &acp.ListSessionsResponse{}, nil
}
func (stubAgent) ResumeSession(protocol.Client, *acp.ResumeSessionRequest) (*acp.ResumeSessionResponse, error) {
	return &acp.ResumeSessionResponse{}, nil
}
func (stubAgent) CloseSession(_ protocol.Client, _ *acp.CloseSessionRequest, reply protocol.Reply) {
	reply(struct{}{}, nil)
}
func (stubAgent) Prompt(ctx context.Context, _ protocol.Client, _ *acp.PromptRequest, reply protocol.Reply) {
	context.AfterFunc(ctx, func() { reply(nil, acp.RequestCancelled("withdrawn")) })
}
func (stubAgent) CancelSession(protocol.Client, *acp.CancelSessionNotification) {}
func (stubAgent) CancelTerminal(_ protocol.Client, _ *acp.CancelTerminalRequest, r protocol.Reply) {
	r(struct{}{}, nil)
}
func (stubAgent) CancelToolCall(_ protocol.Client, _ *acp.CancelToolCallRequest, r protocol.Reply) {
	r(struct{}{}, nil)
}
func (stubAgent) SetConfigOption(protocol.Client, *acp.SetConfigOptionRequest) (*acp.SetConfigOptionResponse, error) {
	return &acp.SetConfigOptionResponse{}, nil
}

// wire is a Conn on pipes, driven line by line.
type wire struct {
	*wiretest.Wire
	t    *testing.T
	conn *protocol.Conn
}

// newV1WireFor is a wire to agent, initialized with protocol version 1.
func newV1WireFor(t *testing.T, agent protocol.Agent) *wire {
	w := newWireWith(t, agent)
	w.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	if m := w.recv(); m["result"] == nil {
		t.Fatalf("v1 initialize answered %v", m)
	}
	return w
}

// newWireWith is a wire to a Conn with this front serving agent, not yet
// initialized.
func newWireWith(t *testing.T, agent protocol.Agent) *wire {
	lw, conn := wiretest.Open(t, func(in io.Reader, out io.Writer) *protocol.Conn { return protocol.NewConn(in, out, agent, v1Options()) })
	return &wire{Wire: lw, t: t, conn: conn}
}

func (w *wire) send(line string) { w.t.Helper(); w.Send(line) }

// recv returns the next message the connection writes.
func (w *wire) recv() map[string]json.RawMessage { w.t.Helper(); return w.Recv() }

var errorCode = wiretest.ErrorCode

// inputAgent serves TerminalInput: it answers with err, and records what
// it was asked.
type inputAgent struct {
	stubAgent
	err   error
	calls chan any
}

func (a inputAgent) WriteTerminal(_ protocol.Client, p *acp.WriteTerminalRequest, reply protocol.Reply) {
	a.calls <- p
	a.answer(reply)
}

func (a inputAgent) ResizeTerminal(_ protocol.Client, p *acp.ResizeTerminalRequest, reply protocol.Reply) {
	a.calls <- p
	a.answer(reply)
}

func (a inputAgent) answer(reply protocol.Reply) {
	if a.err != nil {
		reply(nil, a.err)
		return
	}
	reply(struct{}{}, nil)
}

// checkOneLine is wiretest.CheckOneLine on a Conn with this front serving
// agent.
func checkOneLine(t *testing.T, agent protocol.Agent, init, line string) {
	t.Helper()
	wiretest.CheckOneLine(t, func(in io.Reader, out io.Writer) *protocol.Conn { return protocol.NewConn(in, out, agent, v1Options()) }, init, line)
}
