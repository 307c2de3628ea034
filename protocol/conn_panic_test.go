package protocol_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/protocol"
	"shellagent/protocol/acptest"
)

// panicky is an agent whose handlers panic, except initialize.
type panicky struct {
	protocol.Agent // nil: any other method is not called
}

func (panicky) Initialize(protocol.Client, *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	return &acp.InitializeResponse{ProtocolVersion: 2, Info: acp.Implementation{Name: "panicky", Version: "1"}}, nil
}

func (panicky) NewSession(protocol.Client, *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	panic("session/new went wrong")
}

func (panicky) Prompt(context.Context, protocol.Client, *acp.PromptRequest, protocol.Reply) {
	panic("session/prompt went wrong")
}

func (panicky) CancelSession(protocol.Client, *acp.CancelSessionNotification) {
	panic("session/cancel went wrong")
}

// A panic in a handler is answered -32603, and the connection goes on.
func TestPanicIsAnInternalErrorAndTheAgentGoesOn(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var logged strings.Builder
	conn := protocol.NewConn(inR, outW, panicky{}, protocol.Options{Log: slog.New(slog.NewTextHandler(&logged, nil))})
	go func() {
		<-conn.Done()
		conn.Close()
		outW.Close()
	}()
	c := acptest.New(t, outR, inW)
	init := map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "t", "version": "1"}}
	c.MustCall("initialize", init, nil)
	for _, call := range []struct {
		method string
		params any
	}{
		{"session/new", map[string]any{"cwd": "/tmp"}},
		{"session/prompt", map[string]any{"sessionId": "s", "prompt": []map[string]string{{"type": "text", "text": "x"}}}},
	} {
		_, err := c.Call(call.method, call.params)
		if err == nil || err.Code != -32603 || !strings.Contains(err.Message, "went wrong") {
			t.Errorf("%s answered %v, want -32603", call.method, err)
		}
	}
	c.Notify("session/cancel", map[string]string{"sessionId": "s"})
	c.MustCall("initialize", init, nil) // still serving
	if n := strings.Count(logged.String(), "panic while handling"); n != 3 {
		t.Errorf("%d panics logged, want 3:\n%s", n, logged.String())
	}
}
