package v1front

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/protocol"
)

// turnAgent reports each prompt as a turn, as the supervisor does:
// inserted, running, its work, idle. A prompt whose text starts with
//
//   - "hold" stays running until session/cancel, which ends it cancelled;
//   - "now" acts at once while a "hold" runs: inserted, an agent message,
//     no state change (on an idle session it is a turn of its own);
//   - "drop" is never inserted (-32800, as a held prompt that
//     session/cancel drops);
//   - "bad" is refused (-32602);
//   - "fail" ends with the error stop reason, after a tool call that goes
//     paused and then to a custom status;
//   - "custom" ends with a custom stop reason.
//
// With noHold, "hold" is an ordinary prompt.
type turnAgent struct {
	stubAgent
	noHold bool
	busy   bool // a "hold" runs; Prompt and CancelSession run on the read loop
}

func (*turnAgent) Initialize(protocol.Client, *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	return &acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersion, Info: acp.Implementation{Name: "agent", Version: "1"}, Meta: map[string]any{"x": 1}}, nil
}

func (a *turnAgent) Prompt(_ context.Context, c protocol.Client, p *acp.PromptRequest, reply protocol.Reply) {
	text := ""
	if len(p.Prompt) > 0 {
		text = p.Prompt[0].Text
	}
	msg := func(s string) {
		c.Update(p.SessionID, &acp.Message{SessionUpdate: acp.KindAgentMessage, MessageID: "a", Content: []acp.ContentBlock{acp.TextBlock(s)}})
	}
	switch {
	case strings.HasPrefix(text, "drop"):
		reply(nil, acp.RequestCancelled("dropped"))
	case strings.HasPrefix(text, "bad"):
		reply(nil, acp.InvalidParams("prompt: bad"))
	case strings.HasPrefix(text, "now") && a.busy:
		reply(&acp.PromptResponse{MessageID: "u"}, nil)
		msg("at once")
		c.(protocol.PromptActed).Acted(p.SessionID) // what an Agent owes a prompt that acted at once
	case strings.HasPrefix(text, "fail"), strings.HasPrefix(text, "custom"):
		reply(&acp.PromptResponse{MessageID: "u"}, nil)
		c.Update(p.SessionID, &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateRunning})
		end := &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateIdle, StopReason: "_custom"}
		if text == "fail" {
			for _, status := range []string{acp.StatusPaused, "_waiting"} {
				c.Update(p.SessionID, &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_9", Title: "t", Status: status})
			}
			end.StopReason, end.Error = acp.StopError, &acp.Error{Code: -32603, Message: "it broke"}
		}
		c.Update(p.SessionID, end)
	case strings.HasPrefix(text, "hold") && !a.noHold && !a.busy:
		a.busy = true
		reply(&acp.PromptResponse{MessageID: "u"}, nil)
		c.Update(p.SessionID, &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateRunning})
	default:
		reply(&acp.PromptResponse{MessageID: "u"}, nil)
		c.Update(p.SessionID, &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateRunning})
		msg("work")
		c.Update(p.SessionID, &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateIdle, StopReason: acp.StopEndTurn})
	}
}

func (a *turnAgent) CancelSession(c protocol.Client, p *acp.CancelSessionNotification) {
	if !a.busy {
		return
	}
	a.busy = false
	c.Update(p.SessionID, &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateIdle, StopReason: acp.StopCancelled})
}

func (*turnAgent) ResumeSession(c protocol.Client, p *acp.ResumeSessionRequest) (*acp.ResumeSessionResponse, error) {
	c.Update(p.SessionID, &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "t", Status: acp.StatusInProgress})
	return &acp.ResumeSessionResponse{AvailableCommands: []acp.AvailableCommand{{Type: "command", Name: "ps", Description: "list"}}}, nil
}

