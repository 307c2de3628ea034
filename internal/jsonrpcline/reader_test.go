package jsonrpcline

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestLine(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // longer than the bufio buffer
	tests := []struct {
		name  string
		input string
		max   int
		want  []string // "!" marks ErrTooLong
	}{
		{"lines", "a\nbb\n", 10, []string{"a", "bb"}},
		{"crlf", "a\r\nb\r\n", 10, []string{"a", "b"}},
		{"last line without newline", "a\nb", 10, []string{"a", "b"}},
		{"empty lines", "\n\na\n", 10, []string{"", "", "a"}},
		{"exactly at the cap", "12345\nx\n", 5, []string{"12345", "x"}},
		{"over the cap is skipped", "123456\nx\n", 5, []string{"!", "x"}},
		{"over the cap without newline", "123456", 5, []string{"!"}},
		{"over the cap at the end", "ok\n123456", 5, []string{"ok", "!"}},
		{"long line under the cap", long + "\nx\n", 1 << 20, []string{long, "x"}},
		{"long line over the cap", long + "\nx\n", 100 << 10, []string{"!", "x"}},
		{"trailing carriage returns", "ab\r\r\r\nc\r", 2, []string{"ab", "c"}},
		{"carriage returns inside", "a\rb\n", 3, []string{"a\rb"}},
		{"only carriage returns", "\r\r\n\r", 0, []string{"", ""}},
		{"carriage returns past the cap", "12345" + strings.Repeat("\r", 100) + "\n", 5, []string{"12345"}},
		{"carriage returns inside past the cap", "12345" + strings.Repeat("\r", 100) + "6\n", 5, []string{"!"}},
	}
	for _, tt := range tests {
		for _, size := range []int{16, 64 << 10} {
			// The smallest buffer splits lines into many fragments.
			r := newReaderSize(strings.NewReader(tt.input), tt.max, size)
			var got []string
			for {
				line, err := r.Line()
				if errors.Is(err, io.EOF) {
					break
				}
				if errors.Is(err, ErrTooLong) {
					got = append(got, "!")
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(line))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("%s, buffer %d: lines %q, want %q", tt.name, size, short(got), short(tt.want))
			}
		}
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

func TestLineDoesNotHoldSkippedLines(t *testing.T) {
	r := NewReader(strings.NewReader(strings.Repeat("y", 10<<20)+"\nok\n"), 1<<20)
	if _, err := r.Line(); !errors.Is(err, ErrTooLong) {
		t.Fatalf("err = %v", err)
	}
	if cap(r.line) > 2<<20 {
		t.Errorf("skipping a 10 MiB line grew the buffer to %d bytes", cap(r.line))
	}
	if line, err := r.Line(); err != nil || string(line) != "ok" {
		t.Errorf("next line %q, %v", line, err)
	}
}

// endless is a line that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// A line that never ends is refused once it passes the cap, having cost
// about twice the cap in allocations, never more.
func TestLineNeverEnding(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := NewReader(endless{}, DefaultMaxLine)
	_, err := r.Line()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLong) {
		t.Fatalf("Line: %v, want ErrTooLong", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*DefaultMaxLine {
		t.Errorf("allocated %d MiB to refuse a line at %d MiB", alloc>>20, DefaultMaxLine>>20)
	}
}

func TestNext(t *testing.T) {
	const (
		parse    = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: not valid JSON"}}`
		batch    = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}`
		tooLong  = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"message longer than 40 bytes"}}`
		badRPC   = `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"jsonrpc: must be \"2.0\""}}`
		accepted = ""
	)
	ok := `{"jsonrpc":"2.0","id":1,"method":"x"}`
	tests := []struct {
		name  string
		input string
		want  []string // line, then the refusal ("" for none), per line
	}{
		{"a message", ok + "\n", []string{ok, accepted}},
		{"blank lines and spaces skipped", "\n  \n  " + ok + " \r\n", []string{ok, accepted}},
		{"not JSON", "nope\n" + ok + "\n", []string{"nope", parse, ok, accepted}},
		{"a batch", "[1,2]\n", []string{"[1,2]", batch}},
		{"a bad jsonrpc keeps the id", `{"jsonrpc":"1.0","id":7,"method":"x"}` + "\n", []string{`{"jsonrpc":"1.0","id":7,"method":"x"}`, badRPC}},
		{"too long", strings.Repeat("x", 41) + "\n" + ok + "\n", []string{"", tooLong, ok, accepted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.input), 40)
			var got []string
			for {
				m, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(m.Line), string(m.Refusal))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// Fuzz targets, seeded from testdata/fuzz/; .ci/run runs each briefly.

// FuzzLineReader checks Line against splitting the whole input at '\n',
// with read buffers small enough to split lines into fragments.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nbb\r\n\nccc"), uint8(2), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, max, size uint8) {
		r := newReaderSize(bytes.NewReader(data), int(max), 16+int(size))
		var got [][]byte
		for {
			line, err := r.Line()
			if errors.Is(err, io.EOF) {
				break
			}
			switch {
			case errors.Is(err, ErrTooLong):
				line = []byte("!")
			case err != nil:
				t.Fatal(err)
			default:
				line = bytes.Clone(line)
			}
			got = append(got, line)
		}
		var want [][]byte
		segs := bytes.Split(data, []byte("\n"))
		if len(segs[len(segs)-1]) == 0 {
			segs = segs[:len(segs)-1] // after the last newline
		}
		for _, s := range segs {
			s = bytes.TrimRight(s, "\r")
			if len(s) > int(max) {
				s = []byte("!")
			}
			want = append(want, s)
		}
		if len(got) != len(want) {
			t.Fatalf("%d lines %q, want %d %q", len(got), got, len(want), want)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) && !(len(got[i]) == 0 && len(want[i]) == 0) {
				t.Fatalf("line %d = %q, want %q", i, got[i], want[i])
			}
		}
	})
}
