package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// ACP v1 over the wire: the binary driven by the strict client in v1 mode,
// which validates every message against testdata/acp/schema.v1.json and,
// when the test ends, the v1 rules (tool calls announced before updated,
// the _meta terminal flow, and none of it without the capability).

// v1Agent is the binary with a v1 client that advertises
// clientCapabilities._meta.terminal_output (meta) or not.
type v1Agent struct {
	*agent
	meta bool
}

func startV1(t *testing.T, meta bool, args ...string) *v1Agent {
	t.Helper()
	marker := "SHELLAGENT_TEST=" + rand.Text()
	c, cmd := acptest.StartBinary(t, binary, append([]string{"--shell", "/bin/sh"}, args...), []string{marker, noRaceExitDelay, ownState(t)},
		acptest.WithProtocolV1(), acptest.WithCheckOnClose())
	a := &v1Agent{agent: &agent{t: t, c: c, cmd: cmd, marker: marker, cwd: t.TempDir()}, meta: meta}
	caps := map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false}
	if meta {
		caps["_meta"] = map[string]any{"terminal_output": true}
	}
	var res struct {
		ProtocolVersion   int
		AuthMethods       []any
		AgentInfo         struct{ Name string }
		AgentCapabilities struct {
			LoadSession         bool
			SessionCapabilities map[string]any
		}
	}
	c.MustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": map[string]string{"name": "v1test", "version": "1"}}, &res)
	caps2 := res.AgentCapabilities.SessionCapabilities
	if res.ProtocolVersion != 1 || res.AuthMethods == nil || len(res.AuthMethods) != 0 || res.AgentInfo.Name != "shellagent" ||
		!res.AgentCapabilities.LoadSession || caps2["list"] == nil || caps2["resume"] == nil || caps2["close"] == nil {
		t.Fatalf("v1 initialize answered %+v", res)
	}
	return a
}

// session opens a session; its slash commands follow the response.
func (a *v1Agent) session() string {
	a.t.Helper()
	id := a.c.Send("session/new", map[string]any{"cwd": a.cwd, "mcpServers": []any{}})
	resp := a.c.Wait(id)
	var res struct {
		SessionID     string
		ConfigOptions []struct{ ID, CurrentValue string }
	}
	if resp.Error != nil || json.Unmarshal(resp.Result, &res) != nil || res.SessionID == "" || len(res.ConfigOptions) != 5 || res.ConfigOptions[0].ID != "foreground_timeout" {
		a.t.Fatalf("session/new answered %s", resp)
	}
	cmds := a.c.WaitAfter(resp, "available_commands_update", func(m *acptest.Msg) bool { return m.Kind == "available_commands_update" })
	var names []string
	for _, c := range cmds.Update["availableCommands"].([]any) {
		names = append(names, c.(map[string]any)["name"].(string))
	}
	if !slices.Equal(names, []string{"bg", "ps", "stop", "after", "every", "send", "keys", "resize", "tail", "wait", "watch", "pause", "resume", "scenario", "up", "down", "restart", "status", "logs"}) {
		a.t.Errorf("available commands %v", names)
	}
	return res.SessionID
}

// prompt sends a prompt and returns its request id.
func (a *v1Agent) prompt(sid, line string) int64 {
	return a.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": line}}})
}

// stopReason waits for a prompt's answer.
func (a *v1Agent) stopReason(id int64) (string, *acptest.Msg) {
	a.t.Helper()
	m := a.c.Wait(id)
	var res struct{ StopReason string }
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
		a.t.Fatalf("session/prompt answered %s", m)
	}
	return res.StopReason, m
}

// turn runs a prompt to the end of its turn and checks the stop reason.
func (a *v1Agent) turn(sid, line, want string) *acptest.Msg {
	a.t.Helper()
	got, m := a.stopReason(a.prompt(sid, line))
	if got != want {
		a.t.Fatalf("%q: stopReason %q, want %q", line, got, want)
	}
	return m
}

