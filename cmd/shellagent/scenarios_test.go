package main

import (
	"os"
	"path/filepath"

	"shellagent/protocol/acptest"
)

// scenario is one golden transcript: the agent's flags and what the client
// does.
type scenario struct {
	name string
	args []string
	opts []acptest.Option // of the strict client
	run  func(s *script)
}

// scenarios are the golden transcripts of testdata/transcripts, one file
// each. docs/transcripts.md walks through three of them.
var scenarios = []scenario{
	{name: "foreground", run: func(s *script) {
		// A command that ends in the foreground.
		s.open()
		s.prompt("echo hello")
		s.idle("end_turn", 0)
	}},
	{name: "foreground-timeout", run: func(s *script) {
		// A dev server outlives the 1s foreground timeout, moves to the
		// background, and is stopped with terminal/cancel.
		s.open()
		s.set("foreground_timeout", "1s")
		s.prompt("echo listening on :3000; exec sleep 30")
		s.idle("end_turn", 1)
		s.cancelTerminal("term_1", 0)
	}},
	{name: "bg", run: func(s *script) {
		// /bg CMD starts background work; /bg alone detaches the
		// foreground command.
		s.open()
		s.prompt("/bg sleep 30")
		s.idle("end_turn", 1)
		s.prompt("echo working; sleep 30")
		s.output("term_2", "working")
		s.prompt("/bg")
		s.idle("end_turn", 2)
		s.cancelTerminal("term_1", 1)
		s.cancelTerminal("term_2", 0)
	}},
	{name: "job", run: func(s *script) {
		// The shell returns while its & job runs on: the terminal stays
		// live and moves to the background.
		s.open()
		s.prompt("sleep 30 &")
		s.idle("end_turn", 1)
		s.cancelTerminal("term_1", 0)
	}},
	{name: "cancel-escalation", run: func(s *script) {
		// A command that ignores SIGTERM gets SIGKILL after the kill grace.
		s.open()
		s.set("kill_grace", "1s")
		s.prompt("trap '' TERM; echo ignoring TERM; sleep 30")
		s.output("term_1", "ignoring TERM")
		s.prompt("/bg")
		s.idle("end_turn", 1)
		s.cancelTerminal("term_1", 0)
	}},
	{name: "after", run: func(s *script) {
		// A wakeup: pending and listed until it fires, then completed, and
		// its command runs as new foreground work.
		s.open()
		s.prompt("/after 1s echo woke up")
		s.idle("end_turn", 1)
		s.idle("end_turn", 0)
	}},
	{name: "every", run: func(s *script) {
		// A recurring job fires, then tool_call/cancel ends it.
		s.open()
		s.prompt("/every 1s echo tick")
		s.idle("end_turn", 1)
		s.output("term_1", "tick")
		s.idle("end_turn", 1)
		s.call("tool_call/cancel", map[string]string{"sessionId": s.sid, "toolCallId": "call_1"})
		s.idle("", 0)
	}},
	{name: "session-cancel", run: func(s *script) {
		// session/cancel stops the foreground command and answers the held
		// prompt -32800; background work runs on.
		s.open()
		s.prompt("/bg sleep 30")
		s.idle("end_turn", 1)
		s.prompt("echo working; sleep 30")
		s.output("term_2", "working")
		held := s.sendPrompt("echo never runs")
		s.notify("session/cancel", map[string]string{"sessionId": s.sid})
		s.response(held)
		s.idle("cancelled", 1)
		s.cancelTerminal("term_1", 0)
	}},
	{name: "held", run: func(s *script) {
		// A prompt sent while a command runs is held, and inserted when
		// its turn starts; /ps acts at once.
		s.open()
		s.prompt("while [ ! -e go ]; do sleep 0.05; done; echo first")
		s.await("term_1 announced", func(m *acptest.Msg) bool { return m.TerminalID() == "term_1" })
		second := s.sendPrompt("echo second")
		s.prompt("/ps")
		s.await("the /ps answer", func(m *acptest.Msg) bool { return m.Kind == "agent_message" })
		if err := os.WriteFile(filepath.Join(s.cwd, "go"), nil, 0o644); err != nil {
			s.t.Fatal(err)
		}
		s.response(second)
		s.idle("end_turn", 0)
	}},
	{name: "resume", run: func(s *script) {
		// session/list, then resume without and with replay: the current
		// state of listed work, then the retained history.
		s.open()
		s.prompt("echo hello")
		s.idle("end_turn", 0)
		s.prompt("/bg sleep 30")
		s.idle("end_turn", 1)
		s.call("session/list", map[string]any{})
		s.call("session/resume", map[string]any{"sessionId": s.sid, "cwd": s.cwd})
		s.call("session/resume", map[string]any{"sessionId": s.sid, "cwd": s.cwd, "replayFrom": map[string]string{"type": "start"}})
		s.cancelTerminal("term_2", 0)
	}},
	{name: "close", run: func(s *script) {
		// session/close stops everything and reports every final status
		// before its answer.
		s.open()
		s.prompt("/bg sleep 30")
		s.idle("end_turn", 1)
		s.prompt("/every 1h echo hourly")
		s.idle("end_turn", 2)
		s.call("session/close", map[string]string{"sessionId": s.sid})
	}},
	{name: "permission", run: func(s *script) {
		// Permission mode ask: a /bg command waits as a listed pending tool
		// call until the client allows it.
		s.open()
		s.set("permission", "ask")
		s.prompt("/bg sleep 30")
		req := s.await("the permission request", func(m *acptest.Msg) bool { return m.Method == "session/request_permission" })
		s.raw(s.encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": "allow"}}}))
		s.await("term_1 announced", func(m *acptest.Msg) bool { return m.TerminalID() == "term_1" })
		s.idle("", 1)
		s.cancelTerminal("term_1", 0)
	}},
	{name: "wait", run: func(s *script) {
		// /wait: a line printed before the wait matches at once; a wait
		// that /bg moves to the background is listed as a tool call until
		// tool_call/cancel ends it; the terminal runs on untouched.
		s.open()
		s.prompt("/bg while [ ! -e go ]; do sleep 0.05; done; echo ready on :3000; exec sleep 30")
		s.idle("end_turn", 1)
		if err := os.WriteFile(filepath.Join(s.cwd, "go"), nil, 0o644); err != nil {
			s.t.Fatal(err)
		}
		s.output("term_1", "ready on")
		s.prompt("/wait term_1 'ready on'")
		s.idle("end_turn", 1)
		s.prompt("/wait term_1 'GET /health' --timeout 10m")
		s.await("call_3 in progress", func(m *acptest.Msg) bool { return m.ToolCallID() == "call_3" })
		s.prompt("/bg")
		s.idle("end_turn", 2)
		s.call("tool_call/cancel", map[string]string{"sessionId": s.sid, "toolCallId": "call_3"})
		s.idle("", 1)
		s.cancelTerminal("term_1", 0)
	}},
	{name: "watch", run: func(s *script) {
		// /watch runs its command after a change; /pause makes it paused
		// and /resume in_progress again, listed throughout; a change after
		// the resume runs it again; tool_call/cancel ends it.
		s.open()
		write := func(name string) {
			if err := os.WriteFile(filepath.Join(s.cwd, "src", name), []byte(name), 0o644); err != nil {
				s.t.Fatal(err)
			}
		}
		if err := os.Mkdir(filepath.Join(s.cwd, "src"), 0o755); err != nil {
			s.t.Fatal(err)
		}
		s.prompt("/watch src echo changed")
		s.idle("end_turn", 1)
		write("a")
		s.idle("end_turn", 1)
		s.prompt("/pause call_1")
		s.idle("end_turn", 1)
		s.prompt("/resume call_1")
		s.idle("end_turn", 1)
		write("b")
		s.idle("end_turn", 1)
		s.call("tool_call/cancel", map[string]string{"sessionId": s.sid, "toolCallId": "call_1"})
		s.idle("", 0)
	}},
	{name: "malformed", run: func(s *script) {
		// Bad input gets an error and the connection goes on.
		s.call("session/new", map[string]any{"cwd": s.cwd})
		for _, line := range []string{
			`{"jsonrpc":"2.0","id":50,"method":"session/new","params":{"cwd":`,
			`this is not json`,
			`[1,2]`,
			`{"jsonrpc":"1.0","id":51,"method":"initialize"}`,
			`{"jsonrpc":"2.0","id":52,"method":"initialize","params":{"protocolVersion":0,"info":{"name":"x","version":"1"}}}`,
		} {
			s.raw(line)
			s.await("an answer", func(m *acptest.Msg) bool { return m.IsResponse() })
		}
		s.open()
		for _, line := range []string{
			`{"jsonrpc":"2.0","id":53,"method":"no/such/method","params":{}}`,
			`{"jsonrpc":"2.0","id":54,"method":"session/new","params":{"cwd":"relative/dir"}}`,
			`{"jsonrpc":"2.0","id":55,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]}}`,
			`{"jsonrpc":"2.0","id":56,"method":"session/set_config_option","params":{"sessionId":"sess_1","configId":"foreground_timeout","value":{"type":"id","value":"5s"}}}`,
			`{"jsonrpc":"2.0","id":57,"method":"session/set_config_option","params":{"sessionId":"sess_1","configId":"foreground_timeout","type":"id","value":"7 seconds"}}`,
			`{"jsonrpc":"2.0","id":58,"method":"terminal/cancel","params":{"sessionId":"sess_1","terminalId":"term_9"}}`,
		} {
			s.raw(line)
			s.await("an answer", func(m *acptest.Msg) bool { return m.IsResponse() })
		}
		s.prompt("/nosuchcommand")
		s.idle("end_turn", 0)
	}},
}
