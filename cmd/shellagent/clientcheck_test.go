package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"shellagent/protocol/acptest"
)

// checkRun is one agent with two sessions, one with client_checks off and
// one with it on, that a test client wrongs.
type checkRun struct {
	t   *testing.T
	c   *acptest.Client
	cwd string
	off string // session with client_checks off
	on  string // session with client_checks on
}

func startCheckRun(t *testing.T, args []string, opts ...acptest.Option) *checkRun {
	c, _ := acptest.StartBinary(t, binary, append([]string{"--shell", "/bin/sh", "--kill-grace", "1s"}, args...), []string{noRaceExitDelay, ownState(t)}, opts...)
	r := &checkRun{t: t, c: c, cwd: t.TempDir()}
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	r.off, r.on = r.session(), r.session()
	r.set(r.on, "client_checks", "on")
	return r
}

func (r *checkRun) session() string {
	var res struct {
		SessionID string `json:"sessionId"`
	}
	r.c.MustCall("session/new", map[string]any{"cwd": r.cwd}, &res)
	return res.SessionID
}

func (r *checkRun) set(sid, id, value string) {
	r.t.Helper()
	r.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": id, "type": "id", "value": value}, nil)
}

func text(line string) []map[string]string {
	return []map[string]string{{"type": "text", "text": line}}
}

// prompt sends a prompt and waits for the idle end_turn that ends its turn.
func (r *checkRun) prompt(sid, line string) {
	r.t.Helper()
	last := r.last()
	if _, err := r.c.Call("session/prompt", map[string]any{"sessionId": sid, "prompt": text(line)}); err != nil {
		r.t.Fatalf("prompt %q: %v", line, err)
	}
	r.c.WaitAfter(last, "the end of "+line, func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.State() == "idle" && m.StopReason() == "end_turn"
	})
}

// last returns the last message received so far, or nil.
func (r *checkRun) last() *acptest.Msg {
	msgs := r.c.Transcript()
	if len(msgs) == 0 {
		return nil
	}
	return msgs[len(msgs)-1]
}

// refused sends a request that must fail with code.
func (r *checkRun) refused(method string, params any, code int) {
	r.t.Helper()
	if _, err := r.c.Call(method, params); err == nil || err.Code != code {
		r.t.Fatalf("%s answered %v, want error %d as always", method, err, code)
	}
}

// ask makes sid ask before each command, sends line and returns the
// permission request.
func (r *checkRun) ask(sid, line string) *acptest.Msg {
	r.t.Helper()
	r.set(sid, "permission", "ask")
	last := r.last()
	r.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": text(line)})
	return r.c.WaitAfter(last, "the permission request for "+line, func(m *acptest.Msg) bool {
		return m.Method == "session/request_permission" && m.SessionID == sid
	})
}

// notices returns the client-check notices of session sid.
func (r *checkRun) notices(sid string) []*acptest.Msg {
	var out []*acptest.Msg
	for _, m := range r.c.Updates(sid) {
		if m.Kind == "notice" {
			out = append(out, m)
		}
	}
	return out
}

var (
	allow     = map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow"}}
	cancelled = map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}
)