// newV1Wire is a Conn on pipes serving agent to a client that initialized
// with protocolVersion 1.
func newV1Wire(t *testing.T, agent protocol.Agent) *wire {
	w := newWireWith(t, agent)
	w.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientInfo":{"name":"t","version":"1"}}}`)
	m := w.recv()
	var res struct {
		ProtocolVersion   int
		AgentCapabilities struct{ SessionCapabilities map[string]any }
		AuthMethods       []any
		AgentInfo         acp.Implementation
		Meta              map[string]any `json:"_meta"`
	}
	if json.Unmarshal(m["result"], &res) != nil || res.ProtocolVersion != 1 || res.AuthMethods == nil || res.AgentInfo.Name != "agent" ||
		len(res.AgentCapabilities.SessionCapabilities) != 3 || res.Meta["x"] != 1.0 {
		t.Fatalf("v1 initialize answered %s", m["result"])
	}
	return w
}

// said renders a message as "id:result" for a response or the update kind.
func said(m map[string]json.RawMessage) string {
	if m["id"] != nil {
		if m["error"] != nil {
			return string(m["id"]) + ":error"
		}
		return string(m["id"]) + ":" + string(m["result"])
	}
	var p struct {
		Update struct{ SessionUpdate string }
	}
	json.Unmarshal(m["params"], &p)
	return p.Update.SessionUpdate
}

func prompt(id int, text string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "session/prompt",
		"params": map[string]any{"sessionId": "s", "prompt": []map[string]string{{"type": "text", "text": text}}}})
	return string(b)
}

func TestV1Turns(t *testing.T) {
	t.Parallel()
	w := newV1Wire(t, &turnAgent{})
	expect := func(want ...string) {
		t.Helper()
		for _, s := range want {
			if got := said(w.recv()); got != s {
				t.Fatalf("got %s, want %s", got, s)
			}
		}
	}
	w.send(prompt(1, "ls"))
	expect("agent_message_chunk", `1:{"stopReason":"end_turn"}`)
	w.send(prompt(2, "hold"))
	w.send(prompt(3, "now"))
	expect("agent_message_chunk", `3:{"stopReason":"end_turn"}`)
	w.send(prompt(4, "drop"))
	expect(`4:{"stopReason":"cancelled"}`)
	w.send(prompt(5, "bad"))
	expect("5:error")
	w.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	expect(`2:{"stopReason":"cancelled"}`)
	w.send(prompt(6, "ls"))
	expect("agent_message_chunk", `6:{"stopReason":"end_turn"}`)
}

func TestV1ResumeSendsUpdatesAfterTheResponse(t *testing.T) {
	t.Parallel()
	w := newV1Wire(t, &turnAgent{})
	w.send(`{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"s","cwd":"/","mcpServers":[]}}`)
	for _, want := range []string{`1:{}`, "available_commands_update", "tool_call"} {
		if got := said(w.recv()); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
}

func TestV1Methods(t *testing.T) {
	t.Parallel()
	w := newV1Wire(t, &turnAgent{})
	for _, tt := range []struct {
		line string
		code int64
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"terminal/cancel","params":{"sessionId":"s","terminalId":"term_1"}}`, acp.CodeMethodNotFound},
		{`{"jsonrpc":"2.0","id":2,"method":"tool_call/cancel","params":{"sessionId":"s","toolCallId":"call_1"}}`, acp.CodeMethodNotFound},
		{`{"jsonrpc":"2.0","id":3,"method":"session/set_mode","params":{"sessionId":"s","modeId":"x"}}`, acp.CodeMethodNotFound},
		// After the requests above, an initialize of the other version is
		// refused, one of the same version answered, once its params are
		// right.
		{`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":2}}`, acp.CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1}}`, 0},
		{`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1.0}}`, 0},
		{`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":1.5}}`, acp.CodeInvalidParams},
		{`{"jsonrpc":"2.0","id":6,"method":"session/set_config_option","params":{"sessionId":"s","configId":"x","value":"1s"}}`, 0},
	} {
		w.send(tt.line)
		if m := w.recv(); errorCode(m) != tt.code {
			t.Errorf("%s: answered %v", tt.line, m)
		}
	}
}

