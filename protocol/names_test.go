package protocol

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"shellagent/acp"
)

// A member that names a field of the params in another case is refused,
// at any depth, with the id, the member's path and the name meant; one
// that names no field is left alone, as before.
func TestMemberNamesAreCaseSensitive(t *testing.T) {
	t.Parallel()
	w := newWire(t)
	tests := []struct {
		method, params string
		message        string // "": answered with a result
	}{
		{"session/new", `{"cwd":"/tmp","mcpServers":[],"unknown":1,"_meta":{"K":1}}`, ""},
		{"session/new", `{"CWD":"/tmp"}`, `CWD: unknown member (names are case-sensitive: did you mean "cwd"?)`},
		{"session/new", `{"cwd":"/tmp","additionalDIRECTORIES":[]}`, `additionalDIRECTORIES: unknown member (names are case-sensitive: did you mean "additionalDirectories"?)`},
		{"session/prompt", `{"sessionID":"s","prompt":[]}`, `sessionID: unknown member (names are case-sensitive: did you mean "sessionId"?)`},
		{"session/prompt", `{"sessionId":"s","prompt":[{"type":"text","text":"a"},{"type":"text","Text":"b"}]}`, `prompt[1].Text: unknown member (names are case-sensitive: did you mean "text"?)`},
		{"session/set_config_option", `{"sessionId":"s","configId":"x","value":"1","ConfigId":"y"}`, `ConfigId: unknown member (names are case-sensitive: did you mean "configId"?)`},
	}
	for i, tt := range tests {
		m, e := w.request(i+1, tt.method, tt.params)
		switch {
		case string(m["id"]) != fmt.Sprint(i+1):
			t.Errorf("%s: answered %v", tt.params, m)
		case tt.message == "" && m["error"] != nil:
			t.Errorf("%s: refused: %s", tt.params, m["error"])
		case tt.message != "" && (errorCode(m) != acp.CodeInvalidParams || e != tt.message):
			t.Errorf("%s: answered %s, want -32602 %q", tt.params, m["error"], tt.message)
		}
	}
}

// cancelAgent records the sessions it is asked to cancel.
type cancelAgent struct {
	stubAgent
	cancels chan string
}

func (a cancelAgent) CancelSession(_ Client, p *acp.CancelSessionNotification) {
	a.cancels <- p.SessionID
}

// A session/cancel whose sessionId is spelt in another case cancels
// nothing, and the log says why: a notification has no answer.
func TestACancelWithAMisspeltSessionIsIgnoredAndLogged(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	a := cancelAgent{cancels: make(chan string, 2)}
	w := newWireWith(t, a, Options{Log: slog.New(slog.NewTextHandler(&log, nil))})
	w.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}`)
	w.recv()
	w.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionID":"s1"}}`)
	w.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s2"}}`)
	w.send(`{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}`)
	w.recv() // the notifications before it are handled
	select {
	case got := <-a.cancels:
		if got != "s2" {
			t.Errorf("cancelled %q, want only s2", got)
		}
	default:
		t.Error("the well-spelt cancel cancelled nothing")
	}
	if len(a.cancels) > 0 {
		t.Errorf("cancelled %q too", <-a.cancels)
	}
	if want := `sessionID: unknown member`; !strings.Contains(log.String(), "ignored session/cancel") || !strings.Contains(log.String(), want) {
		t.Errorf("log %q, want the ignored cancel and %q", log.String(), want)
	}
}
