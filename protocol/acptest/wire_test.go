package acptest

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestWireViolations feeds lines that break the wire contract and checks
// that each is reported as exactly one violation naming the problem.
func TestWireViolations(t *testing.T) {
	tests := []struct {
		name  string
		sends []string // methods the client sends first (ids 1, 2, ...)
		line  string
		want  []string // substrings of the single expected report; none: valid
	}{
		{name: "valid state_update", line: update("s", `{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn","background":[]}`)},
		{name: "state 42", line: update("s", `{"sessionUpdate":"state_update","state":42,"background":[]}`),
			want: []string{"UpdateSessionNotification", "/update/state", "got number, want string"}},
		{name: "bad background item", line: update("s", `{"sessionUpdate":"state_update","state":"idle","background":[{"type":"terminal"}]}`),
			want: []string{"UpdateSessionNotification", "terminalId"}},
		{name: "chunk without data", line: update("s", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1"}`),
			want: []string{"terminal_output_chunk", "missing property 'data'"}},
		{name: "chunk with bad base64", line: update("s", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"!!!"}`),
			want: []string{"term_1", "not valid base64"}},
		{name: "snapshot with bad base64", line: update("s", `{"sessionUpdate":"terminal_update","terminalId":"term_1","output":{"data":"a"}}`),
			want: []string{"term_1", "output.data is not valid base64"}},
		{name: "exit code not an integer", line: update("s", `{"sessionUpdate":"terminal_update","terminalId":"t","exitStatus":{"exitCode":"0"},"capabilities":null}`),
			want: []string{"/update/exitStatus/exitCode"}},
		{name: "update without sessionId", line: `{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"state_update","state":"idle","background":[]}}}`,
			want: []string{"missing property 'sessionId'"}},
		{name: "prompt response without messageId", sends: []string{"session/prompt"}, line: `{"jsonrpc":"2.0","id":1,"result":{}}`,
			want: []string{"session/prompt response", "PromptResponse", "missing property 'messageId'"}},
		{name: "valid prompt response", sends: []string{"session/prompt"}, line: `{"jsonrpc":"2.0","id":1,"result":{"messageId":"m1"}}`},
		{name: "initialize response without info", sends: []string{"initialize"}, line: `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":2}}`,
			want: []string{"InitializeResponse", "missing property 'info'"}},
		{name: "new session response without id", sends: []string{"session/new"}, line: `{"jsonrpc":"2.0","id":1,"result":{}}`,
			want: []string{"NewSessionResponse", "sessionId"}},
		{name: "result of an unknown method", sends: []string{"_x/anything"}, line: `{"jsonrpc":"2.0","id":1,"result":{"any":1}}`},
		{name: "error with a string code", sends: []string{"session/new"}, line: `{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}`,
			want: []string{"#/$defs/Error", "/code"}},
		{name: "error without message", sends: []string{"session/new"}, line: `{"jsonrpc":"2.0","id":1,"error":{"code":-32602}}`,
			want: []string{"#/$defs/Error", "missing property 'message'"}},
		{name: "valid error", sends: []string{"session/new"}, line: `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"cwd: must be absolute"}}`},
		{name: "response to an unsent id", line: `{"jsonrpc":"2.0","id":7,"result":{}}`, want: []string{"id 7", "never sent"}},
		{name: "response to a string id", sends: []string{"session/close"}, line: `{"jsonrpc":"2.0","id":"1","result":{}}`, want: []string{`id "1"`, "never sent"}},
		{name: "parse error with id null", line: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
		{name: "invalid request with id null", line: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"too long"}}`},
		{name: "other error with id null", line: `{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"x"}}`, want: []string{"id null"}},
		{name: "result with id null", line: `{"jsonrpc":"2.0","id":null,"result":{}}`, want: []string{"id null"}},
		{name: "result and error", sends: []string{"session/close"}, line: `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`,
			want: []string{"both result and error"}},
		{name: "neither result nor error", sends: []string{"session/close"}, line: `{"jsonrpc":"2.0","id":1}`, want: []string{"neither result nor error"}},
		{name: "blank line", line: ``, want: []string{"blank line"}},
		{name: "spaces", line: `   `, want: []string{"blank line"}},
		{name: "not JSON", line: `hello`, want: []string{"not a JSON value"}},
		{name: "two objects", line: `{"jsonrpc":"2.0","method":"$/x"}{}`, want: []string{"not a JSON value"}},
		{name: "array", line: `[1,2]`, want: []string{"not a JSON object"}},
		{name: "wrong jsonrpc", line: `{"jsonrpc":"1.0","method":"session/update","params":{}}`, want: []string{`"jsonrpc" must be "2.0", got "1.0"`}},
		{name: "missing jsonrpc", line: `{"method":"$/cancel_request","params":{"requestId":1}}`, want: []string{`"jsonrpc" must be "2.0", got nothing`}},
		{name: "method not a string", line: `{"jsonrpc":"2.0","method":5}`, want: []string{`"method" must be a non-empty string`}},
		{name: "unexpected notification", line: `{"jsonrpc":"2.0","method":"session/whatever","params":{}}`, want: []string{`unexpected notification "session/whatever"`}},
		{name: "protocol notification", line: `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`},
		{name: "bad protocol notification", line: `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":null}}`, want: []string{"CancelRequestNotification", "/requestId"}},
		{name: "other protocol notification", line: `{"jsonrpc":"2.0","method":"$/progress","params":{"anything":1}}`},
		{name: "unexpected request", line: `{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{}}`, want: []string{`unexpected request "fs/read_text_file"`}},
		{name: "permission request", line: `{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s","title":"Run rm?","options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}`},
		{name: "permission request without options", line: `{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s","title":"Run rm?"}}`,
			want: []string{"RequestPermissionRequest", "missing property 'options'"}},
		{name: "permission request with a member of its own", line: `{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s","title":"Run rm?","toolCall":{},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}`,
			want: []string{`params has a member its definition does not declare: "toolCall"`}},
		{name: "request with id null", line: `{"jsonrpc":"2.0","id":null,"method":"session/request_permission","params":{"sessionId":"s","title":"t","options":[{"optionId":"a","name":"A","kind":"allow_once"}]}}`,
			want: []string{"request id must be an integer or a string, got null"}},
		{name: "request with a fractional id", line: `{"jsonrpc":"2.0","id":1.5,"method":"session/request_permission","params":{"sessionId":"s","title":"t","options":[{"optionId":"a","name":"A","kind":"allow_once"}]}}`,
			want: []string{"got 1.5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			for _, m := range tt.sends {
				h.c.Send(m, map[string]any{"sessionId": "s"})
			}
			h.agent(tt.line)
			h.end()
			errs := h.rec.Errors()
			if len(tt.want) == 0 {
				if len(errs) != 0 {
					t.Fatalf("valid line reported: %q", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("got %d reports, want 1: %q", len(errs), errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs[0], w) {
					t.Errorf("report %q does not contain %q", errs[0], w)
				}
			}
			if vs := h.c.Violations(); len(vs) == 0 || vs[0].Rule != Wire || vs[0].Seq != 0 || len(vs) > 1 && vs[1].Rule == Wire {
				t.Errorf("Violations() = %v, want one wire violation at #0", vs)
			}
		})
	}
}

