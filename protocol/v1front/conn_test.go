package v1front

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/jsonrpcline"
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
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	conn *protocol.Conn
}

// newV1WireFor is a wire to agent, initialized with protocol version 1.
func newV1WireFor(t *testing.T, agent protocol.Agent) *wire {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w := &wire{t: t, in: inW, out: bufio.NewReader(outR), conn: protocol.NewConn(inR, outW, agent, v1Options())}
	t.Cleanup(func() {
		inW.Close()
		<-w.conn.Done()
		go io.Copy(io.Discard, outR) // Close flushes what is queued
		w.conn.Close()
		outW.Close()
	})
	w.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
	if m := w.recv(); m["result"] == nil {
		t.Fatalf("v1 initialize answered %v", m)
	}
	return w
}

func (w *wire) send(line string) {
	w.t.Helper()
	if _, err := io.WriteString(w.in, line+"\n"); err != nil {
		w.t.Fatal(err)
	}
}

// recv returns the next message the connection writes.
func (w *wire) recv() map[string]json.RawMessage {
	w.t.Helper()
	type result struct {
		line []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := w.out.ReadBytes('\n')
		ch <- result{line, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			w.t.Fatal(r.err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.line, &m); err != nil {
			w.t.Fatalf("%s: %v", r.line, err)
		}
		return m
	case <-time.After(10 * time.Second):
		w.t.Fatal("no message from the connection")
		return nil
	}
}

// errorCode returns the error code of a response, or 0.
func errorCode(m map[string]json.RawMessage) int64 {
	var e struct {
		Code int64 `json:"code"`
	}
	if m["error"] == nil || json.Unmarshal(m["error"], &e) != nil {
		return 0
	}
	return e.Code
}

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

// checkOneLine sends init and line to a connection serving agent, then a
// request of its own, and checks that every message written is valid
// JSON-RPC and that a request with a valid id in line is answered exactly
// once, before the connection's own request.
func checkOneLine(t *testing.T, agent protocol.Agent, init, line string) {
	line = strings.ReplaceAll(line, "\n", " ")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := protocol.NewConn(inR, outW, agent, v1Options())
	msgs := make(chan []byte)
	go func() {
		defer close(msgs)
		br := bufio.NewReader(outR)
		for {
			b, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			msgs <- b
		}
	}()
	defer func() {
		inW.Close()
		<-conn.Done()
		go func() {
			for range msgs {
			}
		}()
		conn.Close()
		outW.Close()
	}()
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() map[string]json.RawMessage {
		select {
		case b := <-msgs:
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil || string(m["jsonrpc"]) != `"2.0"` {
				t.Fatalf("wrote %s (%v)", b, err)
			}
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no answer")
			return nil
		}
	}
	send(init)
	recv()
	send(line)
	send(`{"jsonrpc":"2.0","id":"end","method":"session/list","params":{}}`)
	var answers []map[string]json.RawMessage
	for {
		m := recv()
		if string(m["id"]) == `"end"` {
			break
		}
		answers = append(answers, m)
	}
	id, isRequest := requestID(line)
	if !isRequest {
		return
	}
	n := 0
	for _, m := range answers {
		if sameJSON(m["id"], id) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("request with id %s answered %d times: %v", id, n, answers)
	}
}

// requestID returns the id of a line that is a JSON-RPC request with an id
// the connection can carry back.
func requestID(line string) (json.RawMessage, bool) {
	env, refusal := jsonrpcline.Check([]byte(line))
	return env.ID, refusal == nil && env.Kind == jsonrpcline.Request
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
