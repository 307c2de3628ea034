package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"shellagent/protocol/acptest"
)

// v1TranscriptDir holds the v1 golden transcripts: NAME-terminal-output.jsonl
// for a client that advertises clientCapabilities._meta.terminal_output (as
// Zed does), NAME-plain.jsonl for one that does not (acpx).
const v1TranscriptDir = transcriptDir + "/v1"

// v1Scenario is a v1 golden transcript, played with and without the
// capability.
type v1Scenario struct {
	name string
	args []string
	run  func(s *v1Script)
}

// v1Scenarios are the golden transcripts of testdata/transcripts/v1, two
// files each. The commands print nothing that a plain client's tail could
// catch or miss by timing: their output is read before what ends them.
var v1Scenarios = []v1Scenario{
	{name: "foreground", run: func(s *v1Script) {
		// A command that ends in the foreground: its output live in a
		// terminal, or as text in its final update.
		s.open()
		s.prompt("echo hello")
	}},
	{name: "foreground-timeout", args: []string{"--kill-grace", "1s"}, run: func(s *v1Script) {
		// A dev server outlives the 1s foreground timeout: its tool call
		// completes, the turn ends, and /stop stops it.
		s.open()
		s.set("foreground_timeout", "1s")
		s.prompt("echo listening on :3000; exec sleep 30")
		s.stop("term_1")
	}},
	{name: "bg", args: []string{"--kill-grace", "1s"}, run: func(s *v1Script) {
		// /bg CMD starts background work; /bg alone detaches the
		// foreground command; /ps lists both; /stop stops them.
		s.open()
		s.prompt("/bg sleep 30")
		first := s.sendPrompt("exec sleep 30")
		s.announced("call_2")
		bg := s.sendPrompt("/bg")
		s.response(first)
		s.response(bg)
		s.prompt("/ps")
		s.stop("term_1")
		s.stop("term_2")
	}},
	{name: "held", run: func(s *v1Script) {
		// A prompt sent while a command runs is held and answered at the
		// end of its own turn; /ps acts at once.
		s.open()
		first := s.sendPrompt("while [ ! -e go ]; do sleep 0.05; done; echo first")
		s.announced("call_1")
		second := s.sendPrompt("echo second")
		s.prompt("/ps")
		if err := os.WriteFile(filepath.Join(s.cwd, "go"), nil, 0o644); err != nil {
			s.t.Fatal(err)
		}
		s.response(first)
		s.response(second)
	}},
	{name: "session-cancel", args: []string{"--kill-grace", "1s"}, run: func(s *v1Script) {
		// session/cancel stops the foreground command and answers both
		// prompts cancelled; background work runs on.
		s.open()
		s.prompt("/bg sleep 30")
		fg := s.sendPrompt("sleep 30")
		s.announced("call_2")
		held := s.sendPrompt("echo never runs")
		s.notify("session/cancel", map[string]string{"sessionId": s.sid})
		s.response(held)
		s.response(fg)
		s.stop("term_1")
	}},
	{name: "permission", run: func(s *v1Script) {
		// Permission mode ask: the command waits for the client's answer.
		s.open()
		s.set("permission", "ask")
		id := s.sendPrompt("echo allowed")
		req := s.await("the permission request", func(m *acptest.Msg) bool { return m.Method == "session/request_permission" })
		s.raw(s.encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow"}}}))
		s.response(id)
	}},
	{name: "resume", args: []string{"--kill-grace", "1s"}, run: func(s *v1Script) {
		// session/list, then session/resume: the commands, then the tool
		// calls of live work again.
		s.open()
		s.prompt("/bg sleep 30")
		s.call("session/list", map[string]any{})
		s.call("session/resume", map[string]any{"sessionId": s.sid, "cwd": s.cwd, "mcpServers": []any{}})
		s.await("the commands", func(m *acptest.Msg) bool { return m.Kind == "available_commands_update" })
		s.await("call_1 again", func(m *acptest.Msg) bool { return m.ToolCallID() == "call_1" })
		s.stop("term_1")
	}},
	{name: "load", args: []string{"--kill-grace", "1s"}, run: func(s *v1Script) {
		// session/load on the same connection: the history before the
		// response (the prompts, /ps's message, each tool call at its
		// current state with its terminal redrawn or its output's tail),
		// the commands after it, then live output and the exit.
		s.open()
		s.prompt("echo one")
		s.prompt("/ps") // before the /bg: its message names no process
		s.prompt("/bg while [ ! -e go ]; do sleep 0.05; done; echo two; exec sleep 30")
		s.call("session/load", map[string]any{"sessionId": s.sid, "cwd": s.cwd, "mcpServers": []any{}})
		s.await("the commands", func(m *acptest.Msg) bool { return m.Kind == "available_commands_update" })
		if err := os.WriteFile(filepath.Join(s.cwd, "go"), nil, 0o644); err != nil {
			s.t.Fatal(err)
		}
		if s.meta {
			s.await("live output", func(*acptest.Msg) bool { return strings.HasSuffix(string(s.c.Output(s.sid, "term_2")), "two\r\n") })
		}
		s.stop("term_2")
	}},
	{name: "close", args: []string{"--kill-grace", "1s"}, run: func(s *v1Script) {
		// session/close stops everything, a recurring job and the
		// foreground command: the prompt is answered cancelled, then the
		// close.
		s.open()
		s.prompt("/every 1h echo hourly")
		fg := s.sendPrompt("sleep 30")
		s.announced("call_2")
		closed := s.send("session/close", map[string]string{"sessionId": s.sid})
		s.response(fg)
		s.response(closed)
	}},
}

// TestTranscriptsV1 is TestTranscripts for ACP v1: each scenario runs
// with and without clientCapabilities._meta.terminal_output, against the
// strict client in v1 mode, and is compared with its golden transcript in
// testdata/transcripts/v1 (-update rewrites them).
func TestTranscriptsV1(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, sc := range v1Scenarios {
		for _, meta := range []bool{true, false} {
			name := sc.name + "-plain"
			if meta {
				name = sc.name + "-terminal-output"
			}
			seen[name+".jsonl"] = true
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s := &v1Script{script: startScriptWith(t, []acptest.Option{acptest.WithProtocolV1()}, sc.args...), meta: meta}
				sc.run(s)
				checkGolden(t, filepath.Join(v1TranscriptDir, name+".jsonl"), s.finish())
			})
		}
	}
	checkOrphans(t, v1TranscriptDir, seen)
}

