package protocol

import (
	"context"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
)

// newCheckedWire is newWire with ClientChecks as its Observer, which
// passes on what it reports.
func newCheckedWire(t *testing.T) (*wire, chan ClientViolation) {
	seen := make(chan ClientViolation, 16)
	checks := NewClientChecks(func(_ Client, v ClientViolation) { seen <- v })
	w := newWireWith(t, stubAgent{}, Options{Log: discardLog(), Observer: checks})
	w.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}`)
	w.recv()
	return w, seen
}

// expectViolation waits for the next violation and checks its rule.
func expectViolation(t *testing.T, seen chan ClientViolation, rule, session string) ClientViolation {
	t.Helper()
	select {
	case v := <-seen:
		if v.Rule != rule || v.SessionID != session || v.Detail == "" {
			t.Fatalf("violation %+v, want rule %s for session %q", v, rule, session)
		}
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s violation reported", rule)
		return ClientViolation{}
	}
}

// expectNoViolation checks that nothing was reported after a request
// whose answer the test has read (the read loop reports before it
// handles the next message, and a session/list round trip follows).
func expectNoViolation(t *testing.T, w *wire, seen chan ClientViolation) {
	t.Helper()
	w.send(`{"jsonrpc":"2.0","id":999,"method":"session/list","params":{}}`)
	w.recv()
	select {
	case v := <-seen:
		t.Fatalf("unexpected violation %+v", v)
	default:
	}
}

// askPermission sends a permission request for session s through the
// Conn, and returns its id as the client sees it and the channel of its
// outcome.
func askPermission(ctx context.Context, t *testing.T, w *wire) (string, chan error) {
	t.Helper()
	done := make(chan error, 1)
	w.conn.RequestPermission(ctx, &acp.PermissionRequest{SessionID: "s", Title: "t", Options: []acp.PermissionOption{{OptionID: "allow", Name: "Allow", Kind: "allow_once"}}},
		func(_ *acp.PermissionResponse, err error) { done <- err })
	m := w.recv()
	if !strings.Contains(string(m["method"]), "session/request_permission") {
		t.Fatalf("got %s, want the permission request", m["method"])
	}
	return string(m["id"]), done
}

const selected = `{"outcome":{"outcome":"selected","optionId":"allow"}}`

func TestClientViolationResponses(t *testing.T) {
	t.Parallel()
	w, seen := newCheckedWire(t)

	w.send(`{"jsonrpc":"2.0","id":"perm_77","result":` + selected + `}`)
	expectViolation(t, seen, UnsentResponse, "")

	id, done := askPermission(context.Background(), t, w)
	w.send(`{"jsonrpc":"2.0","id":` + id + `,"result":` + selected + `}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	expectNoViolation(t, w, seen)
	w.send(`{"jsonrpc":"2.0","id":` + id + `,"result":` + selected + `}`)
	expectViolation(t, seen, SecondResponse, "s")
}

func TestClientViolationWithdrawnAnswer(t *testing.T) {
	t.Parallel()
	w, seen := newCheckedWire(t)
	for _, tc := range []struct {
		answer string
		wait   time.Duration
		flag   bool
	}{
		{`{"outcome":{"outcome":"cancelled"}}`, withdrawRace + 100*time.Millisecond, false},
		{selected, 0, false}, // crossed the withdrawal on the wire
		{selected, withdrawRace + 100*time.Millisecond, true},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		id, done := askPermission(ctx, t, w)
		cancel()
		if err := <-done; err == nil {
			t.Fatal("a withdrawn request reported no error")
		}
		if m := w.recv(); !strings.Contains(string(m["method"]), "$/cancel_request") {
			t.Fatalf("got %v, want $/cancel_request", m)
		}
		time.Sleep(tc.wait)
		w.send(`{"jsonrpc":"2.0","id":` + id + `,"result":` + tc.answer + `}`)
		if tc.flag {
			v := expectViolation(t, seen, WithdrawnAnswer, "s")
			if !strings.Contains(v.Detail, `"allow"`) {
				t.Errorf("detail %q does not name the option", v.Detail)
			}
		} else {
			expectNoViolation(t, w, seen)
		}
	}
}

func TestClientViolationRequests(t *testing.T) {
	t.Parallel()
	w, seen := newCheckedWire(t)
	prompt := `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"x"}]}}`
	w.send(prompt) // stubAgent holds it until it is withdrawn
	expectNoViolation(t, w, seen)
	w.send(prompt)
	expectViolation(t, seen, ReusedID, "s")
	if m := w.recv(); string(m["id"]) != "7" || errorCode(m) != acp.CodeInvalidRequest {
		t.Errorf("the reused id was answered %v, want -32600", m)
	}

	w.send(`{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	expectViolation(t, seen, EmptyPrompt, "s")
	if m := w.recv(); errorCode(m) != acp.CodeInvalidParams {
		t.Errorf("the empty prompt was answered %s, want -32602 as before", m["error"])
	}
}
