package jsonrpcline

import (
	"encoding/json"
	"strconv"
	"strings"
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
	if v, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return v, true
	}
	s := string(raw)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e < -400 || e > 400 {
			return 0, false // far beyond int64 either way, or 0 written oddly: refused
		}
		s, exp = s[:i], e
	}
	digits := s
	if i := strings.IndexByte(s, '.'); i >= 0 {
		digits = s[:i] + s[i+1:]
		exp -= len(s) - i - 1
	}
	digits = strings.TrimLeft(digits, "0")
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits, exp = digits[:len(digits)-1], exp+1
	}
	switch {
	case digits == "":
		return 0, true
	case exp < 0 || len(digits)+exp > 19:
		return 0, false
	}
	if neg {
		digits = "-" + digits
	}
	v, err := strconv.ParseInt(digits+strings.Repeat("0", exp), 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}
