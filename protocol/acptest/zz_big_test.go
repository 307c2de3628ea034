package acptest

import (
	"bytes"
	"io"
	"runtime"
	"testing"
	"time"
)

func TestZZBig(t *testing.T) {
	for _, opts := range [][]Option{{WithoutRaw()}, nil} {
		h := newHarness(t, opts...)
		h.agent(update("s", `{"sessionUpdate":"terminal_update","terminalId":"term_1"}`))
		const chunk, chunks = 32 << 10, 1600 // 50 MiB
		payload := bytes.Repeat([]byte("0123456789abcdef"), chunk/16)
		line := update("s", `{"sessionUpdate":"terminal_output_chunk","terminalId":"term_1","data":"`+b64(string(payload))+`"}`) + "\n"
		start := time.Now()
		for i := 0; i < chunks; i++ {
			io.WriteString(h.agentW, line)
		}
		h.end()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("withoutRaw=%v %v, heap in use %d MiB, out %d MiB, errs %d", opts != nil, time.Since(start), ms.HeapInuse>>20, len(h.c.Output("s", "term_1"))>>20, len(h.rec.Errors()))
	}
}
