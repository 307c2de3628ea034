package jsonrpcline

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"shellagent/acp"
)

// ReservedIDPrefix starts the string ids no message may carry: the agent
// keeps them for ids of its own making (protocol carries an id that
// jsonrpc2 cannot hold as a number in a string with this prefix). Check
// refuses them.
const ReservedIDPrefix = "\x00shellagent-id:"

// ValidID returns raw if it is an id that can be carried back unchanged:
// a string (not starting with ReservedIDPrefix) or an integer in int64,
// written as the sender likes (see IntID); else nil.
func ValidID(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil || strings.HasPrefix(s, ReservedIDPrefix) {
			return nil
		}
		return raw
	case 'n', 't', 'f', '{', '[':
		return nil
	}
	if _, ok := IntID(raw); !ok {
		return nil
	}
	return raw
}

// IntID returns the value of a JSON number that is an integer in int64,
// however it is written (-1, 1.0, 1e2, 100e-2, -0); ok is false for any
// other number (1.5, 1e19). raw must be a valid JSON number.
func IntID(raw []byte) (v int64, ok bool) {
	text, ok := int64Range.Integer(string(raw))
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(text, 10, 64)
	return v, err == nil
}

// int64Range is every int64: the schema's RequestId integers.
var int64Range = acp.IntRange{Min: math.MinInt64, Max: math.MaxInt64}
