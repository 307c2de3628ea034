package acp

import (
	"math"
	"testing"
)

func TestIntRangeInteger(t *testing.T) {
	t.Parallel()
	tests := []struct {
		r    IntRange
		lit  string
		text string // "" when not an integer, or one of more than 20 digits
		in   bool
	}{
		{IntRange{0, 65535}, "2", "2", true},
		{IntRange{0, 65535}, "2.0", "2", true},
		{IntRange{0, 65535}, "2e0", "2", true},
		{IntRange{0, 65535}, "20e-1", "2", true},
		{IntRange{0, 65535}, "0.02E+2", "2", true},
		{IntRange{0, 65535}, "-0", "0", true},
		{IntRange{0, 65535}, "-0.0e5", "0", true},
		{IntRange{0, 65535}, "0e-99999999999999999999", "0", true},
		{IntRange{0, 65535}, "65535", "65535", true},
		{IntRange{0, 65535}, "65536", "65536", false},
		{IntRange{0, 65535}, "-1", "-1", false},
		{IntRange{0, 65535}, "-1.0", "-1", false},
		{IntRange{0, 65535}, "1.5", "", false},
		{IntRange{0, 65535}, "15e-1", "", false},
		{IntRange{0, 65535}, "2.0000000000000000000001", "", false},
		{IntRange{0, 65535}, "1e-400", "", false},
		{IntRange{0, 65535}, "1e400", "", false},
		{IntRange{0, 65535}, "1e99999999999999999999", "", false},
		{IntRange{0, 65535}, "1e9223372036854775807", "", false},
		{IntRange{0, 65535}, "10e9223372036854775807", "", false},
		{IntRange{0, 65535}, "1.5e-9223372036854775808", "", false},
		{IntRange{0, 65535}, "1e-9223372036854775808", "", false},
		{IntRange{0, 65535}, "0.5e1073741825", "", false},
		{IntRange{0, 65535}, "1e1073741823", "", false},
		{IntRange{1, 10000}, "0", "0", false},
		{IntRange{1, 10000}, "1e4", "10000", true},
		{IntRange{math.MinInt64, math.MaxInt64}, "-9223372036854775808", "-9223372036854775808", true},
		{IntRange{math.MinInt64, math.MaxInt64}, "-9223372036854775809", "-9223372036854775809", false},
		{IntRange{math.MinInt64, math.MaxInt64}, "9223372036854775808", "9223372036854775808", false},
		{IntRange{0, math.MaxUint64}, "18446744073709551615", "18446744073709551615", true},
		{IntRange{0, math.MaxUint64}, "1.8446744073709551615e19", "18446744073709551615", true},
		{IntRange{0, math.MaxUint64}, "18446744073709551616", "18446744073709551616", false},
		{IntRange{0, math.MaxUint64}, "100000000000000000000", "", false},
	}
	for _, tt := range tests {
		text, in := tt.r.Integer(tt.lit)
		if text != tt.text || in != tt.in {
			t.Errorf("%+v.Integer(%s) = %q, %v; want %q, %v", tt.r, tt.lit, text, in, tt.text, tt.in)
		}
	}
}
