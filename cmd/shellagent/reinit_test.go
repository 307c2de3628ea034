package main

import (
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"

	"shellagent/protocol/acptest"
)

// initialize again: the v2 schema lets a client repeat initialize before
// its first other request, and makes the latest successful one
// authoritative. The strict client follows the version each answer
// negotiates, so every message is validated against the schema of the
// version in use, and Check applies that version's rules.

// startUninitialized is the binary with a strict client that has sent
// nothing yet; v1 makes it start out as a v1 client.
func startUninitialized(t *testing.T, v1 bool) *agent {
	t.Helper()
	marker := "SHELLAGENT_TEST=" + rand.Text()
	opts := []acptest.Option{acptest.WithCheckOnClose()}
	if v1 {
		opts = append(opts, acptest.WithProtocolV1())
	}
	c, cmd := acptest.StartBinary(t, binary, []string{"--shell", "/bin/sh", "--containment", testMode}, []string{marker, noRaceExitDelay, ownState(t)}, opts...)
	return &agent{t: t, c: c, cmd: cmd, marker: marker, cwd: t.TempDir()}
}

// initV1 sends a v1 initialize that advertises _meta.terminal_output
// (meta) or not, and returns the version answered.
func (a *agent) initV1(meta bool) int {
	a.t.Helper()
	caps := map[string]any{}
	if meta {
		caps["_meta"] = map[string]any{"terminal_output": true}
	}
	return a.initialize(map[string]any{"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": map[string]string{"name": "t", "version": "1"}})
}

// initV2 sends a v2 initialize with capabilities caps (none if nil) and
// returns the version answered.
func (a *agent) initV2(caps map[string]any) int {
	a.t.Helper()
	p := map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "t", "version": "1"}}
	if caps != nil {
		p["capabilities"] = caps
	}
	return a.initialize(p)
}

func (a *agent) initialize(p map[string]any) int {
	a.t.Helper()
	var res struct{ ProtocolVersion int }
	a.c.MustCall("initialize", p, &res)
	return res.ProtocolVersion
}

// noneOf fails the test for each session/update whose kind, or _meta
// member, is one of names.
func (a *agent) noneOf(names ...string) {
	a.t.Helper()
	for _, m := range a.c.Transcript() {
		for _, n := range names {
			if m.Method == "session/update" && (m.Kind == n || m.Meta(n) != nil) {
				a.t.Errorf("%s sent: %s", n, m.Raw)
			}
		}
	}
}

// v2Turn runs line in a new v2 session to its end and checks its output.
func (a *agent) v2Turn(line, says string) {
	a.t.Helper()
	sid := a.session()
	a.prompt(sid, line)
	a.waitOutput(sid, "term_1", says)
	a.c.WaitFor("end_turn", func(m *acptest.Msg) bool { return m.State() == "idle" && m.StopReason() == "end_turn" })
}

// A v1 initialize followed by a v2 one: the connection speaks v2, and
// nothing of v1 (tool_call, _meta terminal flow) reaches its wire.
func TestInitializeV1ThenV2(t *testing.T) {
	t.Parallel()
	a := startUninitialized(t, true)
	if v := a.initV1(true); v != 1 {
		t.Fatalf("v1 initialize answered protocolVersion %d", v)
	}
	if v := a.initV2(nil); v != 2 {
		t.Fatalf("v2 initialize answered protocolVersion %d", v)
	}
	a.v2Turn("echo spoken in v2", "spoken in v2")
	a.noneOf("tool_call", "terminal_info", "terminal_output", "terminal_exit")
}

// A v2 initialize followed by a v1 one: the connection speaks v1, with
// the capabilities of the v1 one.
func TestInitializeV2ThenV1(t *testing.T) {
	t.Parallel()
	a := startUninitialized(t, false)
	if v := a.initV2(nil); v != 2 {
		t.Fatalf("v2 initialize answered protocolVersion %d", v)
	}
	if v := a.initV1(true); v != 1 {
		t.Fatalf("v1 initialize answered protocolVersion %d", v)
	}
	v1 := &v1Agent{agent: a, meta: true}
	sid := v1.session()
	v1.turn(sid, "echo spoken in v1", "end_turn")
	if out := string(a.c.Output(sid, "term_1")); !strings.Contains(out, "spoken in v1") {
		t.Errorf("terminal output %q", out)
	}
	a.noneOf("state_update", "terminal_update", "terminal_output_chunk")
}

// Two v1 initializes: the capabilities are the latest's. Without
// _meta.terminal_output, no terminal flow is sent (the strict client's
// rule 12, checked when the test ends).
func TestInitializeV1TwiceTakesTheLatestCapabilities(t *testing.T) {
	t.Parallel()
	a := startUninitialized(t, true)
	a.initV1(true)
	if v := a.initV1(false); v != 1 {
		t.Fatalf("v1 initialize answered protocolVersion %d", v)
	}
	v1 := &v1Agent{agent: a}
	sid := v1.session()
	v1.turn(sid, "echo plain", "end_turn")
	a.noneOf("terminal_info", "terminal_output", "terminal_exit")
}

// Two v2 initializes with different capabilities: both are answered
// alike (shellagent reads none of a v2 client's capabilities), and the
// connection speaks v2.
func TestInitializeV2TwiceWithOtherCapabilities(t *testing.T) {
	t.Parallel()
	a := startUninitialized(t, false)
	a.initV2(map[string]any{"elicitation": map[string]any{}, "_meta": map[string]any{"x": 1}})
	first := a.c.Transcript()[len(a.c.Transcript())-1]
	if v := a.initV2(map[string]any{}); v != 2 {
		t.Fatalf("v2 initialize answered protocolVersion %d", v)
	}
	second := a.c.Transcript()[len(a.c.Transcript())-1]
	if string(first.Result) != string(second.Result) {
		t.Errorf("the answers differ:\n%s\n%s", first.Result, second.Result)
	}
	a.v2Turn("echo still v2", "still v2")
}

// Once the client has sent another request, an initialize that asks for
// the other version is refused -32600, one of the same version is
// answered as before, and the connection goes on as it was.
func TestInitializeAfterAnotherRequestIsRefused(t *testing.T) {
	t.Parallel()
	a := startUninitialized(t, false)
	a.initV2(nil)
	sid := a.session()
	// Another version: refused, the connection speaks v2 on.
	if _, err := a.c.Call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}); err == nil || err.Code != -32600 || !strings.Contains(err.Message, "initialize") {
		t.Errorf("initialize v1 after session/new answered %v, want -32600", err)
	}
	// The same version: answered, as before, and nothing changes.
	var res struct {
		ProtocolVersion int `json:"protocolVersion"`
	}
	if raw, err := a.c.Call("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "t", "version": "1"}}); err != nil || json.Unmarshal(raw, &res) != nil || res.ProtocolVersion != 2 {
		t.Errorf("initialize v2 again after session/new: %s, %v; want it answered with version 2", raw, err)
	}
	a.prompt(sid, "echo on")
	a.waitOutput(sid, "term_1", "on")
}
