package supervisor

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

func TestForegroundCommandLife(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line   string
		code   int
		signal string
		status string
		out    string
	}{
		{"echo hello", 0, "", "completed", "hello\r\n"},
		{"printf 'no newline'; exit 3", 3, "", "failed", "no newline"},
		{"echo dying; kill -TERM $$", -1, "SIGTERM", "failed", "dying\r\n"},
	}
	h := newHarness(t, Config{})
	sid := h.newSession()
	for i, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			msgID := h.run(sid, tt.line)
			term, call := "term_"+strconv.Itoa(i+1), "call_"+strconv.Itoa(i+1)
			user := h.update(nil, sid, acp.KindUserMessage, "user message", func(m *acptest.Msg) bool { return m.MessageID() == msgID })
			running := h.update(user, sid, acp.KindState, "running", func(m *acptest.Msg) bool { return m.State() == "running" })
			tc := h.update(running, sid, acp.KindToolCall, "tool call", func(m *acptest.Msg) bool { return m.ToolCallID() == call })
			if tc.Status() != "in_progress" || tc.Update["kind"] != "execute" || tc.Update["title"] != tt.line {
				t.Errorf("tool call announced as %s", tc.Raw)
			}
			if raw := mustJSON(tc.Update["rawInput"]); raw != mustJSON(map[string]string{"command": tt.line, "cwd": h.cwd}) {
				t.Errorf("rawInput %s", raw)
			}
			tu := h.update(tc, sid, acp.KindTerminal, "terminal", func(m *acptest.Msg) bool { return m.TerminalID() == term })
			if mustJSON(tu.Update["size"]) != `{"cols":120,"rows":40}` || tu.Update["command"] != tt.line || mustJSON(tu.Update["capabilities"]) != `{"cancel":{}}` {
				t.Errorf("terminal announced as %s", tu.Raw)
			}
			exit := h.exit(tu, sid, term)
			if code, ok := exitCode(exit); tt.code >= 0 && (!ok || code != tt.code) || tt.code < 0 && ok {
				t.Errorf("exitStatus %v, want code %d", exit.ExitStatus(), tt.code)
			}
			if signalOf(exit) != tt.signal || !exit.HasKey("capabilities") || exit.Update["capabilities"] != nil {
				t.Errorf("exit update %s, want signal %q and capabilities null", exit.Raw, tt.signal)
			}
			final := h.toolStatus(exit, sid, call, tt.status)
			h.idle(final, sid, "end_turn")
			if got := string(h.c.Output(sid, term)); got != tt.out {
				t.Errorf("output %q, want %q", got, tt.out)
			}
		})
	}
}