// A protocolVersion of 1 however written (1.0, 1e0, 10e-1) asks for v1,
// as JSON Schema's integer is any number whose fractional part is zero.
func TestV1InitializeIntegerWrittenWithAFraction(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"1.0", "1e0", "10e-1"} {
		w := newWireWith(t, &turnAgent{})
		w.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":` + v + `}}`)
		var res struct{ ProtocolVersion int }
		if m := w.recv(); json.Unmarshal(m["result"], &res) != nil || res.ProtocolVersion != 1 {
			t.Errorf("initialize with protocolVersion %s answered %v", v, m)
		}
	}
}

// FuzzRequestV1 is FuzzRequest on a v1 connection: whatever the line, the
// connection answers only with valid JSON-RPC, goes on, and answers a
// request with a valid id exactly once (a prompt when its turn ends).
func FuzzRequestV1(f *testing.F) {
	for _, line := range []string{
		prompt(1, "ls"), prompt(2, "now"), prompt(3, "drop"), prompt(4, "bad"),
		`{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":6,"method":"session/resume","params":{"sessionId":"s","cwd":"/"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"session/load","params":{"sessionId":"s","cwd":"/","mcpServers":[]}}`,
		`{"jsonrpc":"2.0","id":7,"method":"session/close","params":{"sessionId":"s"}}`,
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`,
	} {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		checkOneLine(t, &turnAgent{noHold: true}, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1}}`, line)
	})
}

// TestV1Release: when another connection resumes the session, the turn
// under way here ends (its end is reported there), and so does a prompt of
// this connection that the Agent inserts later.
func TestV1Release(t *testing.T) {
	t.Parallel()
	a := &turnAgent{}
	w := newV1Wire(t, a)
	w.send(prompt(1, "hold"))
	w.send(`{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`) // the prompt is in
	if got := said(w.recv()); !strings.HasPrefix(got, "2:") {
		t.Fatalf("got %s", got)
	}
	w.conn.Client().Release("s")
	if got := said(w.recv()); got != `1:{"stopReason":"end_turn"}` {
		t.Fatalf("the turn under way: %s", got)
	}
	w.send(prompt(3, "ls")) // the Agent would report it elsewhere; here it reports it to us
	if got := said(w.recv()); got != `3:{"stopReason":"end_turn"}` {
		t.Fatalf("a prompt after the release: %s", got)
	}
}

// resumePanics is a turnAgent whose ResumeSession reports an update and
// then panics.
type resumePanics struct{ turnAgent }

func (a *resumePanics) ResumeSession(c protocol.Client, p *acp.ResumeSessionRequest) (*acp.ResumeSessionResponse, error) {
	c.Update(p.SessionID, &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "t", Status: acp.StatusInProgress})
	panic("resume went wrong")
}

