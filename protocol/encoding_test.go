package protocol

import (
	"strings"
	"testing"

	"shellagent/acp"
)

// BenchmarkV2Chunk encodes 64 KiB chunks of terminal output for a v2
// client (base64); protocol/v1front's BenchmarkV1Chunk encodes the same
// bytes for v1.
func BenchmarkV2Chunk(b *testing.B) {
	text := []byte(strings.Repeat("GET /api/items 200 12ms é漢😀 \x1b[32mok\x1b[0m\r\n", 2000))[:64<<10]
	var e acpV2
	dst, err := e.appendUpdate(nil, "s", &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "cmd", Kind: "execute",
		Content: []acp.ToolCallContent{acp.TerminalContent("term_1")},
	})
	if err != nil {
		b.Fatal(err)
	}
	o := e.output("s", "term_1")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		dst = o.appendChunk(dst[:0], text)
	}
}