func TestUnterminatedLastLine(t *testing.T) {
	h := newHarness(t)
	if _, err := h.agentW.Write([]byte(update("s", `{"sessionUpdate":"state_update","state":"idle","background":[]}`))); err != nil {
		t.Fatal(err)
	}
	h.end()
	if errs := h.errorsContaining("not terminated by a newline"); len(errs) != 1 || len(h.rec.Errors()) != 1 {
		t.Fatalf("errors = %q", h.rec.Errors())
	}
	if got := len(h.c.Transcript()); got != 1 {
		t.Fatalf("transcript has %d messages, want 1", got)
	}
}

func TestSecondResponse(t *testing.T) {
	h := newHarness(t)
	id := h.c.Send("session/close", map[string]any{"sessionId": "s"})
	h.agent(`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	if m := h.c.Wait(id); m.Seq != 0 || m.ReqMethod != "session/close" {
		t.Errorf("Wait returned %v", m)
	}
	h.end()
	if errs := h.errorsContaining("second response to request 1"); len(errs) != 1 || len(h.rec.Errors()) != 1 {
		t.Fatalf("errors = %q", h.rec.Errors())
	}
}

func TestDecodedFields(t *testing.T) {
	h := newHarness(t)
	h.agent(
		update("s1", `{"sessionUpdate":"terminal_update","terminalId":"term_1","exitStatus":{"exitCode":2,"signal":null},"capabilities":null}`),
		update("s1", `{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn","background":[{"type":"terminal","terminalId":"term_1"},{"type":"tool_call","toolCallId":"call_2"}]}`),
		update("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"call_2","status":"in_progress","content":[{"type":"content","content":{"type":"text","text":"hi"}}]}`),
		update("s1", `{"sessionUpdate":"agent_message","messageId":"a1","content":[{"type":"text","text":"one "},{"type":"text","text":"two"}]}`),
		update("s1", `{"sessionUpdate":"state_update","state":"running"}`),
		`{"jsonrpc":"2.0","id":"x","method":"session/request_permission","params":{"sessionId":"s1","title":"t","options":[]}}`,
	)
	h.end()
	ms := h.c.Transcript()
	if es := ms[0].ExitStatus(); ms[0].Kind != "terminal_update" || ms[0].SessionID != "s1" || ms[0].TerminalID() != "term_1" || es["exitCode"] != float64(2) {
		t.Errorf("terminal_update decoded as %+v", ms[0])
	}
	if !ms[0].HasKey("capabilities") || ms[0].HasKey("output") {
		t.Errorf("HasKey is wrong")
	}
	bg := ms[1].Background()
	if ms[1].State() != "idle" || ms[1].StopReason() != "end_turn" || len(bg) != 2 ||
		bg[0] != (Item{"terminal", "term_1"}) || bg[1] != (Item{"tool_call", "call_2"}) {
		t.Errorf("state_update decoded as %q %q %v", ms[1].State(), ms[1].StopReason(), bg)
	}
	if ms[2].ToolCallID() != "call_2" || ms[2].Status() != "in_progress" || ms[2].Text() != "hi" {
		t.Errorf("tool_call_update decoded as %q %q %q", ms[2].ToolCallID(), ms[2].Status(), ms[2].Text())
	}
	if ms[3].Text() != "one two" || ms[3].MessageID() != "a1" {
		t.Errorf("agent_message Text = %q", ms[3].Text())
	}
	if bg := ms[4].Background(); bg != nil {
		t.Errorf("omitted background decoded as %v, want nil", bg)
	}
	if !ms[5].IsRequest() || ms[5].SessionID != "s1" || string(ms[5].ID) != `"x"` {
		t.Errorf("request decoded as %+v", ms[5])
	}
	if got := len(h.c.Updates("s1")); got != 5 {
		t.Errorf("Updates = %d, want 5", got)
	}
}

func TestParamsShareTheLine(t *testing.T) {
	h := newHarness(t)
	h.agent(`{"jsonrpc":"2.0", "method" : "session/update" ,"params":  {"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle","background":[]}} }`)
	h.end()
	m := h.c.Transcript()[0]
	if want := `{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle","background":[]}}`; string(m.Params) != want {
		t.Errorf("Params = %s, want %s", m.Params, want)
	}
	if len(h.rec.Errors()) != 0 {
		t.Errorf("errors: %q", h.rec.Errors())
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