// TestClientChecks: each client-side violation that shellagent checks,
// sent by a test client, is answered as always, and gives a warning
// notice that names the rule and quotes it in the session that has
// client_checks on, and nothing in the one that has it off.
func TestClientChecks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rule    string
		name    string // of the subtest, after the rule
		detail  string // a part of the notice's description
		perConn bool   // the violation names no session: it is committed once, on the connection
		tol     func(acptest.Violation) bool
		commit  func(r *checkRun, sid string)
	}{
		{rule: "terminal-cancel-not-advertised", commit: func(r *checkRun, sid string) {
			r.refused("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_9"}, -32602)
		}, detail: "never advertised cancel"},
		{rule: "terminal-cancel-not-advertised", name: "exited", commit: func(r *checkRun, sid string) {
			r.prompt(sid, "true")
			time.Sleep(2200 * time.Millisecond) // longer than a cancel that raced the exit may take
			r.refused("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"}, -32602)
		}, detail: "no longer advertises cancel"},
		{rule: "tool-call-cancel-not-advertised", commit: func(r *checkRun, sid string) {
			r.prompt(sid, "true") // a command's tool call never advertises cancel
			r.refused("tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": "call_1"}, -32602)
		}},
		{rule: "unsupported-content", commit: func(r *checkRun, sid string) {
			r.refused("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "image", "data": "AAAA", "mimeType": "image/png"}}}, -32602)
		}},
		{rule: "empty-prompt", commit: func(r *checkRun, sid string) {
			r.refused("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{}}, -32602)
		}},
		{rule: "resume-cwd", commit: func(r *checkRun, sid string) {
			r.refused("session/resume", map[string]string{"sessionId": sid, "cwd": "/"}, -32602)
		}},
		{rule: "closed-session", perConn: true, commit: func(r *checkRun, _ string) {
			gone := r.session()
			r.c.MustCall("session/close", map[string]string{"sessionId": gone}, nil)
			r.refused("session/prompt", map[string]any{"sessionId": gone, "prompt": text("true")}, -32002)
		}},
		{rule: "unsent-response", perConn: true, commit: func(r *checkRun, _ string) {
			r.c.SendRaw([]byte(`{"jsonrpc":"2.0","id":"perm_99","result":{"outcome":{"outcome":"cancelled"}}}`))
		}},
		{rule: "second-response", commit: func(r *checkRun, sid string) {
			req := r.ask(sid, "true")
			r.c.Respond(req.ID, allow)
			r.c.WaitAfter(req, "the allowed command's end", func(m *acptest.Msg) bool {
				return m.SessionID == sid && m.State() == "idle" && m.StopReason() == "end_turn"
			})
			r.c.Respond(req.ID, allow)
		}},
		{rule: "withdrawn-answer", commit: func(r *checkRun, sid string) {
			req := r.ask(sid, "true")
			r.c.Notify("session/cancel", map[string]string{"sessionId": sid})
			r.c.WaitAfter(req, "the withdrawal", func(m *acptest.Msg) bool { return m.Method == "$/cancel_request" })
			time.Sleep(1100 * time.Millisecond) // longer than an answer that crossed the withdrawal may take
			r.c.Respond(req.ID, allow)
		}},
		{rule: "listed-permission-cancelled", commit: func(r *checkRun, sid string) {
			req := r.ask(sid, "/bg sleep 30")
			r.c.Notify("session/cancel", map[string]string{"sessionId": sid})
			r.c.Respond(req.ID, cancelled)
			r.c.WaitAfter(req, "the refused command's tool call", func(m *acptest.Msg) bool {
				return m.SessionID == sid && m.Status() == "failed"
			})
		}, detail: "the request for the listed call_1 answered cancelled after session/cancel"},
		{rule: "listed-permission-cancelled", name: "scenario", commit: func(r *checkRun, sid string) {
			last := r.last()
			r.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": text("/scenario permission-cancel 5s")})
			ofSid := func(m *acptest.Msg) bool { return isPermission(m) && m.SessionID == sid }
			bg := r.c.WaitAfter(last, "the request for listed work", ofSid)
			fg := r.c.WaitAfter(bg, "the request for foreground work", ofSid)
			r.c.Notify("session/cancel", map[string]string{"sessionId": sid})
			r.c.WaitAfter(fg, "the foreground request withdrawn", isWithdrawal(fg)) // the cancel came in
			r.c.Respond(fg.ID, cancelled)
			r.c.Respond(bg.ID, cancelled)
			r.c.WaitAfter(fg, "the end of the scenario", func(m *acptest.Msg) bool {
				return m.SessionID == sid && strings.Contains(m.Text(), "Scenario permission-cancel is over")
			})
		}, detail: "the request for the listed call_1 answered cancelled after session/cancel"},
		{rule: "reused-id", tol: func(v acptest.Violation) bool { return strings.Contains(v.Text, "second response to request 500") },
			commit: func(r *checkRun, sid string) {
				last := r.last()
				r.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": text("sleep 30")})
				r.c.WaitAfter(last, "the foreground command", func(m *acptest.Msg) bool { return m.SessionID == sid && m.Kind == "terminal_update" })
				held := `{"jsonrpc":"2.0","id":500,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"true"}]}}`
				r.c.SendRaw([]byte(held))
				r.c.SendRaw([]byte(held)) // the first one is still held
				r.c.Notify("session/cancel", map[string]string{"sessionId": sid})
				r.c.WaitAfter(last, "the cancelled turn", func(m *acptest.Msg) bool {
					return m.SessionID == sid && m.StopReason() == "cancelled"
				})
			}},
	}
	for _, tc := range tests {
		t.Run(strings.TrimSuffix(tc.rule+"/"+tc.name, "/"), func(t *testing.T) {
			t.Parallel()
			var opts []acptest.Option
			if tc.tol != nil {
				opts = append(opts, acptest.WithTolerated(tc.tol))
			}
			r := startCheckRun(t, nil, opts...)
			if tc.perConn {
				tc.commit(r, "")
			} else {
				tc.commit(r, r.off)
				tc.commit(r, r.on)
			}
			// A turn of each session after the violation: a notice it
			// caused is queued before it.
			r.prompt(r.off, "/ps")
			r.prompt(r.on, "/ps")
			if n := r.notices(r.off); len(n) != 0 {
				t.Errorf("client_checks off, yet: %v", n)
			}
			n := r.notices(r.on)
			if len(n) != 1 {
				t.Fatalf("client_checks on: %d notices, want 1: %v", len(n), n)
			}
			checkNotice(t, n[0], tc.rule)
			if d, _ := n[0].Update["description"].(string); !strings.Contains(d, tc.detail) {
				t.Errorf("description %q, want it to say %q", d, tc.detail)
			}
			r.c.Check()
		})
	}
}

