package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestPromptTurnInterrupted: how a turn that a stop signal interrupted
// is withdrawn and how it ends, message by message: a prompt held behind
// another turn is withdrawn by $/cancel_request and leaves that turn
// alone; one inserted, or inserted after its withdrawal was sent, by
// session/cancel; the outcome is what the daemon answers.
func TestPromptTurnInterrupted(t *testing.T) {
	const (
		inserted  = `{"jsonrpc":"2.0","id":1,"result":{}}`
		refused   = `{"jsonrpc":"2.0","id":1,"error":{"code":-32800,"message":"cancelled by session/cancel"}}`
		failed    = `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no such session"}}`
		waiting   = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message","content":{"type":"text","text":"Waiting."}}}}`
		ready     = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message","content":{"type":"text","text":"Ready: a."}}}}`
		ended     = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","stopReason":"end_turn"}}}`
		cancelled = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","stopReason":"cancelled"}}}`
		cancelReq = `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`
		cancelSes = `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`
	)
	tests := []struct {
		name     string
		before   []string // the daemon's messages before the signal
		after    []string // and after it, until the turn is over
		sent     []string // what the command sends after the prompt
		outcome  turnOutcome
		said, er string
	}{
		{"held: withdrawn", []string{ended}, []string{refused}, []string{cancelReq}, turnWithdrawn, "", ""},
		{"held, inserted before the withdrawal", nil, []string{inserted, waiting, cancelled}, []string{cancelReq, cancelSes}, turnCancelled, "Waiting.", ""},
		{"running: cancelled", []string{inserted, waiting}, []string{cancelled}, []string{cancelSes}, turnCancelled, "Waiting.", ""},
		{"running: answered first", []string{inserted, waiting}, []string{ready, ended}, []string{cancelSes}, turnAnswered, "Waiting.\nReady: a.", ""},
		{"refused for another reason", nil, []string{failed}, []string{cancelReq}, 0, "", "session/prompt: no such session"},
	}
	for _, tt := range tests {
		var sent bytes.Buffer
		sc := &stackClient{enc: json.NewEncoder(&sent), sid: "s"}
		turn := &promptTurn{sc: sc}
		if err := turn.send("/up"); err != nil {
			t.Fatal(err)
		}
		sent.Reset()
		take := func(lines []string, signalled bool) (over bool, err error) {
			for i, line := range lines {
				m := new(incoming)
				if err := json.Unmarshal([]byte(line), m); err != nil {
					t.Fatal(err)
				}
				if _, over, err = turn.take(m); over != (signalled && i == len(lines)-1) {
					t.Fatalf("%s: over %v after %s", tt.name, over, line)
				}
			}
			return over, err
		}
		take(tt.before, false)
		turn.intr = &interrupted{sig: syscall.SIGINT}
		if err := turn.withdraw(); err != nil {
			t.Fatal(err)
		}
		_, err := take(tt.after, true)
		if got := strings.Fields(sent.String()); fmt.Sprint(got) != fmt.Sprint(tt.sent) {
			t.Errorf("%s: sent %q, want %q", tt.name, got, tt.sent)
		}
		if tt.er != "" {
			if err == nil || err.Error() != tt.er {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.er)
			}
			continue
		}
		intr, ok := err.(*interrupted)
		if !ok || intr.outcome != tt.outcome || intr.said != tt.said {
			t.Errorf("%s: %#v, want outcome %d, said %q", tt.name, err, tt.outcome, tt.said)
		}
	}
}
