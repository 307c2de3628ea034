package supervisor

import (
	"cmp"
	"encoding/base64"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/protocol/acptest"
	"shellagent/supervisor/service"
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

// TestReadServiceTakesNothing: a client that does not hold a session
// reads its services' output (_shellagent/service/read): the last lines
// of the latest run, a run from an offset to its end, and at its end how
// it ended and which run followed; a name no service has, an offset past
// a run's end and an unknown session are refused. A v1 client reads and
// looks as well. The holder keeps the session: its next prompt runs.
func TestReadServiceTakesNothing(t *testing.T) {
	t.Parallel()
	const flaky = "echo run; echo two; exit 3"
	h, sid, _ := givingUp(t, `printf 'a\nb\nc\n'; exec sleep 60`, "c", flaky)
	runs := h.runsOf(sid, flaky)
	if len(runs) != 3 {
		t.Fatalf("flaky ran in %v, want 3 terminals", runs)
	}

	b := h.on(h.connect())
	read := func(p acp.ReadServiceRequest) (acp.ReadServiceResponse, string) {
		t.Helper()
		p.SessionID = cmp.Or(p.SessionID, sid)
		var res acp.ReadServiceResponse
		b.c.MustCall(acp.MethodReadService, p, &res)
		data, err := base64.StdEncoding.DecodeString(res.Data)
		if err != nil {
			t.Fatal(err)
		}
		return res, string(data)
	}
	const out = "run\r\ntwo\r\n"
	const ended = "exited with code 3"
	for _, tt := range []struct {
		p                acp.ReadServiceRequest
		term, data       string
		offset           int64
		ended, following string
	}{
		{acp.ReadServiceRequest{Name: "steady", Lines: 1}, "", "c\r\n", 6, "", ""},
		{acp.ReadServiceRequest{Name: "steady", Lines: 2}, "", "b\r\nc\r\n", 3, "", ""},
		{acp.ReadServiceRequest{Name: "steady", Lines: 1000}, "", "a\r\nb\r\nc\r\n", 0, "", ""},
		{acp.ReadServiceRequest{Name: "steady"}, "", "", 9, "", ""},
		{acp.ReadServiceRequest{Name: "flaky", Lines: 1}, runs[2], "two\r\n", 5, ended, ""},
		{acp.ReadServiceRequest{Name: "flaky", TerminalID: runs[0]}, runs[0], out, 0, ended, runs[1]},
		{acp.ReadServiceRequest{Name: "flaky", TerminalID: runs[0], Offset: 5}, runs[0], "two\r\n", 5, ended, runs[1]},
		{acp.ReadServiceRequest{Name: "flaky", TerminalID: runs[1], Offset: int64(len(out))}, runs[1], "", int64(len(out)), ended, runs[2]},
		{acp.ReadServiceRequest{Name: "flaky", TerminalID: runs[2], Offset: int64(len(out))}, runs[2], "", int64(len(out)), ended, ""},
		// A run the session no longer keeps: the latest from its start.
		{acp.ReadServiceRequest{Name: "flaky", TerminalID: "term_99", Offset: 3}, runs[2], out, 0, ended, ""},
	} {
		res, data := read(tt.p)
		if tt.term == "" {
			tt.term = res.TerminalID
		}
		if res.TerminalID != tt.term || data != tt.data || res.Offset != tt.offset || res.Next != tt.offset+int64(len(data)) || res.Ended != tt.ended || res.NextTerminalID != tt.following {
			t.Errorf("read %+v: %+v (%q), want %s from %d: %q, ended %q, then %q", tt.p, res, data, tt.term, tt.offset, tt.data, tt.ended, tt.following)
		}
	}
	for _, tt := range []struct {
		p       acp.ReadServiceRequest
		problem string
		code    int
	}{
		{acp.ReadServiceRequest{Name: "nosuch"}, `no service "nosuch"`, acp.CodeInvalidParams},
		{acp.ReadServiceRequest{Name: "flaky", TerminalID: runs[1], Offset: int64(len(out)) + 1}, "past the", acp.CodeInvalidParams},
		{acp.ReadServiceRequest{SessionID: "sess_none", Name: "flaky"}, "sess_none", acp.CodeNotFound},
	} {
		tt.p.SessionID = cmp.Or(tt.p.SessionID, sid)
		if err := b.callErr(acp.MethodReadService, tt.p); err == nil || err.Code != tt.code || !strings.Contains(err.Message, tt.problem) {
			t.Errorf("read %+v: %v, want %d saying %q", tt.p, err, tt.code, tt.problem)
		}
	}
	// A v1 client reads and looks as a v2 one does.
	v1 := h.connectV1(false)
	var res acp.ReadServiceResponse
	v1.c.MustCall(acp.MethodReadService, acp.ReadServiceRequest{SessionID: sid, Name: "steady", Lines: 1}, &res)
	var looked acp.LookSessionResponse
	v1.c.MustCall(acp.MethodLookSession, acp.LookSessionRequest{SessionID: sid, Command: "/logs flaky 1"}, &looked)
	if data, _ := base64.StdEncoding.DecodeString(res.Data); string(data) != "c\r\n" || !strings.Contains(looked.Text, "two") {
		t.Errorf("a v1 client read %q and looked %q, want steady's last line and flaky's", data, looked.Text)
	}
	// The holder keeps the session: its next prompt runs there.
	h.run(sid, "/down")
	h.agentText(nil, sid, service.AllStopped)
	h.c.Check()
	b.c.Check()
}
