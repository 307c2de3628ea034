package main

import (
	"testing"

	"shellagent/protocol/acptest"
)

// A client that sends a prompt and a session/close and closes its input
// at once (a script piped into the agent) gets both answers, on stdio
// and through the daemon: what was read before the end is answered
// before the output ends. Before, jsonrpc2 refused every answer sent after
// it read the end of the input, and the prompt, though run, and the
// close, though carried out, went unanswered.
func TestRequestsReadBeforeTheEndAreAnswered(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"stdio", "daemon"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var c *acptest.Client
			if mode == "stdio" {
				c = startAgent(t).c
			} else {
				c = newDaemonFixture(t).relay().c
			}
			var res struct {
				SessionID string `json:"sessionId"`
			}
			c.MustCall("session/new", map[string]any{"cwd": t.TempDir()}, &res)
			prompt := c.Send("session/prompt", map[string]any{"sessionId": res.SessionID, "prompt": []map[string]string{{"type": "text", "text": "echo hi"}}})
			closed := c.Send("session/close", map[string]any{"sessionId": res.SessionID})
			c.Close()
			for _, id := range []int64{prompt, closed} {
				if m := c.Wait(id); m.Error != nil {
					t.Errorf("request %d answered %s", id, m.Raw)
				}
			}
		})
	}
}