func TestRandomBytesArriveExactly(t *testing.T) {
	t.Parallel()
	// Raw mode turns off the line discipline's output processing, so the
	// client must see exactly the bytes the command wrote. The ring holds
	// all of them, so nothing may be dropped even if the client is slow.
	// 1 MiB covers every byte value thousands of times; SHELLAGENT_LONG=1
	// sends 5 MiB.
	size := 1 << 20
	if testloop.Enabled() {
		size = 5 << 20
	}
	h := newHarness(t, Config{Scrollback: 8 << 20}, acptest.WithoutRaw())
	sid := h.newSession()
	file := filepath.Join(h.cwd, "random")
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	h.run(sid, "stty raw -echo && cat random && sleep 0.2")
	h.idle(nil, sid, "end_turn")
	got := h.c.Output(sid, "term_1")
	if !bytes.Equal(got, data) {
		t.Fatalf("reconstructed %d bytes, want the %d bytes of the file (first difference at %d)", len(got), len(data), firstDiff(got, data))
	}
	if n := h.c.Snapshots(sid, "term_1"); n != 0 {
		t.Errorf("%d replacement snapshots for a client that kept up", n)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestForegroundTimeoutMovesCommandToBackground(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{ForegroundTimeout: 300 * time.Millisecond})
	sid := h.newSession()
	// The command runs until the test has seen it detached (it makes the
	// file "go"), however late a loaded machine fires the timeout: with
	// "sleep 1" the command once ended first.
	h.run(sid, "echo started; until [ -e go ]; do sleep 0.05; done; echo finished")
	done := h.toolStatus(nil, sid, "call_1", "completed")
	if !strings.Contains(done.Text(), "foreground timeout") || !strings.Contains(done.Text(), "term_1") {
		t.Errorf("tool call completion says %q", done.Text())
	}
	idle := h.idle(done, sid, "end_turn")
	if !sameIDs(idle.Background(), []string{"term_1"}) {
		t.Errorf("idle state_update lists %v, want term_1", idle.Background())
	}
	if err := os.WriteFile(filepath.Join(h.cwd, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exit := h.exit(idle, sid, "term_1")
	if code, ok := exitCode(exit); !ok || code != 0 {
		t.Errorf("exitStatus %v", exit.ExitStatus())
	}
	removal := h.listed(exit, sid)
	if removal.State() != "idle" || removal.StopReason() != "" {
		t.Errorf("removal state_update %s: want a repeated idle without stop reason", removal.Raw)
	}
	if got := string(h.c.Output(sid, "term_1")); got != "started\r\nfinished\r\n" {
		t.Errorf("output %q", got)
	}
}

func TestBackgroundStartAndMidTurnDetach(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()

	// /bg CMD on an idle session: its own running → idle turn, listed.
	h.run(sid, "/bg sleep 30")
	idle := h.idle(nil, sid, "end_turn")
	if !sameIDs(idle.Background(), []string{"term_1"}) {
		t.Fatalf("after /bg the list is %v", idle.Background())
	}
	tu := h.update(nil, sid, acp.KindTerminal, "terminal", nil)
	if tu.Update["command"] != "sleep 30" {
		t.Errorf("background terminal command %v", tu.Update["command"])
	}

	// A foreground command, then /bg alone while it runs.
	h.run(sid, "echo fg; sleep 30")
	h.output(sid, "term_2", "fg")
	bg := h.run(sid, "/bg")
	user := h.update(nil, sid, acp.KindUserMessage, "/bg inserted", func(m *acptest.Msg) bool { return m.MessageID() == bg })
	done := h.toolStatus(user, sid, "call_2", "completed")
	idle = h.idle(done, sid, "end_turn")
	if !sameIDs(idle.Background(), []string{"term_1", "term_2"}) {
		t.Errorf("after mid-turn /bg the list is %v", idle.Background())
	}

	// /bg alone with nothing in the foreground says so.
	h.run(sid, "/bg")
	msg := h.update(idle, sid, acp.KindAgentMessage, "agent message", nil)
	if !strings.Contains(msg.Text(), "Nothing is running in the foreground") {
		t.Errorf("agent message %q", msg.Text())
	}
	h.idle(msg, sid, "end_turn")

	// /bg CMD while a foreground command runs: no state change, list grows.
	h.run(sid, "sleep 30")
	running := h.update(msg, sid, acp.KindState, "running", func(m *acptest.Msg) bool { return m.State() == "running" })
	h.run(sid, "/bg sleep 31")
	grown := h.listed(running, sid, "term_1", "term_2", "term_4")
	if grown.State() != "running" || grown.StopReason() != "" {
		t.Errorf("list change during a foreground command sent %s", grown.Raw)
	}
}

func TestHeldPrompts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "echo first; sleep 0.5")
	h.output(sid, "term_1", "first")
	second := h.prompt(sid, "echo second")
	third := h.prompt(sid, "echo third")

	// Held: neither inserted while the first runs.
	first := h.exit(nil, sid, "term_1")
	m2 := h.c.Wait(second)
	user2 := h.update(nil, sid, acp.KindUserMessage, "second inserted", func(m *acptest.Msg) bool { return m.MessageID() == m2.MessageID() })
	if user2.Seq < first.Seq || m2.Seq < first.Seq {
		t.Errorf("held prompt inserted (message %d, response %d) before the first command ended (%d)", user2.Seq, m2.Seq, first.Seq)
	}
	m3 := h.c.Wait(third)
	if m3.Seq < h.exit(nil, sid, "term_2").Seq {
		t.Errorf("third prompt answered before the second command ended")
	}
	h.idle(h.exit(nil, sid, "term_3"), sid, "end_turn")

	// session/cancel answers held prompts -32800 and inserts nothing.
	h.run(sid, "sleep 30")
	held := h.prompt(sid, "echo never")
	time.Sleep(50 * time.Millisecond)
	h.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	if m := h.c.Wait(held); m.Error == nil || m.Error.Code != -32800 {
		t.Errorf("held prompt after session/cancel answered %s", m.Raw)
	}
	exit := h.exit(nil, sid, "term_4")
	if signalOf(exit) != "SIGTERM" {
		t.Errorf("cancelled command exit %v", exit.ExitStatus())
	}
	h.toolStatus(exit, sid, "call_4", "cancelled")
	h.idle(exit, sid, "cancelled")
	h.never(sid, "cancelled held prompt was inserted", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindUserMessage && strings.Contains(m.Text(), "never")
	})
}

