package protocol

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"shellagent/acp"
)

// intAgent serves the methods whose params have integer members and
// answers each with the integers it was given.
type intAgent struct{ stubAgent }

func (intAgent) Initialize(_ Client, p *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	return &acp.InitializeResponse{ProtocolVersion: int(*p.ProtocolVersion)}, nil
}
func (intAgent) WriteTerminal(_ Client, _ *acp.WriteTerminalRequest, reply Reply) {
	reply(struct{}{}, nil)
}
func (intAgent) ResizeTerminal(_ Client, p *acp.ResizeTerminalRequest, reply Reply) {
	reply(p.Size, nil)
}
func (intAgent) LookSession(_ Client, _ *acp.LookSessionRequest, reply Reply) {
	reply(struct{}{}, nil)
}
func (intAgent) ReadService(_ Client, p *acp.ReadServiceRequest, reply Reply) {
	reply(&acp.ReadServiceResponse{Offset: p.Offset, Next: int64(p.Lines)}, nil)
}

// Every integer member of a request takes an integer however it is
// written (2, 2.0, 20e-1), as JSON Schema's integer does, and refuses
// anything else with -32602 saying that an integer was expected and
// which: its range, from the schema (protocolVersion is a uint16) or from
// what shellagent takes (a terminal's side, service/read's lines).
// Content blocks' integers: TestPromptBlocksTheSchemaForbidsAreRefused.
func TestIntegerMembers(t *testing.T) {
	t.Parallel()
	const (
		resize = acp.MethodResizeTerminal
		read   = acp.MethodReadService
		term   = `"sessionId":"s","terminalId":"term_1",`
		svc    = `"sessionId":"s","name":"api",`
	)
	tests := []struct {
		method, params string
		want           string // the result, or the error's message
		code           int64  // the error's code, if not -32602
	}{
		{"initialize", `{"protocolVersion":2}`, initialized(2), 0},
		{"initialize", `{"protocolVersion":2.0}`, initialized(2), 0},
		{"initialize", `{"protocolVersion":20e-1}`, initialized(2), 0},
		{"initialize", `{"protocolVersion":3.00e0}`, initialized(3), 0},
		{"initialize", `{"protocolVersion": 2.0 ,"info":{"name":"x","version":"1"}}`, initialized(2), 0},
		{"initialize", `{"protocolVersion":65535}`, initialized(65535), 0},
		{"initialize", `{"protocolVersion":1e0}`, "protocolVersion: 1 is not supported; shellagent speaks 2", acp.CodeUnsupportedProto},
		{"initialize", `{"protocolVersion":1.5}`, "protocolVersion: expected an integer from 0 to 65535, got 1.5", 0},
		{"initialize", `{"protocolVersion":2.000001}`, "protocolVersion: expected an integer from 0 to 65535, got 2.000001", 0},
		{"initialize", `{"protocolVersion":65536}`, "protocolVersion: expected an integer from 0 to 65535, got 65536", 0},
		{"initialize", `{"protocolVersion":6.5536e4}`, "protocolVersion: expected an integer from 0 to 65535, got 6.5536e4", 0},
		{"initialize", `{"protocolVersion":-1}`, "protocolVersion: expected an integer from 0 to 65535, got -1", 0},
		{"initialize", `{"protocolVersion":9999999999999999999}`, "protocolVersion: expected an integer from 0 to 65535, got 9999999999999999999", 0},
		{"initialize", `{"protocolVersion":1e400}`, "protocolVersion: expected an integer from 0 to 65535, got 1e400", 0},
		{"initialize", `{"protocolVersion":1e9223372036854775807}`, "protocolVersion: expected an integer from 0 to 65535, got 1e9223372036854775807", 0},
		{"initialize", `{"protocolVersion":1.5e-9223372036854775808}`, "protocolVersion: expected an integer from 0 to 65535, got 1.5e-9223372036854775808", 0},
		{"initialize", `{"protocolVersion":"2"}`, "protocolVersion: expected an integer from 0 to 65535, got string", 0},
		{"initialize", `{"protocolVersion":[2]}`, "protocolVersion: expected an integer from 0 to 65535, got array", 0},
		{resize, `{` + term + `"size":{"cols":80,"rows":24}}`, `{"cols":80,"rows":24}`, 0},
		{resize, `{` + term + `"size":{"cols":80.0,"rows":2.4e1}}`, `{"cols":80,"rows":24}`, 0},
		{resize, `{` + term + `"size":{"cols":1E4,"rows":1}}`, `{"cols":10000,"rows":1}`, 0},
		{resize, `{` + term + `"size":{` + strings.Repeat(`"cols":1.0,`, 16) + `"rows":24}}`, `{"cols":1,"rows":24}`, 0},
		// The connection reads a repeated key once (the last): a
		// decode per repetition would take minutes. 10000, not 100000:
		// a 1.1 MB line took over 10 s under -race in a loaded CI.
		{resize, `{` + term + `"size":{` + strings.Repeat(`"cols":1.0,`, 10000) + `"rows":24}}`, `{"cols":1,"rows":24}`, 0},
		{resize, `{` + term + `"size":{"cols":80.5,"rows":24}}`, "size.cols: expected an integer from 1 to 10000, got 80.5", 0},
		{resize, `{` + term + `"size":{"cols":80,"rows":2.45e1}}`, "size.rows: expected an integer from 1 to 10000, got 2.45e1", 0},
		{resize, `{` + term + `"size":{"cols":0,"rows":24}}`, "size.cols: expected an integer from 1 to 10000, got 0", 0},
		{resize, `{` + term + `"size":{"cols":0.0,"rows":24}}`, "size.cols: expected an integer from 1 to 10000, got 0.0", 0},
		{resize, `{` + term + `"size":{"cols":80,"rows":10001}}`, "size.rows: expected an integer from 1 to 10000, got 10001", 0},
		{resize, `{` + term + `"size":{"cols":9999999999999999999,"rows":24}}`, "size.cols: expected an integer from 1 to 10000, got 9999999999999999999", 0},
		{resize, `{` + term + `"size":{"cols":"wide","rows":24}}`, "size.cols: expected an integer from 1 to 10000, got string", 0},
		{read, `{` + svc + `"lines":50}`, `{"terminalId":"","offset":0,"next":50,"data":""}`, 0},
		{read, `{` + svc + `"lines":5e1}`, `{"terminalId":"","offset":0,"next":50,"data":""}`, 0},
		{read, `{` + svc + `"terminalId":"term_2","offset":7.0}`, `{"terminalId":"","offset":7,"next":0,"data":""}`, 0},
		{read, `{` + svc + `"lines":1.5}`, "lines: expected an integer from 0 to 1000, got 1.5", 0},
		{read, `{` + svc + `"lines":1001}`, "lines: expected an integer from 0 to 1000, got 1001", 0},
		{read, `{` + svc + `"lines":-1}`, "lines: expected an integer from 0 to 1000, got -1", 0},
		{read, `{` + svc + `"terminalId":"term_2","offset":-1}`, "offset: expected an integer from 0 to 9223372036854775807, got -1", 0},
		{read, `{` + svc + `"terminalId":"term_2","offset":0.5}`, "offset: expected an integer from 0 to 9223372036854775807, got 0.5", 0},
		{read, `{` + svc + `"terminalId":"term_2","offset":1e19}`, "offset: expected an integer from 0 to 9223372036854775807, got 1e19", 0},
		{read, `{` + svc + `"offset":"5"}`, "offset: expected an integer from 0 to 9223372036854775807, got string", 0},
	}
	w := newWireFor(t, intAgent{}, 2)
	for i, tt := range tests {
		m, e := w.request(i+1, tt.method, tt.params)
		switch {
		case string(m["id"]) != fmt.Sprint(i+1):
			t.Errorf("%s %s: answered %v", tt.method, tt.params, m)
		case m["result"] != nil && string(m["result"]) != tt.want:
			t.Errorf("%s %s: answered %s, want %s", tt.method, tt.params, m["result"], tt.want)
		case m["result"] == nil && (errorCode(m) != cmp.Or(tt.code, acp.CodeInvalidParams) || e != tt.want):
			t.Errorf("%s %s: answered %s, want %d %q", tt.method, tt.params, m["error"], cmp.Or(tt.code, acp.CodeInvalidParams), tt.want)
		}
	}
}

