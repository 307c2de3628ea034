package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/internal/wiretest"
)

// stubAgent answers every method at once, except Prompt, which it answers
// only when the client withdraws the request.
type stubAgent struct{}

func (stubAgent) Initialize(Client, *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	return &acp.InitializeResponse{ProtocolVersion: acp.ProtocolVersion}, nil
}
func (stubAgent) NewSession(Client, *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	return &acp.NewSessionResponse{SessionID: "s"}, nil
}
func (stubAgent) ListSessions(Client, *acp.ListSessionsRequest) (*acp.ListSessionsResponse, error) {
	return &acp.ListSessionsResponse{}, nil
}
func (stubAgent) ResumeSession(Client, *acp.ResumeSessionRequest) (*acp.ResumeSessionResponse, error) {
	return &acp.ResumeSessionResponse{}, nil
}
func (stubAgent) CloseSession(_ Client, _ *acp.CloseSessionRequest, reply Reply) {
	reply(struct{}{}, nil)
}
func (stubAgent) Prompt(ctx context.Context, _ Client, _ *acp.PromptRequest, reply Reply) {
	context.AfterFunc(ctx, func() { reply(nil, acp.RequestCancelled("withdrawn")) })
}
func (stubAgent) CancelSession(Client, *acp.CancelSessionNotification)           {}
func (stubAgent) CancelTerminal(_ Client, _ *acp.CancelTerminalRequest, r Reply) { r(struct{}{}, nil) }
func (stubAgent) CancelToolCall(_ Client, _ *acp.CancelToolCallRequest, r Reply) { r(struct{}{}, nil) }
func (stubAgent) SetConfigOption(Client, *acp.SetConfigOptionRequest) (*acp.SetConfigOptionResponse, error) {
	return &acp.SetConfigOptionResponse{}, nil
}

// wire is a Conn on pipes, driven line by line.
type wire struct {
	*wiretest.Wire
	t    *testing.T
	conn *Conn
}

func newWire(t *testing.T) *wire { return newWireFor(t, stubAgent{}, 2) }