func TestTerminalCancel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{KillGrace: 300 * time.Millisecond})
	sid := h.newSession()
	tests := []struct {
		line, term, signal string
		code               int
	}{
		{"/bg echo ready; sleep 30", "term_1", "SIGTERM", -1},
		{"/bg trap '' TERM; echo ready; sleep 30 & wait", "term_2", "SIGKILL", -1},
		{"/bg trap 'exit 9' TERM; echo ready; while :; do sleep 0.05; done", "term_3", "SIGTERM", 9},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			h.run(sid, tt.line)
			h.output(sid, tt.term, "ready")
			start := time.Now()
			if err := h.callErr("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": tt.term}); err != nil {
				t.Fatalf("terminal/cancel: %v", err)
			}
			exit := h.exit(nil, sid, tt.term)
			if signalOf(exit) != tt.signal {
				t.Errorf("exitStatus %v, want %s", exit.ExitStatus(), tt.signal)
			}
			if code, ok := exitCode(exit); tt.code >= 0 && code != tt.code || tt.code < 0 && ok {
				t.Errorf("exitStatus %v, want exit code %d", exit.ExitStatus(), tt.code)
			}
			if tt.signal == "SIGKILL" && time.Since(start) < 300*time.Millisecond {
				t.Errorf("SIGKILL before the kill grace")
			}
			h.listed(exit, sid)
		})
	}

	// A second cancel while stopping skips the rest of the grace.
	h.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "kill_grace", "type": "id", "value": "30s"}, nil)
	h.run(sid, "/bg trap '' TERM; echo ready; sleep 30")
	h.output(sid, "term_4", "ready")
	cancel := map[string]string{"sessionId": sid, "terminalId": "term_4"}
	if err := h.callErr("terminal/cancel", cancel); err != nil {
		t.Fatal(err)
	}
	if err := h.callErr("terminal/cancel", cancel); err != nil {
		t.Fatalf("second cancel while stopping: %v", err)
	}
	if exit := h.exit(nil, sid, "term_4"); signalOf(exit) != "SIGKILL" {
		t.Errorf("exitStatus %v", exit.ExitStatus())
	}
}

func TestCancelErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	other := h.newSession()
	h.run(sid, "true")
	h.idle(h.exit(nil, sid, "term_1"), sid, "end_turn")
	h.run(sid, "/bg sleep 30")
	h.idle(nil, sid, "end_turn")
	h.run(sid, "sleep 30") // call_3 stays in progress in the foreground
	h.update(nil, sid, acp.KindTerminal, "term_3", func(m *acptest.Msg) bool { return m.TerminalID() == "term_3" })
	tests := []struct {
		method string
		params map[string]string
		code   int
		says   string
	}{
		{"terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_9"}, -32602, "terminalId"},
		{"terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"}, -32602, "already exited"},
		{"terminal/cancel", map[string]string{"sessionId": other, "terminalId": "term_2"}, -32602, "terminalId"},
		{"terminal/cancel", map[string]string{"sessionId": sid}, -32602, "terminalId"},
		{"terminal/cancel", map[string]string{"sessionId": "sess_nope", "terminalId": "term_2"}, -32002, "session"},
		{"tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": "call_9"}, -32602, "toolCallId"},
		{"tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": "call_1"}, -32602, "already completed"},
		{"tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": "call_2"}, -32602, "already completed"},
		{"tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": "call_3"}, -32602, "not cancellable"},
	}
	for _, tt := range tests {
		err := h.callErr(tt.method, tt.params)
		if err == nil || err.Code != tt.code || !strings.Contains(err.Message, tt.says) {
			t.Errorf("%s %v = %v, want %d mentioning %q", tt.method, tt.params, err, tt.code, tt.says)
		}
	}
	// Nothing changed: term_2 still runs and is still listed.
	h.run(sid, "/ps") // acts at once, beside the foreground command
	ps := h.update(nil, sid, acp.KindAgentMessage, "/ps", nil)
	if !strings.Contains(ps.Text(), "term_2") {
		t.Errorf("/ps after bad cancels: %q", ps.Text())
	}
}