// checkNotice checks a client-check notice: a warning that names rule in
// its _meta and quotes a rule of the protocol.
func checkNotice(t *testing.T, m *acptest.Msg, rule string) {
	t.Helper()
	var n struct {
		Severity, Title, Description string
		Meta                         struct {
			Shellagent struct{ ClientCheck string }
		} `json:"_meta"`
	}
	raw, _ := json.Marshal(m.Update)
	if err := json.Unmarshal(raw, &n); err != nil {
		t.Fatal(err)
	}
	if n.Severity != "warning" || n.Meta.Shellagent.ClientCheck != rule || !strings.HasPrefix(n.Title, "Client check: ") ||
		!strings.Contains(n.Description, `"`) || !strings.Contains(n.Description, "client_checks") {
		t.Errorf("notice %s, want a warning for %s quoting the rule", raw, rule)
	}
}

// TestClientChecksFlag: --client-checks starts every session with the
// option on.
func TestClientChecksFlag(t *testing.T) {
	t.Parallel()
	c, _ := acptest.StartBinary(t, binary, []string{"--shell", "/bin/sh", "--client-checks"}, []string{noRaceExitDelay, ownState(t)})
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	var res struct {
		SessionID     string `json:"sessionId"`
		ConfigOptions []struct{ ConfigID, CurrentValue string }
	}
	c.MustCall("session/new", map[string]any{"cwd": t.TempDir()}, &res)
	on := false
	for _, o := range res.ConfigOptions {
		on = on || o.ConfigID == "client_checks" && o.CurrentValue == "on"
	}
	if !on {
		t.Fatalf("config options %+v, want client_checks on", res.ConfigOptions)
	}
	if _, err := c.Call("terminal/cancel", map[string]string{"sessionId": res.SessionID, "terminalId": "term_1"}); err == nil {
		t.Fatal("terminal/cancel of an unknown terminal accepted")
	}
	checkNotice(t, c.WaitFor("the notice", func(m *acptest.Msg) bool { return m.Kind == "notice" }), "terminal-cancel-not-advertised")
}

// A v1 client must answer every pending permission request cancelled
// when it sends session/cancel (schema.v1's RequestPermissionOutcome):
// the v2 rule that a request for listed work stays open is not checked on
// it. Before, such a v1 client was warned.
func TestClientChecksLeaveV1CancelAlone(t *testing.T) {
	t.Parallel()
	c, _ := acptest.StartBinary(t, binary, []string{"--shell", "/bin/sh", "--kill-grace", "1s", "--client-checks"}, []string{noRaceExitDelay, ownState(t)}, acptest.WithProtocolV1())
	r := &checkRun{t: t, c: c, cwd: t.TempDir()}
	c.MustCall("initialize", map[string]any{"protocolVersion": 1, "clientInfo": map[string]string{"name": "test", "version": "1"}}, nil)
	var res struct {
		SessionID string `json:"sessionId"`
	}
	c.MustCall("session/new", map[string]any{"cwd": r.cwd, "mcpServers": []any{}}, &res)
	sid := res.SessionID
	req := r.ask(sid, "/bg sleep 30")
	c.Notify("session/cancel", map[string]string{"sessionId": sid})
	c.Respond(req.ID, cancelled)
	c.WaitAfter(req, "the refused command's tool call", func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.Status() == "failed"
	})
	if _, err := c.Call("session/prompt", map[string]any{"sessionId": sid, "prompt": text("/ps")}); err != nil {
		t.Fatalf("/ps: %v", err)
	}
	for _, m := range c.Updates(sid) { // a notice reaches a v1 client as a message
		if strings.Contains(string(m.Raw), "listed-permission-cancelled") || strings.Contains(string(m.Raw), "Client check") {
			t.Errorf("a v1 client that answered cancelled after session/cancel was warned: %s", m.Raw)
		}
	}
}