// set sets a config option the v1 way: a value id without a type.
func (a *v1Agent) set(sid, id, value string) {
	a.t.Helper()
	var res struct {
		ConfigOptions []struct{ ID, CurrentValue string }
	}
	a.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": id, "value": value}, &res)
	for _, o := range res.ConfigOptions {
		if o.ID == id && o.CurrentValue != value {
			a.t.Fatalf("%s is %s after setting %s", id, o.CurrentValue, value)
		}
	}
}

// update waits for a session update after after that satisfies pred.
func (a *v1Agent) update(after *acptest.Msg, desc string, pred func(*acptest.Msg) bool) *acptest.Msg {
	a.t.Helper()
	return a.c.WaitAfter(after, desc, func(m *acptest.Msg) bool { return m.Method == "session/update" && pred(m) })
}

// final waits for the final status of a tool call.
func (a *v1Agent) final(after *acptest.Msg, call string) *acptest.Msg {
	a.t.Helper()
	return a.update(after, call+" final", func(m *acptest.Msg) bool {
		return m.ToolCallID() == call && (m.Status() == "completed" || m.Status() == "failed")
	})
}

// message waits for an agent_message_chunk that contains text.
func (a *v1Agent) message(after *acptest.Msg, text string) *acptest.Msg {
	a.t.Helper()
	return a.update(after, "agent message "+text, func(m *acptest.Msg) bool {
		return m.Kind == "agent_message_chunk" && strings.Contains(m.Text(), text)
	})
}

// exit waits for a terminal_exit.
func (a *v1Agent) exit(after *acptest.Msg, term string) map[string]any {
	a.t.Helper()
	m := a.update(after, term+" terminal_exit", func(m *acptest.Msg) bool {
		e := m.Meta("terminal_exit")
		return e != nil && e["terminal_id"] == term
	})
	return m.Meta("terminal_exit")
}

// bothModes runs a v1 test with and without _meta.terminal_output.
func bothModes(t *testing.T, run func(t *testing.T, meta bool)) {
	for _, meta := range []bool{true, false} {
		name := "terminal_output"
		if !meta {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t, meta)
		})
	}
}

func TestV1Foreground(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta)
		sid := a.session()
		resp := a.turn(sid, `printf 'out\n'; exit 3`, "end_turn")
		tr := a.c.Transcript()
		call := a.update(nil, "tool_call", func(m *acptest.Msg) bool { return m.Kind == "tool_call" })
		if call.ToolCallID() != "call_1" || call.Update["kind"] != "execute" || call.Status() != "in_progress" || call.Update["title"] != `printf 'out\n'; exit 3` {
			t.Errorf("tool_call %s", call)
		}
		final := a.final(call, "call_1")
		if final.Status() != "failed" || final.Seq > resp.Seq {
			t.Errorf("final %s, before the answer #%d", final, resp.Seq)
		}
		if raw, _ := final.Update["rawOutput"].(map[string]any); raw["exitCode"] != 3.0 {
			t.Errorf("rawOutput %v", final.Update["rawOutput"])
		}
		for _, m := range tr[resp.Seq+1:] {
			if m.SessionID == sid {
				t.Errorf("after the turn's answer: %s", m)
			}
		}
		if meta {
			info := call.Meta("terminal_info")
			if info["terminal_id"] != "term_1" || info["cwd"] != a.cwd || call.Text() != "" {
				t.Errorf("terminal_info %v in %s", info, call)
			}
			if got := string(a.c.Output(sid, "term_1")); got != "out\r\n" {
				t.Errorf("output %q", got)
			}
			exit := a.exit(call, "term_1")
			if exit["exit_code"] != 3.0 || exit["signal"] != nil {
				t.Errorf("terminal_exit %v", exit)
			}
			return
		}
		if call.HasKey("content") || call.HasKey("_meta") {
			t.Errorf("terminal content without the capability: %s", call)
		}
		if want := "Output (5 bytes, escape sequences removed):\n```\nout\n```"; final.Text() != want {
			t.Errorf("final content %q, want %q", final.Text(), want)
		}
	})
}

