package acptest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ACP v1 transcript builders, for session s1.

// v1Init is the initialize a v1 client sends, advertising terminal output
// or not.
func v1Init(meta bool) map[string]any {
	caps := map[string]any{}
	if meta {
		caps["_meta"] = map[string]any{"terminal_output": true}
	}
	return map[string]any{"protocolVersion": 1, "clientCapabilities": caps}
}

// v1Initialized is the answer to initialize request id in v1.
func v1Initialized(id int) string {
	return result(id, `{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}`)
}

// v2Initialized is the answer to initialize request id in v2.
func v2Initialized(id int) string {
	return result(id, `{"protocolVersion":2,"info":{"name":"a","version":"1"},"capabilities":{}}`)
}

// v1Tool is a tool_call or tool_call_update of s1 with extra members.
func v1Tool(kind, id, extra string) string {
	return update("s1", fmt.Sprintf(`{"sessionUpdate":%q,"toolCallId":%q%s}`, kind, id, extra))
}

// v1Info is the terminal_info _meta member.
func v1Info(term string) string {
	return fmt.Sprintf(`,"content":[{"type":"terminal","terminalId":%q}],"_meta":{"terminal_info":{"terminal_id":%q,"cwd":"/"}}`, term, term)
}

// v1Out is a terminal_output update.
func v1Out(call, term, data string) string {
	return v1Tool("tool_call_update", call, fmt.Sprintf(`,"_meta":{"terminal_output":{"terminal_id":%q,"data":%q}}`, term, data))
}

// v1Exit is a terminal_exit update with the given exit_code and signal JSON.
func v1Exit(call, term, code, signal string) string {
	return v1Tool("tool_call_update", call, fmt.Sprintf(`,"_meta":{"terminal_exit":{"terminal_id":%q,"exit_code":%s,"signal":%s}}`, term, code, signal))
}

func TestCheckV1(t *testing.T) {
	tests := []struct {
		name   string
		meta   bool
		script []string
		want   []int
	}{
		{"good with terminal output", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls","kind":"execute","status":"in_progress"`+v1Info("term_1")),
			v1Out("call_1", "term_1", "a\r\n"), v1Exit("call_1", "term_1", "0", "null"),
			v1Tool("tool_call_update", "call_1", `,"status":"completed"`),
		}, nil},
		{"12 output after exit", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls"`+v1Info("term_1")),
			v1Exit("call_1", "term_1", "0", "null"), v1Out("call_1", "term_1", "x"),
		}, []int{12}},
		{"good without terminal output", false, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls","status":"in_progress"`),
			v1Tool("tool_call_update", "call_1", `,"status":"completed","content":[{"type":"content","content":{"type":"text","text":"Output"}}]`),
		}, nil},
		{"tool call announced again", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls","status":"pending"`),
			v1Tool("tool_call", "call_1", `,"title":"ls","status":"in_progress"`+v1Info("term_1")),
			v1Out("call_1", "term_1", "x"),
		}, nil},
		{"11 update before tool_call", true, []string{v1Tool("tool_call_update", "call_1", `,"status":"completed"`)}, []int{11}},
		{"12 terminal content without the capability", false, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls","content":[{"type":"terminal","terminalId":"term_1"}]`),
		}, []int{12}},
		{"12 unknown terminal content", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls","content":[{"type":"terminal","terminalId":"term_1"}]`),
		}, []int{12}},
		{"12 terminal_info on an update", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls"`),
			v1Tool("tool_call_update", "call_1", v1Info("term_1")),
		}, []int{12, 12}},
		{"12 output before info", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls"`), v1Out("call_1", "term_1", "x"),
		}, []int{12}},
		{"12 output on another tool call", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls"`+v1Info("term_1")),
			v1Tool("tool_call", "call_2", `,"title":"ls"`), v1Out("call_2", "term_1", "x"),
		}, []int{12}},
		{"12 second exit", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls"`+v1Info("term_1")),
			v1Exit("call_1", "term_1", "null", `"SIGTERM"`), v1Exit("call_1", "term_1", "0", "null"),
		}, []int{12}},
		{"12 bad exit", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls"`+v1Info("term_1")),
			v1Exit("call_1", "term_1", "-1", "null"),
		}, []int{12}},
		{"session/load replays", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls","status":"in_progress"`+v1Info("term_1")),
			v1Out("call_1", "term_1", "a"), v1Exit("call_1", "term_1", "0", "null"),
			v1Tool("tool_call_update", "call_1", `,"status":"completed"`),
			"-> session/load s1",
			v1Tool("tool_call", "call_1", `,"title":"ls","status":"completed"`+v1Info("term_1")),
			v1Out("call_1", "term_1", "a"), v1Exit("call_1", "term_1", "0", "null"),
		}, nil},
		{"11 after session/load", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls","status":"in_progress"`),
			"-> session/load s1",
			v1Tool("tool_call_update", "call_1", `,"status":"completed"`),
		}, []int{11}},
		{"7 still applies", true, []string{
			v1Tool("tool_call", "call_1", `,"title":"ls","status":"completed"`),
			v1Tool("tool_call_update", "call_1", `,"status":"in_progress"`),
		}, []int{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, WithProtocolV1())
			h.c.Send("initialize", v1Init(tt.meta))
			h.agent(v1Initialized(1))
			for _, l := range tt.script {
				if l == "-> session/load s1" {
					h.c.Send("session/load", map[string]any{"sessionId": "s1", "cwd": "/", "mcpServers": []any{}})
					continue
				}
				h.agent(l)
			}
			h.end()
			if errs := h.rec.Errors(); len(errs) != 0 {
				t.Fatalf("wire violations: %q", errs)
			}
			if got := rules(h.c.Violations()); !slices.Equal(got, tt.want) {
				t.Fatalf("violated rules %v, want %v:\n%v", got, tt.want, h.c.Violations())
			}
		})
	}
}

