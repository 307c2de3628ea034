package jsonrpcline

import (
	"encoding/json"
	"errors"

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
)

// An Envelope is what Check reads of a message: its kind, its id as the
// sender wrote it (nil if it has none, or none that can be carried
// back), and its method.
type Envelope struct {
	Kind   Kind
	ID     json.RawMessage
	Method string
}

// envelope is a message's members as Check decodes them. Its name is in
// the refusal of a member of the wrong type ("Go struct field
// envelope.jsonrpc"), which clients see: keep it.
type envelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// Check returns the envelope of line, a line without surrounding white
// space, and refusal: nil for a JSON-RPC 2.0 message the agent handles,
// else the complete error response the agent answers the line with (not
// JSON: -32700; a batch, not an object, a bad jsonrpc, id or method:
// -32600). The line is decoded once.
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
	var e envelope
	if err := json.Unmarshal(line, &e); err != nil {
		if _, ok := errors.AsType[*json.SyntaxError](err); ok {
			return Envelope{}, refuse(nil, acp.CodeParseError, "parse error: not valid JSON")
		}
		return Envelope{}, refuse(nil, acp.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	env.ID = ValidID(e.ID)
	switch {
	case e.ID != nil && env.ID == nil:
		return Envelope{}, refuse(nil, acp.CodeInvalidRequest, "id: must be a string or an integer (int64)")
	case e.JSONRPC == nil || *e.JSONRPC != "2.0":
		return Envelope{ID: env.ID}, refuse(env.ID, acp.CodeInvalidRequest, `jsonrpc: must be "2.0"`)
	case e.Method == nil && e.Result == nil && e.Error == nil:
		return Envelope{ID: env.ID}, refuse(env.ID, acp.CodeInvalidRequest, "method: required")
	case e.Method != nil && e.Method[0] != '"':
		return Envelope{ID: env.ID}, refuse(env.ID, acp.CodeInvalidRequest, "method: must be a string")
	}
	switch {
	case e.Method != nil:
		_ = json.Unmarshal(e.Method, &env.Method) // Safe: a valid JSON string.
		env.Kind = Notification
		if env.ID != nil {
			env.Kind = Request
		}
	case e.Error != nil && string(e.Error) != "null":
		env.Kind = Error
	default:
		env.Kind = Response
	}
	return env, nil
}

// refuse is ErrorResponse with an error of code and msg.
func refuse(id json.RawMessage, code int64, msg string) []byte {
	return ErrorResponse(id, &acp.Error{Code: code, Message: msg})
}