func TestSessionCancelLeavesBackgroundWork(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "/bg sleep 30")
	h.idle(nil, sid, "end_turn")
	h.run(sid, "sleep 30")
	h.update(nil, sid, acp.KindTerminal, "term_2", func(m *acptest.Msg) bool { return m.TerminalID() == "term_2" })
	h.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	idle := h.idle(nil, sid, "cancelled")
	if !sameIDs(idle.Background(), []string{"term_1"}) {
		t.Errorf("after session/cancel the list is %v", idle.Background())
	}
	time.Sleep(200 * time.Millisecond)
	h.never(sid, "session/cancel stopped background work", func(m *acptest.Msg) bool {
		return m.TerminalID() == "term_1" && m.ExitStatus() != nil
	})
	// session/cancel on an idle session changes nothing.
	h.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	h.run(sid, "echo still here")
	h.output(sid, "term_3", "still here")
}

func TestShellReturnWithJobDetaches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "sleep 1 & echo started")
	done := h.toolStatus(nil, sid, "call_1", "completed")
	if raw := mustJSON(done.Update["rawOutput"]); raw != `{"exitCode":0}` {
		t.Errorf("rawOutput %s, want the shell's exit code", raw)
	}
	idle := h.idle(done, sid, "end_turn")
	if !sameIDs(idle.Background(), []string{"term_1"}) {
		t.Fatalf("list %v", idle.Background())
	}
	exit := h.exit(idle, sid, "term_1")
	if exit.At.Sub(idle.At) < 500*time.Millisecond {
		t.Errorf("terminal exited %v after detaching; the job sleeps 1s", exit.At.Sub(idle.At))
	}
	h.listed(exit, sid)
	if got := string(h.c.Output(sid, "term_1")); got != "started\r\n" {
		t.Errorf("output %q", got)
	}
}

// A process that leaves the terminal's session (setsid) still belongs to
// the terminal: the terminal stays live and listed until it ends, and its
// last output comes before the exit status. The child ends when the test
// releases it: a child that slept half a second was seen, under load, to
// end before the shell's return was reported.
func TestSetsidChildKeepsTheTerminalLive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "setsid sh -c '"+trigger("go")+"; echo late' & echo shell-done")
	idle := h.idle(nil, sid, "end_turn")
	if !sameIDs(idle.Background(), []string{"term_1"}) {
		t.Fatalf("list %v after the shell returned", idle.Background())
	}
	released := time.Now()
	h.release("go")
	exit := h.exit(idle, sid, "term_1")
	if exit.At.Before(released) {
		t.Errorf("exit reported %v before the setsid child was released", released.Sub(exit.At))
	}
	if got := string(h.c.Output(sid, "term_1")); got != "shell-done\r\nlate\r\n" {
		t.Errorf("output %q", got)
	}
	h.listed(exit, sid)
}