func TestV1SchemaAndOutput(t *testing.T) {
	h := newHarness(t, WithProtocolV1())
	h.c.Send("initialize", v1Init(true))
	h.agent(
		v1Initialized(1),
		v1Tool("tool_call", "call_1", `,"title":"ls"`+v1Info("term_1")),
		v1Out("call_1", "term_1", "h\u00e9"), v1Out("call_1", "term_1", "llo"),
		// Not v1: a v2 update kind.
		update("s1", `{"sessionUpdate":"state_update","state":"idle","background":[]}`),
	)
	h.end()
	if got := string(h.c.Output("s1", "term_1")); got != "héllo" {
		t.Errorf("output %q", got)
	}
	if errs := h.errorsContaining("ACP v1", "state_update"); len(errs) == 0 && len(h.errorsContaining("SessionNotification")) == 0 {
		t.Errorf("a v2 update passed the v1 schema: %q", h.rec.Errors())
	}
	if n := len(h.rec.Errors()); n != 1 {
		t.Errorf("want exactly the one schema violation, got %q", strings.Join(h.rec.Errors(), "\n"))
	}
}

// A v1 permission request's toolCall is a ToolCallUpdate: a member that
// definition does not declare, such as a session update's sessionUpdate,
// is reported, though the schema lets it through.
func TestV1PermissionToolCallMembers(t *testing.T) {
	tests := []struct {
		toolCall string
		want     string // "": no report
	}{
		{`{"toolCallId":"call_1","title":"ls","kind":"execute","status":"pending","content":[],"rawInput":{"command":"ls"},"_meta":{}}`, ""},
		{`{"toolCallId":"call_1"}`, ""},
		{`{"sessionUpdate":"","toolCallId":"call_1","title":"ls"}`, `params.toolCall has a member its definition does not declare: "sessionUpdate"`},
		{`{"toolCallId":"call_1","terminalId":"term_1"}`, `params.toolCall has a member its definition does not declare: "terminalId"`},
	}
	for _, tt := range tests {
		h := newHarness(t, WithProtocolV1())
		h.agent(`{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s1","toolCall":` + tt.toolCall +
			`,"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}`)
		h.end()
		errs := h.rec.Errors()
		switch {
		case tt.want == "" && len(errs) != 0:
			t.Errorf("toolCall %s reported: %q", tt.toolCall, errs)
		case tt.want != "" && (len(errs) != 1 || !strings.Contains(errs[0], tt.want)):
			t.Errorf("toolCall %s reported %q, want one report of %q", tt.toolCall, errs, tt.want)
		}
	}
}

// The client speaks the version the latest successful initialize answered
// with, whatever it was made for: that answer and what follows are
// validated against that version's schema, and Check applies its rules
// with the capabilities of that initialize; a failed initialize changes
// nothing.
func TestVersionOfTheLatestInitialize(t *testing.T) {
	v1Update := v1Tool("tool_call", "call_1", `,"title":"ls"`+v1Info("term_1"))
	v2Update := state("idle", "")
	tests := []struct {
		name  string
		opts  []Option
		lines []string // "-> v1", "-> v1 meta", "-> v2": an initialize sent (ids 1, 2, ...)
		bad   string   // the one line reported, "" for none
		rules []int    // Violations: 0 for the wire's
	}{
		{"v2 then v1", nil, []string{"-> v2", v2Initialized(1), "-> v1 meta", v1Initialized(2), v1Update}, "", nil},
		{"v1 then v2", []Option{WithProtocolV1()}, []string{"-> v1 meta", v1Initialized(1), "-> v2", v2Initialized(2), v2Update}, "", nil},
		{"v2 then v1, a v2 update", nil, []string{"-> v2", v2Initialized(1), "-> v1 meta", v1Initialized(2), v2Update}, v2Update, []int{0}},
		{"a failed initialize", []Option{WithProtocolV1()}, []string{"-> v1 meta", v1Initialized(1), "-> v2",
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"no"}}`, v2Update}, v2Update, []int{0}},
		{"the latest capabilities", []Option{WithProtocolV1()}, []string{"-> v1 meta", v1Initialized(1), "-> v1", v1Initialized(2), v1Update}, "", []int{12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts...)
			for _, l := range tt.lines {
				switch l {
				case "-> v1", "-> v1 meta":
					h.c.Send("initialize", v1Init(l == "-> v1 meta"))
				case "-> v2":
					h.c.Send("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "c", "version": "1"}})
				default:
					h.agent(l)
				}
			}
			h.end()
			errs := h.rec.Errors()
			switch {
			case tt.bad == "" && len(errs) != 0:
				t.Errorf("reported %q", errs)
			case tt.bad != "" && (len(errs) != 1 || !strings.Contains(errs[0], tt.bad)):
				t.Errorf("reported %q, want one report of %s", errs, tt.bad)
			}
			if got := rules(h.c.Violations()); !slices.Equal(got, tt.rules) {
				t.Errorf("violated rules %v, want %v", got, tt.rules)
			}
		})
	}
}
