package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sourcegraph/jsonrpc2"
)

// JSON-RPC and ACP error codes.
const (
	CodeParseError       = -32700
	CodeInvalidRequest   = -32600
	CodeMethodNotFound   = -32601
	CodeInvalidParams    = -32602
	CodeInternalError    = -32603
	CodeRequestCancelled = -32800
	CodeNotFound         = -32002
	CodeUnsupportedProto = -32022
)

// Error is a JSON-RPC error an Agent method returns.
type Error struct {
	Code    int64
	Message string
	Data    any
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// InvalidParams returns a -32602 error; the message should start with the
// name of the offending field.
func InvalidParams(format string, args ...any) *Error {
	return &Error{Code: CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// SessionNotFound returns the -32002 error for an unknown session.
func SessionNotFound(id string) *Error {
	return &Error{Code: CodeNotFound, Message: "session not found: " + id, Data: map[string]string{"sessionId": id}}
}

// RequestCancelled returns the -32800 error for a prompt that was never
// inserted.
func RequestCancelled(why string) *Error {
	return &Error{Code: CodeRequestCancelled, Message: why}
}

// toRPC converts any error into the JSON-RPC error sent for it.
func toRPC(err error) *jsonrpc2.Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: CodeInternalError, Message: err.Error()}
	}
	out := &jsonrpc2.Error{Code: e.Code, Message: e.Message}
	if e.Data != nil {
		out.SetError(e.Data)
	}
	return out
}

// decodeParams unmarshals params into v and reports problems as -32602
// errors that name the field. Absent params decode as {}: the request's
// validate then names the first required field.
func decodeParams(params *json.RawMessage, v any) error {
	if params == nil || string(*params) == "null" {
		return nil
	}
	if err := json.Unmarshal(*params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "params"
			}
			return InvalidParams("%s: expected %s, got %s", field, jsonType(te.Type.Kind().String()), te.Value)
		}
		return InvalidParams("params: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func jsonType(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "int", "int64", "uint64", "float64":
		return "number"
	case "slice":
		return "array"
	case "struct", "map":
		return "object"
	case "bool":
		return "boolean"
	}
	return goKind
}
