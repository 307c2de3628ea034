package protocol

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"shellagent/acp"
)

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the bufio buffer
	tests := []struct {
		name  string
		input string
		max   int
		want  []string // "!" marks errTooLong
	}{
		{"lines", "a\nbb\n", 10, []string{"a", "bb"}},
		{"crlf", "a\r\nb\r\n", 10, []string{"a", "b"}},
		{"last line without newline", "a\nb", 10, []string{"a", "b"}},
		{"empty lines", "\n\na\n", 10, []string{"", "", "a"}},
		{"exactly at the cap", "12345\nx\n", 5, []string{"12345", "x"}},
		{"over the cap is skipped", "123456\nx\n", 5, []string{"!", "x"}},
		{"over the cap without newline", "123456", 5, []string{"!"}},
		{"long line under the cap", long + "\nx\n", 1 << 20, []string{long, "x"}},
		{"long line over the cap", long + "\nx\n", 100 << 10, []string{"!", "x"}},
		{"trailing carriage returns", "ab\r\r\r\nc\r", 2, []string{"ab", "c"}},
		{"carriage returns inside", "a\rb\n", 3, []string{"a\rb"}},
		{"only carriage returns", "\r\r\n\r", 0, []string{"", ""}},
		{"carriage returns past the cap", "12345" + strings.Repeat("\r", 100) + "\n", 5, []string{"12345"}},
		{"carriage returns inside past the cap", "12345" + strings.Repeat("\r", 100) + "6\n", 5, []string{"!"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The smallest buffer splits lines into many fragments.
			r := newLineReaderSize(strings.NewReader(tt.input), tt.max, 16)
			var got []string
			for {
				line, err := r.next()
				if errors.Is(err, io.EOF) {
					break
				}
				if errors.Is(err, errTooLong) {
					got = append(got, "!")
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(line))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("lines %q, want %q", short(got), short(tt.want))
			}
		})
	}
}

func short(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		if len(v) > 20 {
			v = v[:10] + "…"
		}
		out[i] = v
	}
	return out
}

func TestLineReaderDoesNotHoldSkippedLines(t *testing.T) {
	r := newLineReader(strings.NewReader(strings.Repeat("y", 10<<20)+"\nok\n"), 1<<20)
	if _, err := r.next(); !errors.Is(err, errTooLong) {
		t.Fatalf("err = %v", err)
	}
	if cap(r.line) > 2<<20 {
		t.Errorf("skipping a 10 MiB line grew the buffer to %d bytes", cap(r.line))
	}
	if line, err := r.next(); err != nil || string(line) != "ok" {
		t.Errorf("next line %q, %v", line, err)
	}
}

func TestIntID(t *testing.T) {
	for _, tt := range []struct {
		raw string
		v   int64
		ok  bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"0.000", 0, true}, {"0e7", 0, true},
		{"12", 12, true}, {"12.0", 12, true}, {"1.2e1", 12, true}, {"120e-1", 12, true}, {"1200E-2", 12, true},
		{"-12.00", -12, true}, {"9.223372036854775807e18", 9223372036854775807, true},
		{"-9223372036854775808.0", -9223372036854775808, true},
		{"9223372036854775808.0", 0, false}, {"1.5", 0, false}, {"12e-2", 0, false}, {"1e20", 0, false},
		{"1e401", 0, false}, {"0.1e1", 1, true},
	} {
		v, ok := intID([]byte(tt.raw))
		if v != tt.v || ok != tt.ok {
			t.Errorf("intID(%s) = %d, %v; want %d, %v", tt.raw, v, ok, tt.v, tt.ok)
		}
	}
}

func TestCheckMessage(t *testing.T) {
	tests := []struct {
		line string
		code int64  // 0: accepted
		id   string // id of the error response
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":"a","method":"x","params":{}}`, 0, ""},
		{`{"jsonrpc":"2.0","method":"session/cancel"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":3,"result":{}}`, 0, ""},
		{`{"jsonrpc":"2.0","id":1,"method":`, acp.CodeParseError, "null"},
		{`not json`, acp.CodeParseError, "null"},
		{`[{"jsonrpc":"2.0","id":1,"method":"x"}]`, acp.CodeInvalidRequest, "null"},
		{`"a string"`, acp.CodeInvalidRequest, "null"},
		{`{"id":1,"method":"x"}`, acp.CodeInvalidRequest, "1"},
		{`{"jsonrpc":"1.0","id":"q","method":"x"}`, acp.CodeInvalidRequest, `"q"`},
		{`{"jsonrpc":"2.0","id":null,"method":"x"}`, acp.CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":-1,"method":"x"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":9223372036854775807,"method":"x"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":-9223372036854775808,"method":"x"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":9223372036854775808,"method":"x"}`, acp.CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":"\u0000shellagent-id:-1","method":"x"}`, acp.CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":1.5,"method":"x"}`, acp.CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":1.0,"method":"x"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":1e2,"method":"x"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":-92233720368547758.08e2,"method":"x"}`, 0, ""},
		{`{"jsonrpc":"2.0","id":9223372036854775808.0,"method":"x"}`, acp.CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":1e19,"method":"x"}`, acp.CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":1.25e1,"method":"x"}`, acp.CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":1e-1,"method":"x"}`, acp.CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":1e999999999999,"method":"x"}`, acp.CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":{},"method":"x"}`, acp.CodeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":7}`, acp.CodeInvalidRequest, "7"},
		{`{"jsonrpc":"2.0","id":7,"method":5}`, acp.CodeInvalidRequest, "7"},
		{`{"jsonrpc":"2.0","id":-7,"method":null}`, acp.CodeInvalidRequest, "-7"},
		{`{"jsonrpc":"2.0","id":"m","method":{}}`, acp.CodeInvalidRequest, `"m"`},
	}
	for _, tt := range tests {
		resp := checkMessage([]byte(tt.line))
		if tt.code == 0 {
			if resp != nil {
				t.Errorf("%s: rejected with %s", tt.line, resp)
			}
			continue
		}
		var got struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int64 `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(resp, &got); err != nil {
			t.Fatalf("%s: response %s: %v", tt.line, resp, err)
		}
		if got.Error.Code != tt.code || string(got.ID) != tt.id {
			t.Errorf("%s: got %s, want code %d id %s", tt.line, resp, tt.code, tt.id)
		}
	}
}
