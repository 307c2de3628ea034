package protocol

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/jsonrpcline"

	"github.com/sourcegraph/jsonrpc2"
)

// A line that passes the envelope checks but that jsonrpc2 cannot read (a
// method and a result) is refused with -32600 and the id as sent; an id
// carried for jsonrpc2 (7.0) is answered as null, as it always was.
func TestAMessageJsonrpc2CannotReadIsRefused(t *testing.T) {
	t.Parallel()
	w := newWire(t)
	for _, tt := range []struct{ id, answered string }{{`7`, `7`}, {`"s"`, `"s"`}, {`7.0`, `null`}} {
		w.send(`{"jsonrpc":"2.0","id":` + tt.id + `,"method":"session/list","result":{}}`)
		m := w.recv()
		if string(m["id"]) != tt.answered || errorCode(m) != acp.CodeInvalidRequest {
			t.Errorf("id %s: answered %v, want -32600 with id %s", tt.id, m, tt.answered)
		}
	}
	w.send(`{"jsonrpc":"2.0","id":8,"method":"session/list","params":{}}`)
	if m := w.recv(); string(m["id"]) != "8" || m["result"] == nil {
		t.Errorf("the next request answered %v", m)
	}
}

// BenchmarkReadObject: a session/prompt line through the connection's
// read path up to jsonrpc2's decoding: the line, the envelope checks,
// and jsonrpc2's Request. Before internal/jsonrpcline (json.Valid, the
// envelope, a map decode of every line to carry odd ids): 92 allocs and
// 4.3 KB per request; after: 75 and 3.7 KB.
func BenchmarkReadObject(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"ls -la /tmp && echo done"}]}}` + "\n")
	ready := make(chan struct{})
	close(ready)
	w := newWriter(&bytes.Buffer{}, discardLog(), 0)
	defer w.close(time.Time{})
	s := &objectStream{msgs: jsonrpcline.NewReader(bytes.NewReader(bytes.Repeat(line, b.N)), 0), w: w, ready: ready}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var req jsonrpc2.Request
		if err := s.ReadObject(&req); err != nil {
			b.Fatal(err)
		}
	}
}

// A response is never answered, however bad: JSON-RPC answers requests
// only, and a peer that answers a bad line as the agent does would
// otherwise answer the agent's answer, and so on forever (the agent's own
// refusal, id null, sent back to it was answered with another one). The
// next request is answered first.
func TestAResponseIsNeverAnswered(t *testing.T) {
	t.Parallel()
	w := newWire(t)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: not valid JSON"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"id: must be a string or an integer (int64)"}}`,
		`{"jsonrpc":"2.0","id":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
		`{"jsonrpc":"2.0","id":1e999,"result":{}}`,
		`{"jsonrpc":"2.0","id":{},"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":"\u0000shellagent-id:1","result":{}}`,
		`{"jsonrpc":"1.0","id":3,"result":{}}`,
		`{"id":3,"result":{}}`,
		`{"jsonrpc":"2.0","id":4,"result":{},"Error":null}`,
		`{"jsonrpc":"2.0","id":7,"error":"oops"}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":"x","message":5}}`,
		`{"jsonrpc":"2.0","id":7.0,"error":[]}`,
		`{"jsonrpc":"2.0","id":8,"error":null}`,
		`{"jsonrpc":"2.0","id":"perm_1","result":{}}`,
	} {
		w.send(line)
	}
	w.send(`{"jsonrpc":"2.0","id":"next","method":"session/list","params":{}}`)
	if m := w.recv(); string(m["id"]) != `"next"` || m["result"] == nil {
		t.Errorf("after the responses, the agent wrote %v, want the answer to the next request", m)
	}
}

// A response to a request of the agent's that the agent cannot read (an
// error jsonrpc2 cannot decode, a jsonrpc other than "2.0") ends that
// request with an error, as the client meant to answer it: before, it was
// dropped (or answered -32600) and the request waited for ever, holding
// the turn that asked and every prompt after it.
func TestAnUnreadableResponseEndsTheRequest(t *testing.T) {
	t.Parallel()
	for _, resp := range []string{
		`{"jsonrpc":"2.0","id":%s,"error":{"code":1.5}}`,
		`{"jsonrpc":"2.0","id":%s,"error":"oops"}`,
		`{"jsonrpc":"1.0","id":%s,"result":{"outcome":{"outcome":"cancelled"}}}`,
		`{"id":%s,"result":{"outcome":{"outcome":"cancelled"}}}`,
		`{"jsonrpc":"2.0","id":%s,"result":{},"Error":null}`,
		`{"jsonrpc":"2.0","id":%s,"error":null}`,
	} {
		w := newWire(t)
		id, done := askPermission(t.Context(), t, w)
		w.send(fmt.Sprintf(resp, id))
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: the request ended without an error", resp)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("%s: the request still waits for its answer", resp)
		}
		w.send(`{"jsonrpc":"2.0","id":"next","method":"session/list","params":{}}`)
		if m := w.recv(); string(m["id"]) != `"next"` {
			t.Errorf("%s: then the agent wrote %v, want the answer to the next request", resp, m)
		}
	}
}
