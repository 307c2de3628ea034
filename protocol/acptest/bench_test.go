package acptest

import (
	"bytes"
	"io"
	"testing"
)

// BenchmarkOutputChunks measures how fast the client reads, validates and
// reconstructs terminal output (32 KiB chunks).
func BenchmarkOutputChunks(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{{"raw", nil}, {"withoutRaw", []Option{WithoutRaw()}}} {
		b.Run(tc.name, func(b *testing.B) {
			payload := bytes.Repeat([]byte("0123456789abcdef"), 2048)
			line := []byte(update("s", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"`+b64(string(payload))+`"}`) + "\n")
			pr, pw := io.Pipe()
			rec := &recorder{parent: b}
			c := newClient(rec, pr, nopWriteCloser{io.Discard}, tc.opts...)
			go func() { // the announcement
				_, _ = io.WriteString(pw, update("s", `{"sessionUpdate":"terminal_update","terminalId":"term_1"}`)+"\n")
			}()
			c.WaitFor("terminal_update", func(m *Msg) bool { return m.Kind == "terminal_update" })
			b.SetBytes(int64(len(payload)))
			b.ResetTimer()
			for range b.N {
				if _, err := pw.Write(line); err != nil {
					b.Fatal(err)
				}
			}
			pw.Close()
			c.Close()
			if len(c.Output("s", "term_1")) != b.N*len(payload) || len(rec.Errors()) != 0 {
				b.Fatalf("output %d bytes, errors %q", len(c.Output("s", "term_1")), rec.Errors())
			}
		})
	}
}
