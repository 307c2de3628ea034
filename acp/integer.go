package acp

import (
	"strconv"
	"strings"
)

// IntRange is the values an integer member of a request takes. As in JSON
// Schema, an integer is any number whose fractional part is zero: 2.0, 2e0
// and 20e-1 are the integer 2.
type IntRange struct {
	Min int64
	Max uint64
}

// Refuse returns the -32602 error for a value of field that is not an
// integer in r; got is the value as written, or the JSON type of a value
// that is not a number ("string").
func (r IntRange) Refuse(field, got string) *Error {
	return InvalidParams("%s: expected an integer from %d to %d, got %s", field, r.Min, r.Max, got)
}

// Check returns Refuse's error for n, the value of field, if n is not in
// r, else nil.
func (r IntRange) Check(field string, n int64) error {
	if n < r.Min || n > 0 && uint64(n) > r.Max {
		return r.Refuse(field, strconv.FormatInt(n, 10))
	}
	return nil
}

// Integer returns the integer that lit, a valid JSON number, stands for,
// in plain decimal ("2" for 2.0, 2e0 and 20e-1, "0" for -0), and whether
// it is an integer in r.
func (r IntRange) Integer(lit string) (string, bool) {
	text, ok := integerText(lit)
	if !ok || text == "" {
		return "", false
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return text, n >= r.Min && (n <= 0 || uint64(n) <= r.Max)
	}
	u, err := strconv.ParseUint(text, 10, 64) // above math.MaxInt64
	return text, err == nil && u <= r.Max
}

// expMost bounds the exponents integerText works with: a larger one
// stands for a number with more than 20 digits or a fractional part
// whatever its digits (at most a line's length) are.
const expMost = 1 << 30

// integerText returns the integer that lit, a valid JSON number, stands
// for, in plain decimal, or "" if it has more than 20 digits (more than
// any int64 or uint64 holds); ok is false for a number with a non-zero
// fractional part. It is exact, and quick however large the exponent.
func integerText(lit string) (text string, ok bool) {
	s, neg := strings.CutPrefix(lit, "-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > expMost || e < -expMost {
			// As far beyond the digits either way, and kept small enough
			// that adding the digits' count (a line's length at most)
			// cannot overflow.
			e = expMost
			if strings.HasPrefix(s[i+1:], "-") {
				e = -e
			}
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
		return "0", true
	case exp < 0:
		return "", false
	case exp > 20-len(digits):
		return "", true
	}
	text = digits + strings.Repeat("0", exp)
	if neg {
		text = "-" + text
	}
	return text, true
}
