package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shellagent/protocol/acptest"
)

// /wait in v1: a tool call of its own that shows no terminal (v1 gives a
// terminal's output and exit to the command's tool call only), answered
// with an agent_message_chunk; the terminal's output and exit stay on
// the tool call that started it.
func TestV1Wait(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta, "--kill-grace", "1s")
		sid := a.session()
		a.turn(sid, "/bg while [ ! -e go ]; do sleep 0.05; done; echo ready on :3000; exec sleep 30", "end_turn")
		wait := a.prompt(sid, "/wait term_1 'ready on'")
		call := a.c.WaitFor("the wait's tool_call", func(m *acptest.Msg) bool { return m.Kind == "tool_call" && m.ToolCallID() == "call_2" })
		if call.Status() != "in_progress" || call.Update["kind"] != "search" || call.Meta("terminal_info") != nil ||
			strings.Contains(mustJSON(call.Update["content"]), "terminal") || !strings.Contains(call.Text(), `Waiting for a line of term_1 that matches "ready on"`) {
			t.Errorf("the wait's tool_call %s", call.Raw)
		}
		if err := os.WriteFile(filepath.Join(a.cwd, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if stop, _ := a.stopReason(wait); stop != "end_turn" {
			t.Errorf("the wait ended %s", stop)
		}
		if done := a.final(call, "call_2"); done.Status() != "completed" {
			t.Errorf("the wait ended %s", done.Raw)
		}
		a.message(call, `term_1 printed "ready on :3000", which matches "ready on"; waited `)
		// The wait's end leaves term_1 with call_1: its exit goes there.
		stop := a.turn(sid, "/stop term_1", "end_turn")
		if meta {
			if exit := a.exit(stop, "term_1"); exit["signal"] != "SIGTERM" {
				t.Errorf("terminal_exit %v", exit)
			}
		}
	})
}

// /watch, /pause and /resume in v1: v1 has no paused status, so a paused
// watch is in_progress, as v2's schema tells a client to read a status
// it does not know; its cancel is failed, as every cancelled tool call.
func TestV1Watch(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T, meta bool) {
		a := startV1(t, meta)
		if err := os.Mkdir(filepath.Join(a.cwd, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		sid := a.session()
		a.turn(sid, "/watch src echo changed", "end_turn")
		if err := os.WriteFile(filepath.Join(a.cwd, "src", "a"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		run := a.c.WaitFor("the run", func(m *acptest.Msg) bool { return m.Kind == "tool_call" && m.ToolCallID() == "call_2" })
		if done := a.final(run, "call_2"); done.Status() != "completed" {
			t.Errorf("the run ended %s", done.Raw)
		}
		pause := a.turn(sid, "/pause call_1", "end_turn")
		a.message(nil, "Paused call_1 (watch src: echo changed)")
		a.turn(sid, "/resume call_1", "end_turn")
		a.message(pause, "Resumed call_1")
		a.turn(sid, "/stop call_1", "end_turn")
		var statuses []string
		for _, m := range a.c.Transcript() {
			if m.ToolCallID() == "call_1" && m.HasKey("status") {
				statuses = append(statuses, m.Status())
			}
		}
		if strings.Join(statuses, " ") != "in_progress in_progress in_progress failed" {
			t.Errorf("the watch's v1 statuses: %v", statuses)
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v) // Safe: decoded JSON always encodes.
	return string(b)
}
