package supervisor

import (
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/protocol/acptest"
)

// TestALookTakesNothing: a client that does not hold a session looks at
// it (_shellagent/session/look): /ps and /tail answer what their prompts
// would, while the session's foreground command runs; a command that acts
// or runs work, a malformed one and an unknown session are refused. The
// client that holds the session sees nothing of the looks, keeps it, and
// its turn goes on to its end.
func TestALookTakesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	a := h.on(h.connect())
	sid := a.busySession()

	b := h.on(h.connect())
	for _, tt := range []struct{ command, want string }{
		{"/ps", "term_1"},
		{"  /tail term_1 5 ", "bg"},
		{"/status", "No services:"},
	} {
		var res acp.LookSessionResponse
		b.c.MustCall(acp.MethodLookSession, map[string]string{"sessionId": sid, "command": tt.command}, &res)
		if !strings.Contains(res.Text, tt.want) {
			t.Errorf("a look at %q answered %q, want it to say %q", tt.command, res.Text, tt.want)
		}
	}
	for _, tt := range []struct {
		sid, command, problem string
		code                  int
	}{
		{sid, "/stop term_1", "only reads: /ps, /tail, /status, /logs", acp.CodeInvalidParams},
		{sid, "/bg echo x", "only reads", acp.CodeInvalidParams},
		{sid, "echo x", "only reads", acp.CodeInvalidParams},
		{sid, "/tail", "/tail needs", acp.CodeInvalidParams},
		{sid, "/nosuch", "Unknown command /nosuch", acp.CodeInvalidParams},
		{"sess_none", "/ps", "sess_none", acp.CodeNotFound},
	} {
		if err := b.callErr(acp.MethodLookSession, map[string]string{"sessionId": tt.sid, "command": tt.command}); err == nil || err.Code != tt.code || !strings.Contains(err.Message, tt.problem) {
			t.Errorf("a look at %q in %s: %v, want %d saying %q", tt.command, tt.sid, err, tt.code, tt.problem)
		}
	}

	h.release("go")
	a.output(sid, "term_2", "fg done")
	a.exit(nil, sid, "term_2")
	var said []string
	for _, m := range a.c.Updates(sid) {
		if m.Kind == acp.KindUserMessage {
			said = append(said, m.Text())
		}
	}
	if len(said) != 2 || !strings.HasPrefix(said[0], "/bg") || !strings.HasPrefix(said[1], "echo fg") {
		t.Errorf("the holder's user messages: %q, want its two prompts only", said)
	}
	a.never(sid, "an answer of a look reached the holder", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindAgentMessage && (strings.Contains(m.Text(), "Background work") || strings.Contains(m.Text(), "No services"))
	})
	a.c.Check()
	b.c.Check()
}
