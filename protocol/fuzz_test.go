package protocol

import (
	"context"
	"io"
	"testing"

	"shellagent/acp"
	"shellagent/internal/wiretest"
)

// Fuzz targets, seeded from testdata/fuzz/; .ci/run runs each briefly.

// immediateAgent answers every method at once.
type immediateAgent struct{ stubAgent }

func (immediateAgent) Prompt(_ context.Context, _ Client, _ *acp.PromptRequest, reply Reply) {
	reply(&acp.PromptResponse{MessageID: "m"}, nil)
}

// FuzzRequest sends one line to a connection, then a request of its own:
// whatever the line, the connection answers only with valid JSON-RPC, goes
// on reading, and answers a request with a valid id exactly once, with
// that id.
func FuzzRequest(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"ls"}]}}`)
	// Numbers with fractions and exponents, in an id, an integer member
	// and a content block (a huge exponent once overflowed and panicked).
	f.Add(`{"jsonrpc":"2.0","id":1e5,"method":"initialize","params":{"protocolVersion":2.0e0}}`)
	f.Add(`{"jsonrpc":"2.0","id":2,"method":"_shellagent/terminal/resize","params":{"sessionId":"s","terminalId":"term_1","size":{"cols":8.0e1,"rows":24}}}`)
	f.Add(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"resource_link","uri":"file:///x","name":"x","size":1.5e-3}]}}`)
	f.Fuzz(func(t *testing.T, line string) {
		checkOneLine(t, immediateAgent{}, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":2}}`, line)
	})
}

// checkOneLine is wiretest.CheckOneLine on a Conn serving agent.
func checkOneLine(t *testing.T, agent Agent, init, line string) {
	t.Helper()
	wiretest.CheckOneLine(t, func(in io.Reader, out io.Writer) *Conn { return NewConn(in, out, agent, Options{Log: discardLog()}) }, init, line)
}