func TestV1PlainTail(t *testing.T) {
	t.Parallel()
	a := startV1(t, false)
	sid := a.session()
	a.turn(sid, `printf '\033[31mred\033[0m\nstep 1\rstep 2\n'; seq 1 2000`, "end_turn")
	text := a.final(nil, "call_1").Text()
	if !strings.HasPrefix(text, "Output (the last 4.0 KiB of 10.7 KiB, escape sequences removed):\n```\n") ||
		!strings.HasSuffix(text, "\n1999\n2000\n```") || strings.Contains(text, "\n1\n") || len(text) > 4200 {
		t.Errorf("tail %q", text)
	}
	a.turn(sid, `printf '\033[31mred\033[0m\nstep 1\rstep 2\n'`, "end_turn")
	if text := a.final(nil, "call_2").Text(); !strings.Contains(text, "```\nred\nstep 2\n```") {
		t.Errorf("escapes and carriage returns: %q", text)
	}
}

func TestV1Detach(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta, "--kill-grace", "1s")
		sid := a.session()
		a.set(sid, "foreground_timeout", "1s")
		resp := a.turn(sid, "echo before; sleep 2; echo after; exec sleep 30", "end_turn")
		done := a.final(nil, "call_1")
		want := "Still running after the 1s foreground timeout: moved to the background as term_1; /ps lists it, /stop term_1 stops it."
		if done.Status() != "completed" || !strings.HasPrefix(done.Text(), want) || done.Seq > resp.Seq {
			t.Errorf("detached %s, want %q before the answer", done, want)
		}
		if meta {
			// Its output keeps flowing to its tool call.
			a.c.WaitFor("after", func(*acptest.Msg) bool { return string(a.c.Output(sid, "term_1")) == "before\r\nafter\r\n" })
		} else if !strings.Contains(done.Text(), "```\nbefore\n```") {
			t.Errorf("tail %q", done.Text())
		}
		ps := a.turn(sid, "/ps", "end_turn")
		if m := a.message(resp, "term_1  terminal  echo before"); m.Seq > ps.Seq {
			t.Errorf("/ps listed after its answer")
		}
		stop := a.turn(sid, "/stop term_1", "end_turn")
		a.message(ps, "Stopping term_1: SIGTERM sent")
		if meta {
			if exit := a.exit(stop, "term_1"); exit["signal"] != "SIGTERM" || exit["exit_code"] != nil {
				t.Errorf("terminal_exit %v", exit)
			}
		} else {
			a.waitListed(sid, "No background work.")
		}
	})
}

// waitListed asks /ps until its answer contains want.
func (a *v1Agent) waitListed(sid, want string) {
	a.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := a.turn(sid, "/ps", "end_turn")
		if strings.Contains(a.lastMessage(resp), want) {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("/ps never said %q: %s", want, a.lastMessage(resp))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lastMessage returns the text of the last agent message before m.
func (a *v1Agent) lastMessage(m *acptest.Msg) string {
	tr := a.c.Transcript()
	for i := m.Seq; i >= 0; i-- {
		if tr[i].Kind == "agent_message_chunk" {
			return tr[i].Text()
		}
	}
	return ""
}

func TestV1BgAndHeld(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta)
		sid := a.session()
		first := a.prompt(sid, "echo working; sleep 30")
		a.c.WaitFor("call_1 running", func(m *acptest.Msg) bool { return m.Kind == "tool_call" && m.ToolCallID() == "call_1" })
		held := a.prompt(sid, "echo held")   // waits for the foreground
		bg := a.turn(sid, "/bg", "end_turn") // acts at once
		stop, resp := a.stopReason(first)
		done := a.final(nil, "call_1")
		if stop != "end_turn" || !strings.HasPrefix(done.Text(), "Detached by /bg: moved to the background as term_1; /ps lists it, /stop term_1 stops it.") || done.Seq > resp.Seq {
			t.Errorf("first prompt %s %q after %s", stop, done.Text(), done)
		}
		if _, h := a.stopReason(held); h.Seq < resp.Seq || h.Seq < bg.Seq {
			t.Errorf("the held prompt was answered before the one it waited for")
		}
		if got := a.final(nil, "call_2"); got.Status() != "completed" {
			t.Errorf("held command %s", got)
		}
		a.turn(sid, "/stop term_1", "end_turn")
	})
}