// newWireFor is a wire to agent, initialized with protocol version v.
func newWireFor(t *testing.T, agent Agent, v int) *wire {
	w := newWireWith(t, agent, Options{Log: discardLog()})
	w.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%d}}`, v))
	w.recv()
	return w
}

// newWireWith is a wire to a Conn to agent with opts, not yet
// initialized.
func newWireWith(t *testing.T, agent Agent, opts Options) *wire {
	lw, conn := wiretest.Open(t, func(in io.Reader, out io.Writer) *Conn { return NewConn(in, out, agent, opts) })
	return &wire{Wire: lw, t: t, conn: conn}
}

func (w *wire) send(line string) { w.t.Helper(); w.Send(line) }

// recv returns the next message the connection writes.
func (w *wire) recv() map[string]json.RawMessage { w.t.Helper(); return w.Recv() }

// request sends a request of method with params under id and returns
// the answer, and its error's message ("" if none).
func (w *wire) request(id int, method, params string) (m map[string]json.RawMessage, message string) {
	w.t.Helper()
	w.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	m = w.recv()
	var e struct {
		Message string `json:"message"`
	}
	json.Unmarshal(m["error"], &e) // Best effort: no error, no message.
	return m, e.Message
}

var errorCode = wiretest.ErrorCode

// inputAgent serves TerminalInput: it answers with err, and records what
// it was asked.
type inputAgent struct {
	stubAgent
	err   error
	calls chan any
}

func (a inputAgent) WriteTerminal(_ Client, p *acp.WriteTerminalRequest, reply Reply) {
	a.calls <- p
	a.answer(reply)
}

func (a inputAgent) ResizeTerminal(_ Client, p *acp.ResizeTerminalRequest, reply Reply) {
	a.calls <- p
	a.answer(reply)
}

func (a inputAgent) answer(reply Reply) {
	if a.err != nil {
		reply(nil, a.err)
		return
	}
	reply(struct{}{}, nil)
}

// The terminal input methods reach an Agent that serves them, with their
// params decoded and checked; an Agent that does not serve them has no
// such methods (protocol/v1front's TestV1TerminalInputMethods: the same
// in v1).
func TestTerminalInputMethods(t *testing.T) {
	t.Parallel()
	for _, v := range []int{2} {
		a := inputAgent{calls: make(chan any, 2)}
		w := newWireFor(t, a, v)
		w.send(`{"jsonrpc":"2.0","id":1,"method":"_shellagent/terminal/write","params":{"sessionId":"s","terminalId":"term_1","data":"aGkN"}}`)
		if m := w.recv(); string(m["result"]) != "{}" {
			t.Errorf("v%d write answered %v", v, m)
		}
		if p := (<-a.calls).(*acp.WriteTerminalRequest); string(p.Bytes()) != "hi\r" || p.TerminalID != "term_1" {
			t.Errorf("v%d write got %+v", v, p)
		}
		w.send(`{"jsonrpc":"2.0","id":2,"method":"_shellagent/terminal/resize","params":{"sessionId":"s","terminalId":"term_1","size":{"cols":200,"rows":50}}}`)
		if m := w.recv(); string(m["result"]) != "{}" {
			t.Errorf("v%d resize answered %v", v, m)
		}
		if p := (<-a.calls).(*acp.ResizeTerminalRequest); *p.Size != (acp.TerminalSize{Cols: 200, Rows: 50}) {
			t.Errorf("v%d resize got %+v", v, p)
		}
		w.send(`{"jsonrpc":"2.0","id":3,"method":"_shellagent/terminal/resize","params":{"sessionId":"s","terminalId":"term_1","size":{"cols":0,"rows":50}}}`)
		if m := w.recv(); errorCode(m) != acp.CodeInvalidParams || !strings.Contains(string(m["error"]), "size.cols") {
			t.Errorf("v%d bad size answered %v", v, m)
		}
	}

	a := inputAgent{err: acp.InvalidParams("terminalId: no terminal"), calls: make(chan any, 1)}
	w := newWireFor(t, a, 2)
	w.send(`{"jsonrpc":"2.0","id":1,"method":"_shellagent/terminal/write","params":{"sessionId":"s","terminalId":"term_9","data":"aGk="}}`)
	if m := w.recv(); errorCode(m) != acp.CodeInvalidParams {
		t.Errorf("the agent's error answered %v", m)
	}

	w = newWire(t)
	w.send(`{"jsonrpc":"2.0","id":1,"method":"_shellagent/terminal/write","params":{"sessionId":"s","terminalId":"term_1","data":"aGk="}}`)
	if m := w.recv(); errorCode(m) != acp.CodeMethodNotFound {
		t.Errorf("an agent without TerminalInput answered %v", m)
	}
}

// lookAgent serves SessionLooker: it answers with what it was asked.
type lookAgent struct{ stubAgent }

func (lookAgent) LookSession(_ Client, p *acp.LookSessionRequest, reply Reply) {
	reply(&acp.LookSessionResponse{Text: p.SessionID + " " + p.Command}, nil)
}

func (lookAgent) ReadService(_ Client, p *acp.ReadServiceRequest, reply Reply) {
	reply(&acp.ReadServiceResponse{TerminalID: p.SessionID + " " + p.Name + " " + p.TerminalID, Offset: p.Offset, Next: int64(p.Lines)}, nil)
}

// _shellagent/session/look and _shellagent/service/read reach an Agent
// that serves them, with their params checked; an Agent that does not
// serve them has no such methods.
func TestLookSessionMethod(t *testing.T) {
	t.Parallel()
	w := newWireFor(t, lookAgent{}, 2)
	for _, tt := range []struct{ method, params, result, problem string }{
		{acp.MethodLookSession, `{"sessionId":"s","command":"/ps"}`, `{"text":"s /ps"}`, ""},
		{acp.MethodLookSession, `{"command":"/ps"}`, "", "sessionId"},
		{acp.MethodLookSession, `{"sessionId":"s"}`, "", "command"},
		{acp.MethodLookSession, `{"sessionId":"s","command":""}`, "", "command"},
		{acp.MethodLookSession, `{"sessionId":"s","command":" \t"}`, "", "command"},
		{acp.MethodReadService, `{"sessionId":"s","name":"api","lines":50}`, `{"terminalId":"s api ","offset":0,"next":50,"data":""}`, ""},
		{acp.MethodReadService, `{"sessionId":"s","name":"api","terminalId":"term_2","offset":7}`, `{"terminalId":"s api term_2","offset":7,"next":0,"data":""}`, ""},
		{acp.MethodReadService, `{"name":"api"}`, "", "sessionId"},
		{acp.MethodReadService, `{"sessionId":"s"}`, "", "name"},
		{acp.MethodReadService, `{"sessionId":"s","name":"api","terminalId":"term_2","offset":-1}`, "", "offset"},
		{acp.MethodReadService, `{"sessionId":"s","name":"api","offset":5}`, "", "offset"},
		{acp.MethodReadService, `{"sessionId":"s","name":"api","lines":1001}`, "", "lines"},
		{acp.MethodReadService, `{"sessionId":"s","name":"api","lines":-1}`, "", "lines"},
		{acp.MethodReadService, `{"sessionId":"s","name":"api","terminalId":"term_2","lines":5}`, "", "lines"},
		{acp.MethodReadService, `{"sessionId":"s","name":"api","offset":"5"}`, "", ""},
	} {
		w.send(`{"jsonrpc":"2.0","id":1,"method":"` + tt.method + `","params":` + tt.params + `}`)
		m := w.recv()
		switch {
		case tt.problem == "" && tt.result == "" && errorCode(m) != acp.CodeInvalidParams:
			t.Errorf("%s %s answered %v, want -32602", tt.method, tt.params, m)
		case tt.problem == "" && tt.result != "" && string(m["result"]) != tt.result:
			t.Errorf("%s %s answered %v, want the result %s", tt.method, tt.params, m, tt.result)
		case tt.problem != "" && (errorCode(m) != acp.CodeInvalidParams || !strings.Contains(string(m["error"]), tt.problem)):
			t.Errorf("%s %s answered %v, want -32602 naming %s", tt.method, tt.params, m, tt.problem)
		}
	}

	w = newWire(t)
	for _, req := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"_shellagent/session/look","params":{"sessionId":"s","command":"/ps"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"_shellagent/service/read","params":{"sessionId":"s","name":"api"}}`,
	} {
		w.send(req)
		if m := w.recv(); errorCode(m) != acp.CodeMethodNotFound {
			t.Errorf("an agent without SessionLooker answered %s with %v", req, m)
		}
	}
}