// A resume that fails (here by a panic) does not leave the session's
// updates held back: what the Agent reported goes out, and the next turn
// is reported and answered.
func TestV1FailedResumeHoldsNothingBack(t *testing.T) {
	t.Parallel()
	w := newV1Wire(t, &resumePanics{})
	w.send(`{"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"s","cwd":"/","mcpServers":[]}}`)
	if got := said(w.recv()); got != "tool_call" {
		t.Fatalf("got %s, want what the Agent reported", got)
	}
	if m := w.recv(); errorCode(m) != acp.CodeInternalError {
		t.Fatalf("resume answered %v, want -32603", m)
	}
	w.send(prompt(2, "ls"))
	for _, want := range []string{"agent_message_chunk", `2:{"stopReason":"end_turn"}`} {
		if got := said(w.recv()); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
}

// replayAgent is a turnAgent whose session "s" (cwd "/") has a history: a
// user message, an agent message and call_1, which a prompt "finish"
// completes.
type replayAgent struct{ turnAgent }

func (a *replayAgent) ResumeSession(c protocol.Client, p *acp.ResumeSessionRequest) (*acp.ResumeSessionResponse, error) {
	switch {
	case p.SessionID != "s":
		return nil, acp.SessionNotFound(p.SessionID)
	case p.Cwd != "/":
		return nil, acp.InvalidParams("cwd: %q is not this session's working directory", p.Cwd)
	}
	if string(p.ReplayFrom) == `{"type":"start"}` {
		c.Update("s", &acp.Message{SessionUpdate: acp.KindUserMessage, MessageID: "msg_1", Content: []acp.ContentBlock{acp.TextBlock("sleep 30")}})
		c.Update("s", &acp.Message{SessionUpdate: acp.KindAgentMessage, MessageID: "msg_2", Content: []acp.ContentBlock{acp.TextBlock("hi")}})
	}
	c.Update("s", &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "sleep 30", Status: acp.StatusInProgress})
	c.Update("s", &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateRunning})
	return &acp.ResumeSessionResponse{AvailableCommands: []acp.AvailableCommand{{Type: "command", Name: "ps", Description: "list"}}}, nil
}

func (a *replayAgent) Prompt(ctx context.Context, c protocol.Client, p *acp.PromptRequest, reply protocol.Reply) {
	if len(p.Prompt) > 0 && p.Prompt[0].Text == "finish" {
		reply(&acp.PromptResponse{MessageID: "u"}, nil)
		c.Update("s", &acp.Message{SessionUpdate: acp.KindUserMessage, MessageID: "msg_3", Content: p.Prompt})
		c.Update("s", &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Status: acp.StatusCompleted})
		c.Update("s", &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateIdle, StopReason: acp.StopEndTurn})
		c.(protocol.PromptActed).Acted(p.SessionID) // inserted while the resumed session was busy: it acted at once
		return
	}
	a.turnAgent.Prompt(ctx, c, p, reply)
}

// TestV1Load: session/load replays the history before its response
// (user messages too), announcing every tool call again each time; the
// commands follow the response. A load the Agent refuses is answered with
// its error and changes nothing: the session's tool calls stay known, and
// live user messages are not echoed.
func TestV1Load(t *testing.T) {
	t.Parallel()
	w := newV1Wire(t, &replayAgent{})
	load := func(id int, session, cwd string) string {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "session/load", "params": map[string]any{"sessionId": session, "cwd": cwd, "mcpServers": []any{}}})
		return string(b)
	}
	expect := func(want ...string) {
		t.Helper()
		for _, want := range want {
			if got := said(w.recv()); got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		}
	}
	for id := 1; id <= 2; id++ {
		w.send(load(id, "s", "/"))
		expect("user_message_chunk", "agent_message_chunk", "tool_call", fmt.Sprintf("%d:{}", id), "available_commands_update")
	}
	w.send(load(3, "x", "/"))
	if m := w.recv(); errorCode(m) != acp.CodeNotFound {
		t.Fatalf("an unknown session: %v", m)
	}
	w.send(load(4, "s", "/elsewhere"))
	if m := w.recv(); errorCode(m) != acp.CodeInvalidParams {
		t.Fatalf("another cwd: %v", m)
	}
	w.send(prompt(5, "finish"))
	expect("tool_call_update", `5:{"stopReason":"end_turn"}`)
	f := w.conn.Client().(*v1Front)
	f.mu.Lock()
	_, kept := f.sessions["x"]
	f.mu.Unlock()
	if kept {
		t.Error("the front keeps state for a session that the Agent does not know")
	}
}