// TestDecodeParamsRewritesFew: decodeParams decodes params again for
// each integer written with a fraction or an exponent, at most
// rewritesMost times; params with more are refused at once, however
// long (here by a key repeated, which the connection itself would have
// read once).
func TestDecodeParamsRewritesFew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    int
		want string // the error, "" for none
	}{
		{rewritesMost, ""},
		{rewritesMost + 1, "size.cols: more than 16 integers written with a fraction or an exponent; write them plainly (1)"},
		{100000, "size.cols: more than 16 integers written with a fraction or an exponent; write them plainly (1)"},
	}
	for _, tt := range tests {
		raw := json.RawMessage(`{"sessionId":"s","terminalId":"term_1","size":{` + strings.Repeat(`"cols":1.0,`, tt.n) + `"rows":24}}`)
		var p acp.ResizeTerminalRequest
		err := decodeParams(&raw, &p)
		switch {
		case tt.want == "" && (err != nil || p.Size == nil || p.Size.Cols != 1):
			t.Errorf("%d rewrites: %v, %+v; want cols 1", tt.n, err, p.Size)
		case tt.want != "" && (err == nil || err.Error() != tt.want+" (-32602)"):
			t.Errorf("%d rewrites: %v; want %q", tt.n, err, tt.want)
		}
	}
}

// initialized is intAgent's answer to initialize with protocolVersion v.
func initialized(v int) string {
	return fmt.Sprintf(`{"protocolVersion":%d,"info":{"name":"","version":""},"capabilities":{}}`, v)
}