func TestV1Cancel(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta, "--kill-grace", "1s")
		sid := a.session()
		a.turn(sid, "/bg sleep 30", "end_turn")
		fg := a.prompt(sid, "echo fg; sleep 30")
		running := a.c.WaitFor("call_2", func(m *acptest.Msg) bool { return m.Kind == "tool_call" && m.ToolCallID() == "call_2" })
		held := a.prompt(sid, "echo never")
		a.c.Notify("session/cancel", map[string]any{"sessionId": sid})
		if stop, _ := a.stopReason(held); stop != "cancelled" {
			t.Errorf("held prompt: %s", stop)
		}
		stop, resp := a.stopReason(fg)
		final := a.final(running, "call_2")
		if stop != "cancelled" || final.Status() != "failed" || final.Seq > resp.Seq {
			t.Errorf("cancelled turn: %s, %s", stop, final)
		}
		if meta {
			if exit := a.exit(running, "term_2"); exit["signal"] != "SIGTERM" {
				t.Errorf("terminal_exit %v", exit)
			}
		}
		// Background work runs on.
		ps := a.turn(sid, "/ps", "end_turn")
		if text := a.lastMessage(ps); !strings.Contains(text, "term_1  terminal  sleep 30") || strings.Contains(text, "term_2") {
			t.Errorf("/ps after the cancel: %q", text)
		}
		for _, m := range a.c.Transcript() {
			if m.Kind == "tool_call" && m.ToolCallID() == "call_3" {
				t.Errorf("the held prompt ran: %s", m)
			}
		}
	})
}

func TestV1Close(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta, "--kill-grace", "1s")
		sid := a.session()
		a.turn(sid, "/bg sleep 30", "end_turn")
		fg := a.prompt(sid, "sleep 30")
		a.c.WaitFor("call_2", func(m *acptest.Msg) bool { return m.Kind == "tool_call" && m.ToolCallID() == "call_2" })
		a.waitProcesses(3) // the agent and two sleeps
		closed := a.c.Send("session/close", map[string]any{"sessionId": sid})
		stop, resp := a.stopReason(fg)
		c := a.c.Wait(closed)
		if stop != "cancelled" || c.Error != nil || string(c.Result) != "{}" || c.Seq < resp.Seq {
			t.Errorf("close: prompt %s #%d, close %s", stop, resp.Seq, c)
		}
		if meta {
			for _, term := range []string{"term_1", "term_2"} {
				m := a.update(nil, term+" terminal_exit", func(m *acptest.Msg) bool {
					e := m.Meta("terminal_exit")
					return e != nil && e["terminal_id"] == term
				})
				if m.Meta("terminal_exit")["signal"] != "SIGTERM" || m.Seq > c.Seq {
					t.Errorf("%s: %s, the close response is #%d", term, m, c.Seq)
				}
			}
		}
		if left := a.processes(); len(left) != 1 {
			t.Errorf("processes after close: %v", left)
		}
		// A closed session is history (listed past, if at all), never live.
		var list struct{ Sessions []listedSession }
		a.c.MustCall("session/list", map[string]any{}, &list)
		if i := slices.IndexFunc(list.Sessions, func(s listedSession) bool { return s.Meta.Shellagent.State != "past" }); i >= 0 {
			t.Errorf("a live session after close: %+v", list.Sessions[i])
		}
	})
}

func TestV1Permission(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta)
		sid := a.session()
		a.set(sid, "permission", "ask")
		id := a.prompt(sid, "echo allowed")
		req := a.c.WaitFor("the permission request", func(m *acptest.Msg) bool { return m.Method == "session/request_permission" })
		var p struct {
			ToolCall struct{ ToolCallID, Title, Kind string }
			Options  []struct{ OptionID, Kind string }
		}
		if json.Unmarshal(req.Params, &p) != nil || p.ToolCall.ToolCallID != "call_1" || p.ToolCall.Title != "echo allowed" || len(p.Options) != 2 {
			t.Fatalf("permission request %s", req)
		}
		a.c.Respond(req.ID, map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": p.Options[0].OptionID}})
		if stop, _ := a.stopReason(id); stop != "end_turn" {
			t.Errorf("stopReason %s", stop)
		}
		if meta {
			// Announced pending, then again with its terminal.
			again := a.update(req, "call_1 again", func(m *acptest.Msg) bool { return m.Kind == "tool_call" && m.ToolCallID() == "call_1" })
			if again.Meta("terminal_info")["terminal_id"] != "term_1" || string(a.c.Output(sid, "term_1")) != "allowed\r\n" {
				t.Errorf("announced again %s, output %q", again, a.c.Output(sid, "term_1"))
			}
		} else if text := a.final(req, "call_1").Text(); !strings.Contains(text, "```\nallowed\n```") {
			t.Errorf("final text %q", text)
		}
	})
}

