package jsonrpcline

import (
	"encoding/json"
	"fmt"
	"strings"

	"shellagent/acp"
)

// A Kind is what a message is by its envelope.
type Kind int

// The kinds of message. A message that Check refuses is Invalid.
const (
	Invalid      Kind = iota // refused by Check
	Request                  // a method and an id
	Notification             // a method and no id
	Response                 // an id and no method, without an error
	Error                    // an id and an error
	// Stray is a response (no method; a result or an error) that is not
	// a valid one: its id, its jsonrpc, a member's name or, for jsonrpc2,
	// its error. JSON-RPC answers requests only, so it gets no refusal:
	// the agent does not answer it (answering it would make a peer that
	// answers a bad line as the agent does answer the answer, forever),
	// and ends the request of its own it answers, if any, with an error.
	Stray
)

// An Envelope is what Check reads of a message: its kind, its id as the
// sender wrote it (nil if it has none, or none that can be carried
// back), and its method.
type Envelope struct {
	Kind   Kind
	ID     json.RawMessage
	Method string
}

// members are the member names of a JSON-RPC 2.0 message. Names are
// case-sensitive: encoding/json would take "iD" for "id" when it decodes
// into a struct, while jsonrpc2 reads "id" only, so a request the
// envelope says has an id would be served as a notification, and never
// answered (found by FuzzRequest). Check reads each member by its exact
// name and refuses another spelling of one.
var members = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// Check returns the envelope of line, a line without surrounding white
// space, and refusal: nil for a JSON-RPC 2.0 message the agent handles,
// or for a Stray response, which the agent drops unanswered, else the
// complete error response the agent answers the line with (not JSON:
// -32700; a batch, not an object, a bad jsonrpc, id or method, a member
// name spelt in another case: -32600). The line is decoded once.
func Check(line []byte) (env Envelope, refusal []byte) {
	if len(line) == 0 || line[0] != '{' {
		switch {
		case !json.Valid(line):
			return Envelope{}, refuse(nil, acp.CodeParseError, "parse error: not valid JSON")
		case line[0] == '[':
			return Envelope{}, refuse(nil, acp.CodeInvalidRequest, "batch requests are not supported")
		}
		return Envelope{}, refuse(nil, acp.CodeInvalidRequest, "a message must be a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		// A valid object always decodes into the map.
		return Envelope{}, refuse(nil, acp.CodeParseError, "parse error: not valid JSON")
	}
	id, method, odd := m["id"], m["method"], miscased(m)
	env.ID = ValidID(id)
	if method == nil && (m["result"] != nil || m["error"] != nil) && (id != nil && env.ID == nil || odd != "" || !isString(m["jsonrpc"], "2.0")) {
		return Envelope{Kind: Stray, ID: env.ID}, nil
	}
	switch {
	case id != nil && env.ID == nil:
		return Envelope{}, refuse(nil, acp.CodeInvalidRequest, "id: must be a string or an integer (int64)")
	case odd != "":
		return Envelope{ID: env.ID}, refuse(env.ID, acp.CodeInvalidRequest, fmt.Sprintf("%q: member names are case-sensitive (JSON-RPC 2.0 has %q)", odd, strings.ToLower(odd)))
	case !isString(m["jsonrpc"], "2.0"):
		return Envelope{ID: env.ID}, refuse(env.ID, acp.CodeInvalidRequest, `jsonrpc: must be "2.0"`)
	case method == nil && m["result"] == nil && m["error"] == nil:
		return Envelope{ID: env.ID}, refuse(env.ID, acp.CodeInvalidRequest, "method: required")
	case method != nil && method[0] != '"':
		return Envelope{ID: env.ID}, refuse(env.ID, acp.CodeInvalidRequest, "method: must be a string")
	}
	switch {
	case method != nil:
		_ = json.Unmarshal(method, &env.Method) // Safe: a valid JSON string.
		env.Kind = Notification
		if env.ID != nil {
			env.Kind = Request
		}
	case m["error"] != nil && string(m["error"]) != "null":
		env.Kind = Error
	default:
		env.Kind = Response
	}
	return env, nil
}

// miscased returns the first, in byte order, of m's member names that
// are one of members in another case, or "".
func miscased(m map[string]json.RawMessage) string {
	odd := ""
	for k := range m {
		for _, name := range members {
			if k != name && strings.EqualFold(k, name) && (odd == "" || k < odd) {
				odd = k
			}
		}
	}
	return odd
}

// isString reports whether raw is the JSON string s.
func isString(raw json.RawMessage, s string) bool {
	var v string
	return len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &v) == nil && v == s
}

// refuse is ErrorResponse with an error of code and msg.
func refuse(id json.RawMessage, code int64, msg string) []byte {
	return ErrorResponse(id, &acp.Error{Code: code, Message: msg})
}