// TestV1LoadSendsUserMessageChunks: the replayed user message is the
// prompt as sent, with its message id.
func TestV1LoadSendsUserMessageChunks(t *testing.T) {
	t.Parallel()
	w := newV1Wire(t, &replayAgent{})
	w.send(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s","cwd":"/","mcpServers":[]}}`)
	var p struct {
		Update struct {
			SessionUpdate, MessageID string
			Content                  struct{ Type, Text string }
		}
	}
	if err := json.Unmarshal(w.recv()["params"], &p); err != nil {
		t.Fatal(err)
	}
	if u := p.Update; u.SessionUpdate != "user_message_chunk" || u.MessageID != "msg_1" || u.Content.Type != "text" || u.Content.Text != "sleep 30" {
		t.Errorf("replayed user message %+v", u)
	}
}

// TestV1ErrorsAndUnknownValues: v2 values v1 does not have are mapped: the
// error stop reason answers the prompt with the failure, a custom stop
// reason is end_turn, paused and custom statuses are in_progress.
func TestV1ErrorsAndUnknownValues(t *testing.T) {
	t.Parallel()
	w := newV1Wire(t, &turnAgent{})
	w.send(prompt(1, "fail"))
	for range 2 {
		m := w.recv()
		var p struct{ Update struct{ Status string } }
		if json.Unmarshal(m["params"], &p) != nil || p.Update.Status != acp.StatusInProgress {
			t.Fatalf("got %s, want a tool call in_progress", m["params"])
		}
	}
	m := w.recv()
	if string(m["id"]) != "1" || !strings.Contains(string(m["error"]), `"it broke"`) {
		t.Fatalf("the failed turn was answered %v, want the error", m)
	}
	w.send(prompt(2, "custom"))
	if got := said(w.recv()); got != `2:{"stopReason":"end_turn"}` {
		t.Fatalf("a custom stop reason was answered %s", got)
	}
}

// The terminal input methods reach an Agent that serves them in v1 as in
// v2, with their params decoded and checked; an Agent that does not serve
// them has no such methods.
func TestV1TerminalInputMethods(t *testing.T) {
	t.Parallel()
	a := inputAgent{calls: make(chan any, 2)}
	w := newV1WireFor(t, a)
	w.send(`{"jsonrpc":"2.0","id":1,"method":"_shellagent/terminal/write","params":{"sessionId":"s","terminalId":"term_1","data":"aGkN"}}`)
	if m := w.recv(); string(m["result"]) != "{}" {
		t.Errorf("write answered %v", m)
	}
	if p := (<-a.calls).(*acp.WriteTerminalRequest); string(p.Bytes()) != "hi\r" || p.TerminalID != "term_1" {
		t.Errorf("write got %+v", p)
	}
	w.send(`{"jsonrpc":"2.0","id":2,"method":"_shellagent/terminal/resize","params":{"sessionId":"s","terminalId":"term_1","size":{"cols":200,"rows":50}}}`)
	if m := w.recv(); string(m["result"]) != "{}" {
		t.Errorf("resize answered %v", m)
	}
	if p := (<-a.calls).(*acp.ResizeTerminalRequest); *p.Size != (acp.TerminalSize{Cols: 200, Rows: 50}) {
		t.Errorf("resize got %+v", p)
	}
	w.send(`{"jsonrpc":"2.0","id":3,"method":"_shellagent/terminal/resize","params":{"sessionId":"s","terminalId":"term_1","size":{"cols":0,"rows":50}}}`)
	if m := w.recv(); errorCode(m) != acp.CodeInvalidParams || !strings.Contains(string(m["error"]), "size.cols") {
		t.Errorf("bad size answered %v", m)
	}

	w = newV1WireFor(t, stubAgent{})
	w.send(`{"jsonrpc":"2.0","id":1,"method":"_shellagent/terminal/write","params":{"sessionId":"s","terminalId":"term_1","data":"aGk="}}`)
	if m := w.recv(); errorCode(m) != acp.CodeMethodNotFound {
		t.Errorf("an agent without TerminalInput answered %v", m)
	}
}