// TestV1Resume: after session/resume, on the connection that created
// the session too, live work is announced again as a tool_call (with its
// terminal_info, and the terminal redrawn, screen cleared first), since a
// client that resumes knows nothing of the session; nothing of it comes
// before the response.
func TestV1Resume(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta, "--kill-grace", "1s")
		sid := a.session()
		a.turn(sid, "echo bg; touch printed; exec sleep 30 &", "end_turn")
		a.waitFile("printed")
		if meta {
			a.c.WaitFor("output", func(*acptest.Msg) bool { return string(a.c.Output(sid, "term_1")) == "bg\r\n" })
		}
		var list struct {
			Sessions []struct{ SessionID, Cwd string }
		}
		a.c.MustCall("session/list", map[string]any{"cwd": a.cwd}, &list)
		if len(list.Sessions) != 1 || list.Sessions[0].SessionID != sid {
			t.Fatalf("session/list %+v", list)
		}
		before := len(a.c.Transcript())
		id := a.c.Send("session/resume", map[string]any{"sessionId": sid, "cwd": a.cwd, "mcpServers": []any{}})
		resp := a.c.Wait(id)
		if resp.Error != nil {
			t.Fatalf("resume: %v", resp.Error)
		}
		for _, m := range a.c.Transcript()[before:resp.Seq] {
			if m.SessionID == sid {
				t.Errorf("before the resume response: %s", m)
			}
		}
		a.update(resp, "commands", func(m *acptest.Msg) bool { return m.Kind == "available_commands_update" })
		again := a.update(resp, "call_1 again", func(m *acptest.Msg) bool { return m.ToolCallID() == "call_1" })
		if again.Kind != "tool_call" || again.Status() != "completed" || (again.Meta("terminal_info") != nil) != meta {
			t.Errorf("call_1 resumed as %s", again)
		}
		if meta {
			// The live terminal, replaced: the screen is cleared and shows
			// it again.
			a.c.WaitFor("replacement", func(*acptest.Msg) bool {
				return strings.HasSuffix(string(a.c.Output(sid, "term_1")), "\x1b[H\x1b[2J\x1b[3Jbg\r\n")
			})
		} else {
			// Its text, with the tail of the output read from the ring,
			// follows it (with the terminal's replacement).
			a.update(again, "call_1's text", func(m *acptest.Msg) bool {
				return m.ToolCallID() == "call_1" && strings.Contains(m.Text(), "```\nbg\n```")
			})
		}
		a.turn(sid, "/stop term_1", "end_turn")
	})
}

// TestV1Multibyte splits é, 漢 and 😀 across output chunks: each arrives
// intact, never as U+FFFD.
func TestV1Multibyte(t *testing.T) {
	t.Parallel()
	a := startV1(t, true)
	sid := a.session()
	// Each printf is a separate write to the PTY, a quarter of a second
	// apart, so each usually reaches the agent as a chunk of its own.
	parts := []string{`a\303`, `\251b\346`, `\274`, `\242c\360\237`, `\230`, `\200d\n`}
	var cmd []string
	for _, p := range parts {
		cmd = append(cmd, fmt.Sprintf("printf '%s'", p))
	}
	a.turn(sid, strings.Join(cmd, "; sleep 0.25; "), "end_turn")
	if got, want := string(a.c.Output(sid, "term_1")), "aéb漢c😀d\r\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	var datas []string
	for _, m := range a.c.Transcript() {
		if out := m.Meta("terminal_output"); out != nil {
			datas = append(datas, out["data"].(string))
		}
	}
	for _, d := range datas {
		if strings.ContainsRune(d, '\uFFFD') {
			t.Errorf("a chunk with U+FFFD: %q", d)
		}
	}
	// In one chunk, nothing was split and the test would show nothing. The
	// writes are 1.25 s apart in all, so they cannot all arrive at once.
	if len(datas) < 2 {
		t.Errorf("the output came in %d terminal_output chunks; the test needs it split: %q", len(datas), datas)
	}
	t.Logf("terminal_output data, chunk by chunk: %q", datas)
}

