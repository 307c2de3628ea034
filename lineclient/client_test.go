package lineclient

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// noExitDelay stops a -race fake agent from sleeping a second at exit.
const noExitDelay = "GORACE=atexit_sleep_ms=0"

func TestMain(m *testing.M) {
	switch os.Getenv("LINECLIENT_FAKE_AGENT") {
	case "1":
		fakeAgent()
		os.Exit(0)
	case "mute":
		muteAgent()
	}
	testloop.Parallel(8)
	goleak.VerifyTestMain(m)
}

// muteReady is what muteAgent writes to its stderr once it ignores
// SIGTERM.
const muteReady = "mute agent ready"

// muteAgent reads its input and never answers, ignores SIGTERM and does
// not exit at the end of its input: only SIGKILL ends it.
func muteAgent() {
	signal.Ignore(syscall.SIGTERM)
	fmt.Fprintln(os.Stderr, muteReady)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
		}
	}()
	time.Sleep(time.Hour)
	os.Exit(1)
}

// fakeAgent is an ACP v2 agent with canned answers, for the client rules
// shellagent itself never exercises: unknown list items, an unreported
// list, abandoned work, a close without final updates, withdrawn
// permission requests; and for agents that misbehave: one that hangs in
// the middle of a turn, one that sends a line over the cap, one whose
// text holds escape sequences.
func fakeAgent() {
	goAt := "" // with LINECLIENT_FAKE_GO_AT=METHOD, the first start goes when METHOD comes, unanswered
	if starts := os.Getenv("LINECLIENT_FAKE_STARTS"); starts != "" {
		// Each start is counted in the file; the second one goes at once,
		// before it answers anything (a relay that lost its daemon).
		f, err := os.OpenFile(starts, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			f.WriteString("start\n")
			f.Close()
		}
		if b, _ := os.ReadFile(starts); strings.Count(string(b), "start") == 2 && os.Getenv("LINECLIENT_FAKE_GO_AT") == "" {
			os.Exit(0)
		} else if strings.Count(string(b), "start") == 1 {
			goAt = os.Getenv("LINECLIENT_FAKE_GO_AT")
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v) // Safe: the values are maps of plain data.
		out.Write(append(b, '\n'))
		out.Flush()
	}
	update := func(u map[string]any) {
		send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": "s1", "update": u}})
	}
	state := func(state, stop string, bg any) {
		u := map[string]any{"sessionUpdate": "state_update", "state": state}
		if stop != "" {
			u["stopReason"] = stop
		}
		if bg != nil {
			u["background"] = bg
		}
		update(u)
	}
	text := func(s string) []map[string]string { return []map[string]string{{"type": "text", "text": s}} }
	killGrace := "3s"
	options := func() []map[string]any {
		return []map[string]any{{"type": "select", "configId": "kill_grace", "name": "Kill grace", "currentValue": killGrace,
			"options": []map[string]string{{"value": "1s", "name": "1s"}, {"value": "3s", "name": "3s"}}}}
	}
	msgs := 0
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Prompt []struct {
					Text string `json:"text"`
				} `json:"prompt"`
				ConfigID string `json:"configId"`
				Value    string `json:"value"`
				Data     []byte `json:"data"` // _shellagent/terminal/write
			} `json:"params"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil {
			continue
		}
		reply := func(result any) { send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result}) }
		if m.Method != "" && m.Method == goAt {
			os.Exit(0) // a relay whose daemon closed the connection (an upgrade in place)
		}
		switch m.Method {
		case "initialize":
			res := map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "fake", "version": "1"}}
			if os.Getenv("LINECLIENT_FAKE_METHODS") == "1" {
				res["_meta"] = map[string]any{"shellagent": map[string]any{"methods": []string{"_shellagent/terminal/write", "_shellagent/terminal/resize"}}}
			}
			reply(res)
		case "_shellagent/terminal/resize":
			reply(map[string]any{})
		case "_shellagent/terminal/write":
			// term_t echoes what is typed, as a PTY does, and Ctrl-D ends it.
			reply(map[string]any{})
			echo := strings.ReplaceAll(string(m.Params.Data), "\r", "\r\n")
			update(map[string]any{"sessionUpdate": "terminal_output_chunk", "terminalId": "term_t", "data": base64.StdEncoding.EncodeToString([]byte(echo))})
			if strings.Contains(echo, "\x04") {
				update(map[string]any{"sessionUpdate": "terminal_update", "terminalId": "term_t", "exitStatus": map[string]int{"exitCode": 0}})
				state("idle", "end_turn", []any{})
			}
		case "session/new":
			reply(map[string]any{"sessionId": "s1", "availableCommands": []map[string]string{{"name": "stop"}}, "configOptions": options()})
		case "session/list":
			reply(map[string]any{"sessions": []map[string]string{{"sessionId": "s1", "cwd": "/"}}})
		case "session/resume":
			// term_5 of "listed" runs on, and wrote a line while the client
			// was away.
			update(map[string]any{"sessionUpdate": "terminal_update", "terminalId": "term_5", "command": "serve",
				"output": map[string]string{"data": base64.StdEncoding.EncodeToString([]byte("meanwhile\r\n"))}})
			state("idle", "", []any{map[string]string{"type": "terminal", "terminalId": "term_5"}})
			reply(map[string]any{"availableCommands": []map[string]string{{"name": "stop"}}, "configOptions": options()})
		case "session/set_config_option":
			if m.Params.ConfigID == "kill_grace" {
				killGrace = m.Params.Value
			}
			reply(map[string]any{"configOptions": options()})
		case "session/close":
			reply(map[string]any{})
		case "session/cancel":
			update(map[string]any{"sessionUpdate": "agent_message", "messageId": "cancel", "content": []map[string]string{{"type": "text", "text": "cancel received"}}})
			state("idle", "cancelled", []any{})
		case "session/prompt":
			if m.Params.Prompt[0].Text == "refuse" {
				send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32602, "message": "refused\x1b[2J"}})
				continue
			}
			msgs++
			id := fmt.Sprintf("m%d", msgs)
			update(map[string]any{"sessionUpdate": "user_message", "messageId": id, "content": []map[string]string{{"type": "text", "text": m.Params.Prompt[0].Text}}})
			reply(map[string]string{"messageId": id})
			state("running", "", []any{})
			switch m.Params.Prompt[0].Text {
			case "unknown":
				state("idle", "end_turn", []any{map[string]any{"type": "_future", "x": 1}})
			case "unreported":
				state("idle", "end_turn", nil)
			case "abandon":
				update(map[string]any{"sessionUpdate": "terminal_update", "terminalId": "term_9", "command": "lost"})
				update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call_9", "title": "lost job", "kind": "other", "status": "in_progress"})
				state("idle", "end_turn", []any{})
			case "listed":
				update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call_5", "title": "serve", "kind": "execute", "status": "in_progress", "content": []map[string]string{{"type": "terminal", "terminalId": "term_5"}}})
				update(map[string]any{"sessionUpdate": "terminal_update", "terminalId": "term_5", "command": "serve"})
				state("idle", "end_turn", []any{map[string]string{"type": "terminal", "terminalId": "term_5"}})
			case "ask":
				send(map[string]any{"jsonrpc": "2.0", "id": "p1", "method": "session/request_permission", "params": map[string]any{
					"sessionId": "s1", "title": "Run rm", "subject": map[string]string{"type": "command", "command": "rm x", "cwd": "/"},
					"options": []map[string]string{{"optionId": "yes", "name": "Yes", "kind": "allow_once"}, {"optionId": "no", "name": "No", "kind": "reject_once"}}}})
			case "withdraw":
				send(map[string]any{"jsonrpc": "2.0", "id": "p2", "method": "session/request_permission", "params": map[string]any{
					"sessionId": "s1", "title": "Run ls", "options": []map[string]string{{"optionId": "yes", "name": "Yes", "kind": "allow_once"}}}})
				send(map[string]any{"jsonrpc": "2.0", "method": "$/cancel_request", "params": map[string]string{"requestId": "p2"}})
			case "die":
				os.Exit(3) // in the middle of the turn
			case "hang":
				// Stops answering, reading and ending: only SIGKILL ends it.
				// It says so once SIGTERM is ignored.
				signal.Ignore(syscall.SIGTERM)
				update(map[string]any{"sessionUpdate": "agent_message", "messageId": "h", "content": text("hanging")})
				time.Sleep(time.Hour)
			case "flood":
				// A line of 20 MiB, over the 16 MiB cap; the turn goes on.
				update(map[string]any{"sessionUpdate": "agent_message", "messageId": "big", "content": text(strings.Repeat("x", 20<<20))})
				state("idle", "end_turn", []any{})
			case "escape":
				update(map[string]any{"sessionUpdate": "agent_message", "messageId": "e1", "content": text(escapes)})
				update(map[string]any{"sessionUpdate": "agent_message_chunk", "messageId": "e2", "content": map[string]string{"type": "text", "text": "chunk\x1b[31m red\n"}})
				update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call_e", "title": "job\x1b[5m", "kind": "other", "status": "in_progress"})
				update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call_e", "status": "completed",
					"content": []map[string]any{{"type": "content", "content": map[string]string{"type": "text", "text": "done\u009b2J"}}}})
				update(map[string]any{"sessionUpdate": "terminal_update", "terminalId": "term_e", "command": "raw"})
				update(map[string]any{"sessionUpdate": "terminal_output_chunk", "terminalId": "term_e", "data": base64.StdEncoding.EncodeToString([]byte(rawOutput))})
				update(map[string]any{"sessionUpdate": "terminal_update", "terminalId": "term_e", "exitStatus": map[string]int{"exitCode": 0}})
				state("idle", "end_turn", []any{})
			case "reader", "/send term_r x", "elsewhere":
				// term_r waits for input: at first, after the person
				// typed into it, and after input from elsewhere.
				if m.Params.Prompt[0].Text == "reader" {
					update(map[string]any{"sessionUpdate": "terminal_update", "terminalId": "term_r", "command": "read loop"})
				} else {
					update(map[string]any{"sessionUpdate": "agent_message", "messageId": "t", "content": text("typed")})
				}
				update(map[string]any{"sessionUpdate": "notice", "severity": "info", "title": "term_r is waiting for input: read loop",
					"description": "Type a line with /send term_r TEXT.", "_meta": map[string]any{"shellagent": map[string]string{"terminalId": "term_r", "event": "waiting_for_input"}}})
				state("idle", "end_turn", []any{map[string]string{"type": "terminal", "terminalId": "term_r"}})
			case "result":
				// A wait's result, in its tool call and in a message, as
				// shellagent says it; then a message of its own.
				update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call_w", "title": "wait for term_1", "kind": "search", "status": "in_progress"})
				update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call_w", "status": "completed",
					"content": []map[string]any{{"type": "content", "content": map[string]string{"type": "text", "text": "term_1 printed ready."}}}})
				update(map[string]any{"sessionUpdate": "agent_message", "messageId": "r1", "content": text("term_1 printed ready.")})
				update(map[string]any{"sessionUpdate": "agent_message", "messageId": "r2", "content": text("term_1 printed ready.")})
				state("idle", "end_turn", []any{})
			case "wait":
				// The turn ends when the client cancels it.
			case "cat":
				update(map[string]any{"sessionUpdate": "terminal_update", "terminalId": "term_t", "command": "cat"})
			case "slowcat":
				// cat, which passes the foreground timeout at once.
				update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call_s", "title": "slowcat", "kind": "execute", "status": "in_progress",
					"content": []map[string]string{{"type": "terminal", "terminalId": "term_t"}}})
				update(map[string]any{"sessionUpdate": "terminal_update", "terminalId": "term_t", "command": "slowcat"})
				update(map[string]any{"sessionUpdate": "terminal_output_chunk", "terminalId": "term_t", "data": base64.StdEncoding.EncodeToString([]byte("partial"))})
				update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call_s", "status": "completed",
					"content": []map[string]any{{"type": "terminal", "terminalId": "term_t"}, {"type": "content", "content": map[string]string{"type": "text", "text": "Still running after the 1s foreground timeout: moved to the background."}}}})
				state("idle", "end_turn", []any{map[string]string{"type": "terminal", "terminalId": "term_t"}})
			default:
				state("idle", "end_turn", []any{})
			}
		case "":
			if len(m.ID) > 0 { // an answer to a permission request
				text := fmt.Sprintf("answer to %s: %s", m.ID, m.Result)
				update(map[string]any{"sessionUpdate": "agent_message", "messageId": "ans", "content": []map[string]string{{"type": "text", "text": text}}})
				state("idle", "end_turn", []any{})
			}
		}
	}
	if os.Getenv("LINECLIENT_FAKE_EOF_EXIT") == "1" {
		os.Exit(1) // a relay whose daemon closed the connection as its input ended
	}
}

// withFake returns cfg set to run the test binary as a fake agent: mode
// "1" is fakeAgent, "mute" is muteAgent. The agent's environment holds a
// marker of the test's own, and at the end of the test no process may
// hold it.
func withFake(t *testing.T, cfg Config, mode string) Config {
	t.Helper()
	marker := "LINECLIENT_TEST=" + rand.Text()
	cfg.Agent = []string{os.Args[0]}
	cfg.Env = append(os.Environ(), "LINECLIENT_FAKE_AGENT="+mode, noExitDelay, marker)
	cfg.Cwd = "/"
	t.Cleanup(func() { noneLeft(t, marker) })
	return cfg
}

// noneLeft fails the test for each live process whose environment holds
// marker, and kills it.
func noneLeft(t *testing.T, marker string) {
	t.Helper()
	for _, pid := range acptest.ProcessesWith(marker) {
		t.Errorf("process %d left behind", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL) // Best effort: clean up after the failure.
	}
}

// runFake runs the client against the fake agent on input and returns
// what it printed and the trace.
func runFake(t *testing.T, cfg Config) (string, string) {
	t.Helper()
	var out, trace strings.Builder
	cfg = withFake(t, cfg, "1")
	cfg.Output, cfg.Trace = &out, &trace
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Run(ctx, cfg); err != nil {
		t.Errorf("Run: %v\noutput:\n%s", err, out.String())
	}
	return out.String(), trace.String()
}

func TestClientRules(t *testing.T) {
	tests := []struct {
		name  string
		input string
		perms Permissions
		want  []string
		not   []string
	}{
		{"an unknown item is work", "unknown\n", "", []string{
			"[background: an item of type _future]",
			"[closing the session will stop 1 background item: an item of type _future]",
		}, nil},
		{"an unreported list is unknown, never quiet", "unreported\n", "", []string{
			"[background: not reported (what runs in the background is unknown)]",
			"[the agent does not report its background work: closing the session stops whatever still runs]",
		}, []string{"quiet", "abandoned"}},
		{"unfinished work left out while idle is abandoned", "abandon\n", "", []string{
			"[call_9 abandoned: unfinished, not listed, and the session is idle]",
			"[term_9 abandoned: unfinished, not listed, and the session is idle]",
		}, nil},
		{"a close without final updates stops listed work", "listed\n", "", []string{
			"[background: term_5 (serve)]",
			"[closing the session will stop 1 background item: term_5 (serve)]",
			"[call_5 cancelled by the close]\n[term_5 stopped by the close: exit status unknown]\n[session closed]\n",
		}, []string{"abandoned"}},
		{"permissions: reject in scripts by default", "ask\n", "", []string{
			`[permission requested: Run rm (run "rm x" in /)]`,
			"[answered no by --permissions reject]",
			`answer to "p1": {"outcome":{"optionId":"no","outcome":"selected"}}`,
		}, nil},
		{"permissions: allow", "ask\n", PermissionsAllow, []string{
			"[answered yes by --permissions allow]",
			`answer to "p1": {"outcome":{"optionId":"yes","outcome":"selected"}}`,
		}, nil},
		{"permissions: ask takes the next line", "ask\nmaybe\ny\n", PermissionsAsk, []string{
			"[answer with one of: yes, no]",
			`["maybe" is not an answer; answer with one of: yes, no]`,
			"[answered yes]",
			`answer to "p1": {"outcome":{"optionId":"yes","outcome":"selected"}}`,
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := runFake(t, Config{Input: strings.NewReader(tt.input), Permissions: tt.perms})
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("output says %q:\n%s", n, out)
				}
			}
		})
	}
}

// A tool call's result that the agent also says in a message (a /wait's)
// is printed once; a second message that says it again is printed.
// Issue 23: /wait results were printed twice.
func TestResultPrintedOnce(t *testing.T) {
	t.Parallel()
	out, _ := runFake(t, Config{Input: strings.NewReader("result\n")})
	want := "[call_w in_progress: wait for term_1]\n[call_w completed: term_1 printed ready.]\nterm_1 printed ready.\n[session closed]\n"
	if !strings.Contains(out, want) {
		t.Errorf("printed:\n%s\nwant:\n%s", out, want)
	}
}

// A terminal that waits for input again after the person typed into it is
// not said to wait again; after input from elsewhere it is. Issue 23: the
// waiting-for-input notice repeated after every /send.
func TestWaitingNoticeOncePerTyping(t *testing.T) {
	t.Parallel()
	out, _ := runFake(t, Config{Input: strings.NewReader("reader\n/send term_r x\n/send term_r x\nelsewhere\n")})
	const notice = "[term_r is waiting for input: read loop]\nType a line with /send term_r TEXT.\n"
	first, last := strings.Index(out, notice), strings.LastIndex(out, notice)
	if strings.Count(out, notice) != 2 || first > strings.Index(out, "> /send") || last < strings.Index(out, "> elsewhere") {
		t.Errorf("printed:\n%s\nwant the notice before the first /send and after elsewhere only", out)
	}
}

// syncBuffer is an output that the test reads while Run writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the output holds s, or fails the test.
func (b *syncBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	if !b.await(s) {
		t.Fatalf("no %q in the output:\n%s", s, b.String())
	}
}

// await waits up to 20 s for the output to hold s, and reports whether
// it does. Unlike waitFor it may be called from any goroutine.
func (b *syncBuffer) await(s string) bool {
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// An interrupt sends session/cancel; the script goes on once the turn has
// ended, and the end of the input closes the session.
func TestInterruptSendsCancel(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	interrupts := make(chan os.Signal, 1)
	var out, trace syncBuffer
	cfg := withFake(t, Config{Input: r, Output: &out, Trace: &trace, Interrupts: interrupts}, "1")
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), cfg)
	}()
	if _, err := w.WriteString("wait\nnext\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "> wait\n")
	interrupts <- os.Interrupt
	out.waitFor(t, "[turn cancelled]\n> next\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(trace.String(), `{"client":{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}}`) ||
		!strings.Contains(out.String(), "cancel received\n") || !strings.HasSuffix(out.String(), "[session closed]\n") {
		t.Errorf("output:\n%s\ntrace:\n%s", out.String(), trace.String())
	}
}

// A permission request the agent withdraws with $/cancel_request is
// answered cancelled and no longer waits for an answer.
func TestWithdrawnPermission(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out syncBuffer
	cfg := withFake(t, Config{Input: r, Output: &out, Permissions: PermissionsAsk}, "1")
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), cfg) }()
	if _, err := w.WriteString("withdraw\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "[the agent withdrew its permission request: Run ls]\n")
	out.waitFor(t, `answer to "p2": {"outcome":{"outcome":"cancelled"}}`)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// An agent that dies in the middle of a turn ends the run with
// ErrAgentExited, at once: the script does not wait for a turn that will
// never end, nor send its next line.
func TestAgentThatDies(t *testing.T) {
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, withFake(t, Config{Input: strings.NewReader("die\nnever sent\n"), Output: &out}, "1"))
	if !errors.Is(err, ErrAgentExited) || ctx.Err() != nil {
		t.Errorf("Run: %v (context: %v), want %v before the context ends", err, ctx.Err(), ErrAgentExited)
	}
	if !strings.HasSuffix(out.String(), "> die\n[the agent closed its output]\n") {
		t.Errorf("output:\n%s", out.String())
	}
}

// A setting's refusal reads without the request shape meant for client
// developers (issue 23: the wire JSON was printed to a person).
func TestRefusal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ msg, want string }{
		{`value: "soon" is not a value of foreground_timeout: want a duration such as 10s, 500ms or 1m30s; send params {"sessionId":"s","configId":"foreground_timeout","type":"id","value":"10s"}, with value one of: 0, 1s or any other duration, e.g. 7s or 1m30s`,
			"want a duration such as 10s, 500ms or 1m30s; offered: 0, 1s or any other duration, e.g. 7s or 1m30s"},
		{`value: "maybe" is not a value of permission; send params {"sessionId":"s","configId":"permission","type":"id","value":"allow"}, with value one of: allow, ask`,
			"want one of: allow, ask"},
		{`type: "boolean" is not supported; send params {"sessionId":"s","configId":"permission","type":"id","value":"allow"}, with value one of: allow, ask`,
			`type: "boolean" is not supported; offered: allow, ask`},
		{`configId: unknown option "colour" (options: a, b)`, `configId: unknown option "colour" (options: a, b)`},
	} {
		if got := refusal(tt.msg); got != tt.want {
			t.Errorf("refusal(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}