func TestCloseStopsEverything(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{KillGrace: 300 * time.Millisecond})
	sid := h.newSession()
	h.run(sid, "/bg sleep 30")
	h.run(sid, "/bg trap '' TERM; echo ready; sleep 30")
	h.output(sid, "term_2", "ready")
	h.run(sid, "sleep 30")
	h.update(nil, sid, acp.KindTerminal, "term_3", func(m *acptest.Msg) bool { return m.TerminalID() == "term_3" })
	held := h.prompt(sid, "echo held")
	start := time.Now()
	closeID := h.c.Send("session/close", map[string]string{"sessionId": sid})
	resp := h.c.Wait(closeID)
	if resp.Error != nil {
		t.Fatalf("close: %v", resp.Error)
	}
	// One kill grace and the slack, not three graces in turn.
	if d, bound := time.Since(start), testloop.Bound(300*time.Millisecond)+shutdownSlack; d > bound {
		t.Errorf("close took %v, more than %v; terminals must be stopped in parallel", d, bound)
	}
	if m := h.c.Wait(held); m.Error == nil || m.Error.Code != -32800 {
		t.Errorf("held prompt on close answered %s", m.Raw)
	}
	for _, term := range []string{"term_1", "term_2", "term_3"} {
		if exit := h.exit(nil, sid, term); exit.Seq > resp.Seq {
			t.Errorf("%s exitStatus after the close response", term)
		}
	}
	h.toolStatus(nil, sid, "call_3", "cancelled")
	last := h.idle(nil, sid, "cancelled")
	if len(last.Background()) != 0 || last.Seq > resp.Seq {
		t.Errorf("final state_update %s (seq %d, response %d)", last.Raw, last.Seq, resp.Seq)
	}
	if left := acptest.ProcessesWith(h.marker); len(left) > 0 {
		t.Errorf("processes left after session/close: %v", left)
	}
	// The session is gone; closing it again succeeds.
	if err := h.callErr("session/close", map[string]string{"sessionId": sid}); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := h.callErr("session/prompt", map[string]any{"sessionId": sid, "prompt": text("true")}); err == nil || err.Code != -32002 {
		t.Errorf("prompt to a closed session: %v", err)
	}
}

func TestShutdownStopsEveryProcess(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{KillGrace: 300 * time.Millisecond})
	for range 2 {
		sid := h.newSession()
		h.run(sid, "/bg trap '' TERM; sleep 30")
		h.run(sid, "sleep 30 & sleep 30")
	}
	time.Sleep(100 * time.Millisecond)
	if left := acptest.ProcessesWith(h.marker); len(left) < 4 {
		t.Fatalf("only %d processes running before shutdown", len(left))
	}
	// Cleanup closes stdin; harness.close checks that nothing is left.
}

func TestHeldPromptWithdrawnByCancelRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "echo first; sleep 0.5")
	h.output(sid, "term_1", "first")
	withdrawn := h.prompt(sid, "echo withdrawn")
	kept := h.prompt(sid, "echo kept")
	h.c.Notify("$/cancel_request", map[string]any{"requestId": withdrawn})
	if m := h.c.Wait(withdrawn); m.Error == nil || m.Error.Code != -32800 {
		t.Errorf("withdrawn prompt answered %s", m.Raw)
	}
	// A withdrawal after insertion changes nothing.
	inserted := h.c.Wait(kept)
	h.c.Notify("$/cancel_request", map[string]any{"requestId": kept})
	h.idle(h.exit(inserted, sid, "term_2"), sid, "end_turn")
	if got := string(h.c.Output(sid, "term_2")); got != "kept\r\n" {
		t.Errorf("the prompt after the withdrawn one printed %q", got)
	}
	h.never(sid, "withdrawn prompt was inserted", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindUserMessage && strings.Contains(m.Text(), "withdrawn")
	})
}

// terminal/cancel of a foreground command changes no foreground state and
// no tool call status by itself: the tool call ends as for any exit.
func TestTerminalCancelOfTheForegroundCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "echo ready; sleep 30")
	h.output(sid, "term_1", "ready")
	if err := h.callErr("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"}); err != nil {
		t.Fatal(err)
	}
	exit := h.exit(nil, sid, "term_1")
	failed := h.toolStatus(exit, sid, "call_1", "failed")
	idle := h.idle(failed, sid, "end_turn")
	if signalOf(exit) != "SIGTERM" || len(idle.Background()) != 0 {
		t.Errorf("exit %v, idle %s", exit.ExitStatus(), idle.Raw)
	}
	// The output stays: a resume still shows it.
	h.c.MustCall("session/resume", map[string]any{"sessionId": sid, "cwd": h.cwd}, nil)
	if got := string(h.c.Output(sid, "term_1")); got != "ready\r\n" {
		t.Errorf("output after cancel %q", got)
	}
}