// TestV1FlowControl: a v1 client that keeps pausing gets every byte of a
// terminal whose output is 80 times its ring, as v2 clients do: the same
// writer holds the PTY while the client is behind. Long
// (SHELLAGENT_LONG=1): the quick run checks that writer with a v2 client
// in TestPausingClientGetsEveryByte.
func TestV1FlowControl(t *testing.T) {
	testloop.Long(t, "80 rings through a pausing v1 client")
	t.Parallel()
	cmd, stdin, stdout, marker := startPiped(t, binary, []string{"--shell", "/bin/sh", "--foreground-timeout", "0", "--scrollback", "64KiB", "--stall-timeout", "30s"})
	out := newPacedReader(stdout, 0)
	c := acptest.New(t, out, stdin, acptest.WithProtocolV1(), acptest.WithTimeout(90*time.Second))
	a := &v1Agent{agent: &agent{t: t, c: c, cmd: cmd, marker: marker, cwd: t.TempDir()}, meta: true}
	t.Cleanup(func() {
		out.pause(false)
		c.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("agent: %v", err)
		}
		c.Check()
	})
	c.MustCall("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{"_meta": map[string]any{"terminal_output": true}}}, nil)
	sid := a.session()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			out.pause(true)
			time.Sleep(250 * time.Millisecond)
			out.pause(false)
		}
	}()
	const n = 300_000
	a.turn(sid, fmt.Sprintf("seq 1 %d | sed 's/$/ é漢😀/'; sleep 1", n), "end_turn")
	close(stop)
	<-done
	var want strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&want, "%d é漢😀\r\n", i)
	}
	got := string(c.Output(sid, "term_1"))
	if got != want.String() {
		i := 0
		for i < min(len(got), want.Len()) && got[i] == want.String()[i] {
			i++
		}
		t.Errorf("client got %d bytes, want %d; first difference at %d", len(got), want.Len(), i)
	}
	updates := 0
	for _, m := range c.Transcript() {
		if m.Meta("terminal_output") != nil {
			updates++
		}
	}
	t.Logf("%d bytes in %d terminal_output updates", len(got), updates)
}

// v1Replayed describes a session's updates from the history that a load
// replays: the updates of sid after the request at seq before, up to the
// response, one line each ("user TEXT", "agent TEXT", "tool_call ID
// STATUS [info]", "text ID", "output TERM" for a run of output, "exit
// TERM"), and each tool call's text by id.
func v1Replayed(msgs []*acptest.Msg, sid string) (lines []string, texts map[string]string) {
	texts = map[string]string{}
	for _, m := range msgs {
		if m.SessionID != sid || m.Method != "session/update" {
			continue
		}
		var l string
		switch out, exit := m.Meta("terminal_output"), m.Meta("terminal_exit"); {
		case m.Kind == "user_message_chunk":
			l = "user " + m.Text()
		case m.Kind == "agent_message_chunk":
			l = "agent " + m.Text()
		case m.Kind == "tool_call":
			l = "tool_call " + m.ToolCallID() + " " + m.Status()
			if m.Meta("terminal_info") != nil {
				l += " info"
			}
			texts[m.ToolCallID()] = m.Text()
		case out != nil:
			l = "output " + out["terminal_id"].(string)
		case exit != nil:
			l = "exit " + exit["terminal_id"].(string)
		default:
			l = "text " + m.ToolCallID()
			texts[m.ToolCallID()] = m.Text()
		}
		if n := len(lines); n > 0 && strings.HasPrefix(l, "output ") && lines[n-1] == l {
			continue
		}
		lines = append(lines, l)
	}
	return lines, texts
}

