package acp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The params of the terminal input methods: each malformed field is
// refused with -32602 naming it; good params decode.
func TestTerminalInputParams(t *testing.T) {
	tests := []struct {
		method, params string
		field          string // "" when valid
	}{
		{MethodWriteTerminal, `{"sessionId":"s","terminalId":"term_1","data":"aGk="}`, ""},
		{MethodWriteTerminal, `{"terminalId":"term_1","data":"aGk="}`, "sessionId: required"},
		{MethodWriteTerminal, `{"sessionId":"s","data":"aGk="}`, "terminalId: required"},
		{MethodWriteTerminal, `{"sessionId":"s","terminalId":"term_1"}`, "data: required"},
		{MethodWriteTerminal, `{"sessionId":"s","terminalId":"term_1","data":"hi!"}`, "data: must be base64"},
		{MethodWriteTerminal, `{"sessionId":"s","terminalId":"term_1","data":"` + strings.Repeat("A", 4*(MaxWrite/3+1)) + `"}`, "data: 65538 bytes; at most 65536"},
		{MethodResizeTerminal, `{"sessionId":"s","terminalId":"term_1","size":{"cols":200,"rows":50}}`, ""},
		{MethodResizeTerminal, `{"sessionId":"s","terminalId":"term_1"}`, "size: required"},
		{MethodResizeTerminal, `{"sessionId":"s","terminalId":"term_1","size":{"rows":50}}`, "size.cols: expected an integer from 1 to 10000, got 0"},
		{MethodResizeTerminal, `{"sessionId":"s","terminalId":"term_1","size":{"cols":80,"rows":-1}}`, "size.rows: expected an integer from 1 to 10000, got -1"},
		{MethodResizeTerminal, `{"sessionId":"s","terminalId":"term_1","size":{"cols":10001,"rows":1}}`, "size.cols: expected an integer from 1 to 10000, got 10001"},
		{MethodResizeTerminal, `{"sessionId":"s","size":{"cols":80,"rows":24}}`, "terminalId: required"},
	}
	for _, tt := range tests {
		var p interface{ Validate() error }
		switch tt.method {
		case MethodWriteTerminal:
			p = &WriteTerminalRequest{}
		case MethodResizeTerminal:
			p = &ResizeTerminalRequest{}
		}
		if err := json.Unmarshal([]byte(tt.params), p); err != nil {
			t.Fatalf("%s: %v", tt.params, err)
		}
		err := p.Validate()
		var e *Error
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s %.80s: refused: %v", tt.method, tt.params, err)
		case tt.field == "":
		case !errors.As(err, &e) || e.Code != CodeInvalidParams || !strings.HasPrefix(e.Message, tt.field):
			t.Errorf("%s %.80s: got %v, want -32602 %q", tt.method, tt.params, err, tt.field)
		}
	}
	p := &WriteTerminalRequest{SessionID: "s", TerminalID: "t", Data: "aGk="}
	if err := p.Validate(); err != nil || string(p.Bytes()) != "hi" {
		t.Errorf("Bytes() = %q, %v; want \"hi\"", p.Bytes(), err)
	}
}
