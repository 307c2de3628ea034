package protocol

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
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
// then names the first required field. An integer member takes any number
// whose fractional part is zero, as JSON Schema's integer does (2.0 and
// 2e0 as 2); a value that is not an integer in its range is refused
// saying the range (intRange).
func decodeParams(params *json.RawMessage, v any) error {
	if params == nil || string(*params) == "null" {
		return nil
	}
	raw := *params
	for rewrites := 0; ; rewrites++ {
		err := json.Unmarshal(raw, v)
		if err == nil {
			break
		}
		te, ok := errors.AsType[*json.UnmarshalTypeError](err)
		if !ok {
			return acp.InvalidParams("params: %v", strings.TrimPrefix(err.Error(), "json: "))
		}
		field := te.Field
		if field == "" {
			field = "params"
		}
		r, isInt := intRange(v, te)
		if !isInt {
			return acp.InvalidParams("%s: expected %s, got %s", field, jsonType(te.Type.Kind()), te.Value)
		}
		lit, isNumber := strings.CutPrefix(te.Value, "number ")
		if !isNumber {
			return r.Refuse(field, te.Value)
		}
		// The number ends at te.Offset. Written with a fraction or an
		// exponent, an integer in range is decoded again written plainly.
		n, ok := r.Integer(lit)
		end := int(te.Offset)
		start := end - len(lit)
		if !ok || n == lit || start < 0 || end > len(raw) || string(raw[start:end]) != lit {
			return r.Refuse(field, lit)
		}
		if rewrites == rewritesMost {
			return acp.InvalidParams("%s: more than %d integers written with a fraction or an exponent; write them plainly (%s)", field, rewritesMost, n)
		}
		raw = slices.Concat(raw[:start], []byte(n), raw[end:])
		reflect.ValueOf(v).Elem().SetZero()
	}
	return exactNames(*params, reflect.TypeOf(v), "")
}

// rewritesMost bounds how many integers written with a fraction or an
// exponent decodeParams rewrites, each at the cost of decoding the whole
// params again: a client that repeats a key could otherwise hold the
// connection's reads for minutes with one line.
const rewritesMost = 16

// intRanger is params whose integer members take fewer values than their
// Go types hold: IntRange returns the range of the member at path
// ("size.cols"), the one the params' Validate checks.
type intRanger interface {
	IntRange(path string) (acp.IntRange, bool)
}

// intRange returns the range of the integer member whose value te
// refuses: the one v gives (intRanger), else the one of its Go type
// (protocolVersion's uint16: 0 to 65535). ok is false if the member is
// not an integer.
func intRange(v any, te *json.UnmarshalTypeError) (r acp.IntRange, ok bool) {
	switch bits := te.Type.Bits; te.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		r = acp.IntRange{Min: math.MinInt64 >> (64 - bits()), Max: math.MaxInt64 >> (64 - bits())}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		r = acp.IntRange{Min: 0, Max: math.MaxUint64 >> (64 - bits())}
	default:
		return r, false
	}
	if p, ok := v.(intRanger); ok {
		if pr, ok := p.IntRange(te.Field); ok {
			return pr, true
		}
	}
	return r, true
}

// jsonType names the JSON type that a Go kind is decoded from.
func jsonType(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Bool:
		return "boolean"
	}
	return k.String()
}