// load sends session/load and returns the response and the replayed
// updates of the session before it (see v1Replayed).
func (a *v1Agent) load(sid string) (*acptest.Msg, []string, map[string]string) {
	a.t.Helper()
	before := len(a.c.Transcript())
	resp := a.c.Wait(a.c.Send("session/load", map[string]any{"sessionId": sid, "cwd": a.cwd, "mcpServers": []any{}}))
	if resp.Error != nil {
		a.t.Fatalf("session/load: %v", resp.Error)
	}
	var res struct{ ConfigOptions []struct{ ID string } }
	if json.Unmarshal(resp.Result, &res) != nil || len(res.ConfigOptions) != 5 {
		a.t.Errorf("session/load answered %s", resp)
	}
	a.update(resp, "commands", func(m *acptest.Msg) bool { return m.Kind == "available_commands_update" })
	lines, texts := v1Replayed(a.c.Transcript()[before:resp.Seq], sid)
	return resp, lines, texts
}

// v1Trigger is a shell loop that waits for the file name to appear in the
// command's directory: output that a test releases when it chooses.
func v1Trigger(name string) string {
	return "while [ ! -e " + name + " ]; do sleep 0.02; done"
}

// release creates the file that v1Trigger waits for.
func (a *v1Agent) release(name string) {
	a.t.Helper()
	if err := os.WriteFile(filepath.Join(a.cwd, name), nil, 0o644); err != nil {
		a.t.Fatal(err)
	}
}

// waitFile waits for a command to create the file name in its directory.
func (a *v1Agent) waitFile(name string) {
	a.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(a.cwd, name)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("no %s after 20s", name)
		}
	}
}