func TestRequestIDsComeBackAsSent(t *testing.T) {
	t.Parallel()
	w := newWire(t)
	for _, id := range []string{`-5`, `-9223372036854775808`, `9223372036854775807`, `0`, `"-5"`, `"x"`, `1.0`, `1e2`, `1E+2`, `-2.50e1`, `100e-2`, `-0`, `0.0e5`} {
		w.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"session/list","params":{}}`)
		m := w.recv()
		if string(m["id"]) != id || m["result"] == nil {
			t.Errorf("id %s: answered %v", id, m)
		}
	}
}

func TestANegativeIDCanBeWithdrawn(t *testing.T) {
	t.Parallel()
	w := newWire(t)
	w.send(`{"jsonrpc":"2.0","id":-3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"x"}]}}`)
	w.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":-3}}`)
	m := w.recv()
	if string(m["id"]) != "-3" || errorCode(m) != acp.CodeRequestCancelled {
		t.Errorf("withdrawn prompt answered %v", m)
	}
}

// An id is the same number however it is written: a prompt sent as 7.0
// is withdrawn by 7 or 70e-1.
func TestAnIntegerValuedIDCanBeWithdrawn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ id, cancel string }{{`7.0`, `7`}, {`7`, `70e-1`}, {`-2e0`, `-2`}, {`1e2`, `1e2`}} {
		w := newWire(t)
		w.send(`{"jsonrpc":"2.0","id":` + tt.id + `,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"x"}]}}`)
		w.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + tt.cancel + `}}`)
		m := w.recv()
		if string(m["id"]) != tt.id || errorCode(m) != acp.CodeRequestCancelled {
			t.Errorf("prompt %s withdrawn as %s: answered %v", tt.id, tt.cancel, m)
		}
	}
}

// A second request under the id of one that awaits its answer (here
// written another way) is refused at once and changes nothing: the first
// is still withdrawn by that id, and answered once.
func TestAnIDInFlightIsNotTakenTwice(t *testing.T) {
	t.Parallel()
	w := newWire(t)
	prompt := `"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"x"}]}}`
	w.send(`{"jsonrpc":"2.0","id":7,` + prompt)
	w.send(`{"jsonrpc":"2.0","id":7.0,` + prompt)
	m := w.recv()
	if string(m["id"]) != "7.0" || errorCode(m) != acp.CodeInvalidRequest || !strings.Contains(string(m["error"]), "awaits its answer") {
		t.Errorf("the second request under id 7 answered %v, want -32600", m)
	}
	w.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":7}}`)
	if m := w.recv(); string(m["id"]) != "7" || errorCode(m) != acp.CodeRequestCancelled {
		t.Errorf("the withdrawn first request answered %v", m)
	}
	w.send(`{"jsonrpc":"2.0","id":8,"method":"session/list","params":{}}`)
	if m := w.recv(); string(m["id"]) != "8" || m["result"] == nil {
		t.Errorf("the next request answered %v; want its result, nothing before it", m)
	}
}

func TestAMethodThatIsNotAStringIsAnsweredWithTheID(t *testing.T) {
	t.Parallel()
	w := newWire(t)
	w.send(`{"jsonrpc":"2.0","id":12,"method":42}`)
	m := w.recv()
	if string(m["id"]) != "12" || errorCode(m) != acp.CodeInvalidRequest {
		t.Errorf("answered %v", m)
	}
}

func TestPromptBlocksTheSchemaForbidsAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		block string
		field string // "" when the block is valid
	}{
		{`{"type":"text","text":"ls"}`, ""},
		{`{"type":"text","text":"ls","annotations":null,"_meta":{"k":1}}`, ""},
		{`{"type":"text","text":"ls","annotations":{"audience":["user"],"priority":0.5,"lastModified":"2025-01-12T15:00:58Z"}}`, ""},
		{`{"type":"resource_link","name":"a","uri":"file:///a","size":3,"icons":[{"src":"https://x/i.png","sizes":["48x48"]}]}`, ""},
		{`{"type":"image","data":"AA==","mimeType":"image/png"}`, ""},
		{`{"type":"resource","resource":{"uri":"file:///a","blob":"AA=="}}`, ""},
		{`{"type":"_custom","anything":[1,2]}`, ""},
		{`{"type":"text"}`, "prompt[0].text: required"},
		{`{"type":"text","text":5}`, "prompt[0].text: must be a string"},
		{`{"type":"text","text":"ls","annotations":5}`, "prompt[0].annotations: must be an object or null"},
		{`{"type":"text","text":"ls","annotations":{"priority":2}}`, "prompt[0].annotations.priority: must be from 0 to 1"},
		{`{"type":"text","text":"ls","annotations":{"audience":[1]}}`, "prompt[0].annotations.audience[0]: must be a string"},
		{`{"type":"text","text":"ls","_meta":[]}`, "prompt[0]._meta: must be an object or null"},
		{`{"type":"resource_link","uri":"file:///a"}`, "prompt[0].name: required"},
		{`{"type":"resource_link","name":"a"}`, "prompt[0].uri: required"},
		{`{"type":"resource_link","name":"a","uri":"file:///a","size":3.0}`, ""},
		{`{"type":"resource_link","name":"a","uri":"file:///a","size":18446744073709551615}`, ""},
		{`{"type":"resource_link","name":"a","uri":"file:///a","size":-1}`, "prompt[0].size: expected an integer from 0 to 18446744073709551615, got -1"},
		{`{"type":"resource_link","name":"a","uri":"file:///a","size":1.5}`, "prompt[0].size: expected an integer from 0 to 18446744073709551615, got 1.5"},
		{`{"type":"resource_link","name":"a","uri":"file:///a","size":18446744073709551616}`, "prompt[0].size: expected an integer from 0 to 18446744073709551615, got 18446744073709551616"},
		{`{"type":"resource_link","name":"a","uri":"file:///a","size":"3"}`, "prompt[0].size: must be an integer or null"},
		{`{"type":"resource_link","name":"a","uri":"file:///a","icons":[{}]}`, "prompt[0].icons[0].src: required"},
		{`{"type":"image","data":"AA=="}`, "prompt[0].mimeType: required"},
		{`{"type":"resource","resource":{"uri":"file:///a"}}`, "prompt[0].resource.text: required"},
		{`{"type":"resource","resource":{"text":"x"}}`, "prompt[0].resource.uri: required"},
		{`{"text":"ls"}`, "prompt[0].type: required"},
		{`{"type":7}`, "prompt[0].type: must be a string"},
		{`"ls"`, "prompt[0]: must be a content block object"},
	}
	for _, tt := range tests {
		var p acp.PromptRequest
		if err := decodeParams(new(json.RawMessage(`{"sessionId":"s","prompt":[`+tt.block+`]}`)), &p); err != nil {
			t.Errorf("%s: decode: %v", tt.block, err)
			continue
		}
		err := p.Validate()
		var e *acp.Error
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: refused: %v", tt.block, err)
		case tt.field == "":
		case !errors.As(err, &e) || e.Code != acp.CodeInvalidParams || !strings.HasPrefix(e.Message, tt.field):
			t.Errorf("%s: got %v, want -32602 %q", tt.block, err, tt.field)
		}
	}
}

func TestAnInvalidBlockNeverReachesTheAgent(t *testing.T) {
	t.Parallel()
	w := newWire(t)
	// The stub's Prompt would answer only when withdrawn: an answer now is
	// the connection's own refusal.
	w.send(`{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"ls"},{"type":"resource_link","uri":"file:///a"}]}}`)
	m := w.recv()
	var e struct {
		Message string `json:"message"`
	}
	json.Unmarshal(m["error"], &e)
	if string(m["id"]) != "9" || errorCode(m) != acp.CodeInvalidParams || !strings.HasPrefix(e.Message, "prompt[1].name: required") {
		t.Errorf("answered %v", m)
	}
}
