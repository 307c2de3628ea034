package jsonrpcline

import (
	"encoding/json"
	"testing"

	"shellagent/acp"
)

func TestIntID(t *testing.T) {
	for _, tt := range []struct {
		raw string
		v   int64
		ok  bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"0.000", 0, true}, {"0e7", 0, true},
		{"12", 12, true}, {"12.0", 12, true}, {"1.2e1", 12, true}, {"120e-1", 12, true}, {"1200E-2", 12, true},
		{"-12.00", -12, true}, {"9.223372036854775807e18", 9223372036854775807, true},
		{"-9223372036854775808.0", -9223372036854775808, true},
		{"9223372036854775808.0", 0, false}, {"1.5", 0, false}, {"12e-2", 0, false}, {"1e20", 0, false}, {"1e9223372036854775807", 0, false}, {"1.5e-9223372036854775808", 0, false},
		{"1e401", 0, false}, {"0.1e1", 1, true},
	} {
		v, ok := IntID([]byte(tt.raw))
		if v != tt.v || ok != tt.ok {
			t.Errorf("IntID(%s) = %d, %v; want %d, %v", tt.raw, v, ok, tt.v, tt.ok)
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		line string
		code int64  // 0: accepted
		id   string // id of the error response, or of the message accepted
		kind Kind   // of the message accepted
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize"}`, 0, "1", Request},
		{`{"jsonrpc":"2.0","id":"a","method":"x","params":{}}`, 0, `"a"`, Request},
		{`{"jsonrpc":"2.0","method":"session/cancel"}`, 0, "", Notification},
		{`{"jsonrpc":"2.0","id":3,"result":{}}`, 0, "3", Response},
		{`{"jsonrpc":"2.0","id":3,"result":null}`, 0, "3", Response},
		{`{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"m"}}`, 0, "3", Error},
		{`{"jsonrpc":"2.0","id":1,"method":`, acp.CodeParseError, "null", 0},
		{`{"jsonrpc":"2.0","id":1,"method":"x"}}`, acp.CodeParseError, "null", 0},
		{`not json`, acp.CodeParseError, "null", 0},
		{`[{"jsonrpc":"2.0","id":1,"method":"x"}]`, acp.CodeInvalidRequest, "null", 0},
		{`[{"jsonrpc":"2.0","id":1,"method":"x"}`, acp.CodeParseError, "null", 0},
		{`"a string"`, acp.CodeInvalidRequest, "null", 0},
		{`{"id":1,"method":"x"}`, acp.CodeInvalidRequest, "1", 0},
		{`{"jsonrpc":"1.0","id":"q","method":"x"}`, acp.CodeInvalidRequest, `"q"`, 0},
		{`{"jsonrpc":2,"id":"q","method":"x"}`, acp.CodeInvalidRequest, `"q"`, 0},
		{`{"jsonrpC":"2.0","iD":0,"method":""}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","iD":0,"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":1,"method":"x","iD":2}`, acp.CodeInvalidRequest, "1", 0},
		{`{"jsonrpc":"2.0","id":4,"Method":"x"}`, acp.CodeInvalidRequest, "4", 0},
		{`{"jsonrpc":"2.0","id":4,"method":"x","Params":{}}`, acp.CodeInvalidRequest, "4", 0},
		{`{"jsonrpc":"2.0","id":5,"RESULT":{}}`, acp.CodeInvalidRequest, "5", 0},
		{`{"jsonrpc":"2.0","id":5,"result":{},"Error":null}`, 0, "5", Stray},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`, 0, "", Stray},
		{`{"jsonrpc":"2.0","id":1.5,"result":{}}`, 0, "", Stray},
		{`{"jsonrpc":"1.0","id":3,"result":{}}`, 0, "3", Stray},
		{`{"id":3,"error":{"code":1,"message":"m"}}`, 0, "3", Stray},
		{`{"jsonrpc":"2.0","id":null,"method":"x","error":{}}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":6,"method":"x","Meta":{},"_meta":{}}`, 0, "6", Request},
		{`{"jsonrpc":"2.0","id":null,"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":-1,"method":"x"}`, 0, "-1", Request},
		{`{"jsonrpc":"2.0","id":-0,"method":"x"}`, 0, "-0", Request},
		{`{"jsonrpc":"2.0","id":9223372036854775807,"method":"x"}`, 0, "9223372036854775807", Request},
		{`{"jsonrpc":"2.0","id":-9223372036854775808,"method":"x"}`, 0, "-9223372036854775808", Request},
		{`{"jsonrpc":"2.0","id":9223372036854775808,"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":"\u0000shellagent-id:-1","method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":1.5,"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":1.0,"method":"x"}`, 0, "1.0", Request},
		{`{"jsonrpc":"2.0","id":1e2,"method":"x"}`, 0, "1e2", Request},
		{`{"jsonrpc":"2.0","id":-92233720368547758.08e2,"method":"x"}`, 0, "-92233720368547758.08e2", Request},
		{`{"jsonrpc":"2.0","id":9223372036854775808.0,"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":1e19,"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":1e9223372036854775807,"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":1.25e1,"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":1e-1,"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":1e999999999999,"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":{},"method":"x"}`, acp.CodeInvalidRequest, "null", 0},
		{`{"jsonrpc":"2.0","id":7}`, acp.CodeInvalidRequest, "7", 0},
		{`{"jsonrpc":"2.0","id":7,"method":5}`, acp.CodeInvalidRequest, "7", 0},
		{`{"jsonrpc":"2.0","id":-7,"method":null}`, acp.CodeInvalidRequest, "-7", 0},
		{`{"jsonrpc":"2.0","id":"m","method":{}}`, acp.CodeInvalidRequest, `"m"`, 0},
	}
	for _, tt := range tests {
		env, resp := Check([]byte(tt.line))
		if tt.code == 0 {
			if resp != nil {
				t.Errorf("%s: rejected with %s", tt.line, resp)
			}
			if env.Kind != tt.kind || string(env.ID) != tt.id {
				t.Errorf("%s: kind %d id %s, want kind %d id %s", tt.line, env.Kind, env.ID, tt.kind, tt.id)
			}
			continue
		}
		var got struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int64 `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(resp, &got); err != nil {
			t.Fatalf("%s: response %s: %v", tt.line, resp, err)
		}
		if got.Error.Code != tt.code || string(got.ID) != tt.id || env.Kind != Invalid {
			t.Errorf("%s: got %s kind %d, want code %d id %s", tt.line, resp, env.Kind, tt.code, tt.id)
		}
	}
}

// A member name of JSON-RPC spelt in another case is refused, with the id
// if the message has one by its exact name; the refusal names the first
// such member in byte order, so that it is the same on every run.
func TestCheckMiscased(t *testing.T) {
	_, resp := Check([]byte(`{"jsonrpc":"2.0","id":"q","Method":"x","ID":1}`))
	want := `{"jsonrpc":"2.0","id":"q","error":{"code":-32600,"message":"\"ID\": member names are case-sensitive (JSON-RPC 2.0 has \"id\")"}}`
	if string(resp) != want {
		t.Errorf("refusal\n%s\nwant\n%s", resp, want)
	}
}

func TestErrorResponse(t *testing.T) {
	for _, tt := range []struct {
		id   json.RawMessage
		e    *acp.Error
		want string
	}{
		{nil, &acp.Error{Code: -32700, Message: "m"}, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`},
		{json.RawMessage("1e2"), &acp.Error{Code: -32603, Message: "m", Data: map[string]string{"k": "v"}}, `{"jsonrpc":"2.0","id":1e2,"error":{"code":-32603,"message":"m","data":{"k":"v"}}}`},
	} {
		if got := ErrorResponse(tt.id, tt.e); string(got) != tt.want {
			t.Errorf("ErrorResponse(%s) = %s, want %s", tt.id, got, tt.want)
		}
	}
}