// TestV1Load: session/load on the connection that created the session
// replays its history before the response, in order (the prompts, the
// agent's messages, each tool call announced again at its current state
// with its terminal redrawn, or its output's tail), then live output goes
// on; a second load shows what was written since. Loading an unknown
// session, or with another cwd, is refused and sends nothing.
func TestV1Load(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta, "--kill-grace", "1s")
		sid := a.session()
		a.turn(sid, "echo one", "end_turn")
		a.turn(sid, "/ps", "end_turn")
		bg := "/bg echo two; touch printed; " + v1Trigger("go") + "; echo three; touch printed3; exec sleep 30"
		a.turn(sid, bg, "end_turn")
		a.waitFile("printed")
		if meta {
			a.c.WaitFor("two", func(*acptest.Msg) bool { return string(a.c.Output(sid, "term_2")) == "two\r\n" })
		}

		before := len(a.c.Transcript())
		for _, bad := range []struct {
			sid, cwd string
			code     int
		}{
			{"sess_unknown", a.cwd, -32002}, // as session/resume answers
			{sid, t.TempDir(), -32602},
		} {
			m := a.c.Wait(a.c.Send("session/load", map[string]any{"sessionId": bad.sid, "cwd": bad.cwd, "mcpServers": []any{}}))
			if m.Error == nil || m.Error.Code != bad.code {
				t.Errorf("session/load of %s in %s answered %s, want %d", bad.sid, bad.cwd, m, bad.code)
			}
		}
		a.c.MustCall("session/list", map[string]any{}, nil) // a round trip: what the refusals caused is in
		if lines, _ := v1Replayed(a.c.Transcript()[before:], sid); len(lines) > 0 {
			t.Errorf("refused loads sent %q", lines)
		}

		tool := func(call string) string {
			if meta {
				return "tool_call " + call + " completed info"
			}
			return "tool_call " + call + " completed"
		}
		term := func(id string, exited bool) []string {
			switch {
			case !meta:
				return []string{"text call_" + id[len("term_"):]}
			case exited:
				return []string{"output " + id, "exit " + id}
			}
			return []string{"output " + id}
		}
		want := slices.Concat(
			[]string{"user echo one", tool("call_1")}, term("term_1", true),
			[]string{"user /ps", "agent No background work.", "user " + bg, tool("call_2")}, term("term_2", false),
		)
		var texts map[string]string
		for deadline := time.Now().Add(20 * time.Second); ; {
			var lines []string
			_, lines, texts = a.load(sid)
			if !slices.Equal(lines, want) {
				t.Fatalf("session/load replayed\n%q\nwant\n%q", lines, want)
			}
			// Without the capability, "two" may still be on its way to the
			// ring (only the file says it was written): load again.
			if meta || strings.Contains(texts["call_2"], "two") || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		detached := "Started by /bg: moved to the background as term_2; /ps lists it, /stop term_2 stops it."
		if meta {
			// term_1 is new to the client again; term_2's screen is cleared
			// first, since this connection drew it before.
			if got := string(a.c.Output(sid, "term_1")); got != "one\r\n" {
				t.Errorf("term_1 redrawn as %q", got)
			}
			if got := string(a.c.Output(sid, "term_2")); got != "\x1b[H\x1b[2J\x1b[3Jtwo\r\n" {
				t.Errorf("term_2 redrawn as %q", got)
			}
			if texts["call_2"] != detached {
				t.Errorf("call_2 says %q", texts["call_2"])
			}
		} else {
			if want := "Output (5 bytes, escape sequences removed):\n```\none\n```"; texts["call_1"] != want {
				t.Errorf("call_1's tail %q, want %q", texts["call_1"], want)
			}
			if want := detached + "Output (5 bytes, escape sequences removed):\n```\ntwo\n```"; texts["call_2"] != want {
				t.Errorf("call_2's tail %q, want %q", texts["call_2"], want)
			}
		}

		// Live output goes on after the load, and a load after the stop
		// shows all of it and the exit.
		a.release("go")
		if meta {
			a.c.WaitFor("three", func(*acptest.Msg) bool {
				return strings.HasSuffix(string(a.c.Output(sid, "term_2")), "two\r\nthree\r\n")
			})
		} else {
			a.waitFile("printed3")
		}
		stop := a.turn(sid, "/stop term_2", "end_turn")
		ended := "term_2 (" + bg[len("/bg "):] + ") ended: signal SIGTERM."
		if meta {
			if exit := a.exit(stop, "term_2"); exit["signal"] != "SIGTERM" {
				t.Errorf("term_2 ended %v", exit)
			}
		} else {
			a.message(stop, ended)
		}
		_, lines, texts := a.load(sid)
		want = slices.Concat(want, term("term_2", true)[1:])
		if !meta {
			want = append(want, "agent "+ended)
		}
		want = append(want, "user /stop term_2", "agent Stopping term_2: SIGTERM sent; its exit status follows.")
		if !slices.Equal(lines, want) {
			t.Errorf("session/load after the stop replayed\n%q\nwant\n%q", lines, want)
		}
		if meta {
			if got := string(a.c.Output(sid, "term_2")); got != "two\r\nthree\r\n" {
				t.Errorf("term_2 redrawn as %q", got)
			}
		} else if want := detached + "Output (12 bytes, escape sequences removed):\n```\ntwo\nthree\n```"; texts["call_2"] != want {
			t.Errorf("call_2's tail %q, want %q", texts["call_2"], want)
		}
	})
}

// A background command that fails on its own is told once in v1: without
// terminal_output, as the exit message (its exit notice would say the
// same); with it, as terminal_exit and the notice.
func TestV1BackgroundFailureToldOnce(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta)
		sid := a.session()
		a.turn(sid, "/bg sleep 0.3; exit 3", "end_turn")
		end := a.message(nil, "term_1")
		a.turn(sid, "/ps", "end_turn") // after the exit and its notice
		var told []string
		for _, m := range a.c.Transcript() {
			if m.Kind == "agent_message_chunk" && strings.HasPrefix(m.Text(), "term_1 ") || strings.HasPrefix(m.Text(), "Warning: term_1 ") {
				told = append(told, m.Text())
			}
		}
		if len(told) != 1 {
			t.Errorf("the failure was told %d times: %q", len(told), told)
		}
		if meta && !strings.HasPrefix(end.Text(), "Warning: term_1 exited with code 3") || !meta && !strings.HasPrefix(end.Text(), "term_1 (sleep 0.3; exit 3) ended: exit 3") {
			t.Errorf("told as %q", end.Text())
		}
	})
}
