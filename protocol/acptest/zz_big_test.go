package acptest

import (
	"bytes"
	"io"
	"testing"
	"time"
)

func TestZZBig(t *testing.T) {
	h := newHarness(t, WithoutRaw())
	h.agent(update("s", `{"sessionUpdate":"terminal_update","terminalId":"term_1"}`))
	const chunk, chunks = 32 << 10, 800
	payload := bytes.Repeat([]byte("0123456789abcdef"), chunk/16)
	line := update("s", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"`+b64(string(payload))+`"}`) + "\n"
	start := time.Now()
	for i := 0; i < chunks; i++ {
		io.WriteString(h.agentW, line)
	}
	h.end()
	t.Logf("%v", time.Since(start))
}
