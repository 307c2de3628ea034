package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	"shellagent/acp"

	"github.com/sourcegraph/jsonrpc2"
)

// toRPC converts any error into the JSON-RPC error sent for it.
func toRPC(err error) *jsonrpc2.Error {
	var e *acp.Error
	if !errors.As(err, &e) {
		e = &acp.Error{Code: acp.CodeInternalError, Message: err.Error()}
	}
	out := &jsonrpc2.Error{Code: e.Code, Message: e.Message}
	if e.Data != nil {
		out.SetError(e.Data)
	}
	return out
}

// decodeParams unmarshals params into v and reports problems as -32602
// errors that name the field, a member name spelt in another case among
// them (exactNames). Absent params decode as {}: the request's validate
// then names the first required field.
func decodeParams(params *json.RawMessage, v any) error {
	if params == nil || string(*params) == "null" {
		return nil
	}
	if err := json.Unmarshal(*params, v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			field := te.Field
			if field == "" {
				field = "params"
			}
			return acp.InvalidParams("%s: expected %s, got %s", field, jsonType(te.Type.Kind().String()), te.Value)
		}
		return acp.InvalidParams("params: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	return exactNames(*params, reflect.TypeOf(v), "")
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
