package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"shellagent/acp"
)

// echoFront is a Front for version 1 that serves one method of each kind:
// "now" answers at once and follows with a notification, "later"
// answers when the client withdraws it.
type echoFront struct {
	stubClient
	w     *Wire
	inits int
}

// stubClient is a Client that reports nothing.
type stubClient struct{}

func (stubClient) Update(string, acp.Update)                                            {}
func (stubClient) UpdateTerminal(string, *acp.TerminalUpdate, OutputSource, OutputMode) {}
func (stubClient) Release(string)                                                       {}
func (stubClient) RequestPermission(context.Context, *acp.PermissionRequest, func(*acp.PermissionResponse, error)) {
}

func (*echoFront) Version() int { return 1 }

func (f *echoFront) Initialize(params *json.RawMessage) (any, Encoding, error) {
	f.inits++
	return map[string]int{"inits": f.inits}, nil, nil
}

func (f *echoFront) Method(name string) (Method, bool) {
	switch name {
	case "now":
		return AnswerNow(func(p *acp.ListSessionsRequest) (any, func(), error) {
			return "now", func() { f.w.Notify("s", map[string]string{"sessionUpdate": "after"}) }, nil
		}), true
	case "later":
		return AnswerLater(func(ctx context.Context, p *acp.ListSessionsRequest, reply Reply) {
			context.AfterFunc(ctx, func() { reply(nil, acp.RequestCancelled("withdrawn")) })
		}), true
	}
	return Method{}, false
}

// frontWire is a Conn on pipes with echoFront for version 1, not yet
// initialized.
func frontWire(t *testing.T, fronts map[int]NewFront) *wire {
	return newWireWith(t, stubAgent{}, Options{Log: discardLog(), Fronts: fronts})
}

func initializeLine(v int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%d}}`, v)
}

// A client that asks for a front's version is served by the front for the
// rest of the connection: its methods only, answered as its Methods say;
// the versions refused name the fronts'.
func TestAFrontServesItsVersion(t *testing.T) {
	t.Parallel()
	fronts := map[int]NewFront{1: func(w *Wire) Front { return &echoFront{w: w} }}

	w := frontWire(t, nil)
	w.send(initializeLine(1))
	if m := w.recv(); errorCode(m) != acp.CodeUnsupportedProto || !json.Valid(m["error"]) ||
		string(m["error"]) != `{"code":-32022,"message":"protocolVersion: 1 is not supported; shellagent speaks 2","data":{"requested":1,"supported":[2]}}` {
		t.Errorf("v1 without a front answered %s", m["error"])
	}

	w = frontWire(t, fronts)
	w.send(initializeLine(0))
	if m := w.recv(); string(m["error"]) != `{"code":-32022,"message":"protocolVersion: 0 is not supported; shellagent speaks 1 and 2","data":{"requested":0,"supported":[1,2]}}` {
		t.Errorf("v0 answered %s", m["error"])
	}
	for i := range 2 {
		w.send(initializeLine(1))
		if m := w.recv(); string(m["result"]) != `{"inits":1}` { // a new front each time
			t.Fatalf("initialize %d answered %v", i+1, m)
		}
	}
	if v := Version(w.conn.Client()); v != 1 {
		t.Errorf("Version of the front's connection = %d", v)
	}
	w.send(`{"jsonrpc":"2.0","id":1,"method":"now","params":{}}`)
	if m := w.recv(); string(m["result"]) != `"now"` {
		t.Errorf("now answered %v", m)
	}
	if m := w.recv(); m["method"] == nil || m["id"] != nil {
		t.Errorf("what follows now: %v", m)
	}
	// After another request: the other version is refused, the same one
	// answered (by a front made for it), and the connection speaks v1 on.
	w.send(initializeLine(2))
	if m := w.recv(); errorCode(m) != acp.CodeInvalidRequest {
		t.Errorf("a v2 initialize after another request answered %v", m)
	}
	w.send(initializeLine(1))
	if m := w.recv(); string(m["result"]) != `{"inits":1}` {
		t.Errorf("a v1 initialize after another request answered %v", m)
	}
	w.send(`{"jsonrpc":"2.0","id":2,"method":"later","params":{}}`)
	w.send(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":2}}`)
	if m := w.recv(); string(m["id"]) != "2" || errorCode(m) != acp.CodeRequestCancelled {
		t.Errorf("withdrawn later answered %v", m)
	}
	w.send(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`)
	if m := w.recv(); errorCode(m) != acp.CodeMethodNotFound {
		t.Errorf("a v2 method the front does not serve answered %v", m)
	}
}

// Before the first other request, the latest successful initialize is
// authoritative: v1 then v2 speaks v2, v2 then v1 speaks v1 through a new
// front, and one that fails changes nothing.
func TestTheLatestInitializeIsAuthoritative(t *testing.T) {
	t.Parallel()
	fronts := map[int]NewFront{1: func(w *Wire) Front { return &echoFront{w: w} }}
	tests := []struct {
		versions []int // initialize with each, in order; 0 is refused
		want     int
		served   string // a method of the version spoken
		unknown  string // one of the other version
	}{
		{[]int{1, 2}, 2, "session/list", "now"},
		{[]int{2, 1}, 1, "now", "session/list"},
		{[]int{1, 2, 0}, 2, "session/list", "now"},
		{[]int{2, 1, 0}, 1, "now", "session/list"},
	}
	for _, tt := range tests {
		w := frontWire(t, fronts)
		for _, v := range tt.versions {
			w.send(initializeLine(v))
			if m := w.recv(); (v == 0) != (errorCode(m) == acp.CodeUnsupportedProto) {
				t.Fatalf("%v: initialize %d answered %v", tt.versions, v, m)
			}
		}
		if v := Version(w.conn.Client()); v != tt.want {
			t.Errorf("%v: the connection speaks v%d, want v%d", tt.versions, v, tt.want)
		}
		w.send(`{"jsonrpc":"2.0","id":1,"method":"` + tt.unknown + `","params":{}}`)
		if m := w.recv(); errorCode(m) != acp.CodeMethodNotFound {
			t.Errorf("%v: %s answered %v", tt.versions, tt.unknown, m)
		}
		w.send(`{"jsonrpc":"2.0","id":2,"method":"` + tt.served + `","params":{}}`)
		if m := w.recv(); m["result"] == nil {
			t.Errorf("%v: %s answered %v", tt.versions, tt.served, m)
		}
	}
}