// v1Script is a script in ACP v1, for a client with or without
// _meta.terminal_output.
type v1Script struct {
	*script
	meta bool
}

// open initializes in v1 and creates a session, whose commands follow.
func (s *v1Script) open() {
	s.t.Helper()
	caps := map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false}
	if s.meta {
		caps["_meta"] = map[string]any{"terminal_output": true}
	}
	s.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": caps, "clientInfo": map[string]string{"name": "transcript", "version": "1"}})
	m := s.call("session/new", map[string]any{"cwd": s.cwd, "mcpServers": []any{}})
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		s.t.Fatal(err)
	}
	s.sid = res.SessionID
	s.await("the commands", func(m *acptest.Msg) bool { return m.Kind == "available_commands_update" })
}

// set sets a config option the v1 way: a value id without a type.
func (s *v1Script) set(id, value string) {
	s.t.Helper()
	s.call("session/set_config_option", map[string]any{"sessionId": s.sid, "configId": id, "value": value})
}

// announced waits for the tool_call that announces call.
func (s *v1Script) announced(call string) {
	s.t.Helper()
	s.await(call+" announced", func(m *acptest.Msg) bool { return m.Kind == "tool_call" && m.ToolCallID() == call })
}

// stop sends /stop term and waits for its answer, then for term's exit:
// its terminal_exit with the capability, else the message that says it
// ended.
func (s *v1Script) stop(term string) {
	s.t.Helper()
	s.prompt("/stop " + term)
	if s.meta {
		s.await(term+" terminal_exit", func(m *acptest.Msg) bool {
			e := m.Meta("terminal_exit")
			return e != nil && e["terminal_id"] == term
		})
		return
	}
	s.await(term+" ended", func(m *acptest.Msg) bool {
		return m.Kind == "agent_message_chunk" && strings.HasPrefix(m.Text(), term+" (")
	})
}

// v1OutputPattern matches a v1 tool_call_update that carries only output,
// as the agent writes it.
var v1OutputPattern = regexp.MustCompile(`^(\{"jsonrpc":"2.0","method":"session/update","params":\{"sessionId":"[^"]*","update":\{"sessionUpdate":"tool_call_update","toolCallId":"[^"]*","_meta":\{"terminal_output":\{"terminal_id":"[^"]*","data":)("(?:[^"\\]|\\.)*")(\}\}\}\}\})$`)

// mergeV1Output merges consecutive v1 terminal_output updates of a
// terminal into one line, whose data is written by one encoder whether or
// not it was merged.
func mergeV1Output(lines []goldenLine) []goldenLine {
	var out []goldenLine
	var data string
	merging := false
	for _, l := range lines {
		m := v1OutputPattern.FindStringSubmatch(l.raw)
		var text string
		if l.from != "agent" || m == nil || json.Unmarshal([]byte(m[2]), &text) != nil {
			out = append(out, l)
			merging = false
			continue
		}
		if n := len(out); merging && strings.HasPrefix(out[n-1].raw, m[1]+`"`) {
			data += text
			out[n-1].raw = m[1] + encodeV1Data(data) + m[3]
			continue
		}
		data, merging = text, true
		out = append(out, goldenLine{from: "agent", raw: m[1] + encodeV1Data(data) + m[3]})
	}
	return out
}

// encodeV1Data encodes output text as a JSON string, without HTML escapes.
func encodeV1Data(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // Safe: a string always encodes.
	return strings.TrimSuffix(buf.String(), "\n")
}
