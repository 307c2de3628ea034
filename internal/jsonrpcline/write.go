package jsonrpcline

import (
	"encoding/json"

	"shellagent/acp"
)

// ErrorResponse returns the complete error response to id, without a
// newline: {"jsonrpc":"2.0","id":ID,"error":{"code":…,"message":…}}, with
// the error's data if it has any. A nil id is sent as null.
func ErrorResponse(id json.RawMessage, e *acp.Error) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *acp.Error      `json:"error"`
	}{"2.0", id, e})
	if err != nil { // an id that is not JSON, or data that does not marshal
		return ErrorResponse(nil, &acp.Error{Code: acp.CodeInternalError, Message: "encoding an error response: " + err.Error()})
	}
	return b
}
