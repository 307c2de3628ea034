package acp

import "fmt"

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

// Error is a JSON-RPC error an agent answers a request with: the
// connection sends Code, Message and Data as they are. It marshals as a
// JSON-RPC error object (the error of an error stop reason).
type Error struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
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
