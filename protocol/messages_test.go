package protocol

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestMessageReader(t *testing.T) {
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
			r := NewMessageReader(strings.NewReader(tt.input), 40)
			var got []string
			for {
				line, refusal, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(line), string(refusal))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
