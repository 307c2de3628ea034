package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/protocol/acptest"
)

// Typing into terminals, sizing them, their tail, and the notices, on
// the real binary through the strict client: every message is checked
// against the schema as it is read, and the RFD's rules when the test
// ends.

// startCheckedAgent is startAgent, with the RFD's rules checked over the
// whole transcript once the agent has exited (cleanups run last first).
func startCheckedAgent(t *testing.T, args ...string) *agent {
	var a *agent
	t.Cleanup(func() {
		if a != nil {
			a.c.Check()
		}
	})
	a = startAgent(t, args...)
	return a
}

// agentMessage waits for an agent_message of session sid that contains
// text.
func (a *agent) agentMessage(sid, text string) *acptest.Msg {
	a.t.Helper()
	return a.c.WaitFor("agent message "+text, func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.Kind == "agent_message" && strings.Contains(m.Text(), text)
	})
}

// notices returns the notices of session sid about terminal term so far.
func (a *agent) notices(sid, term string) []*acptest.Msg {
	var out []*acptest.Msg
	for _, m := range a.c.Updates(sid) {
		if m.Kind == "notice" && noticeTerminal(m) == term {
			out = append(out, m)
		}
	}
	return out
}

// waitNotice waits for the n-th notice of session sid about term and
// returns it.
func (a *agent) waitNotice(sid, term string, n int) *acptest.Msg {
	a.t.Helper()
	a.c.WaitFor("notice about "+term, func(*acptest.Msg) bool { return len(a.notices(sid, term)) >= n })
	return a.notices(sid, term)[n-1]
}

// noticeTerminal is the terminal a notice's _meta.shellagent names.
func noticeTerminal(m *acptest.Msg) string {
	meta, _ := m.Meta("shellagent")["terminalId"].(string)
	return meta
}

// write types data into a terminal with _shellagent/terminal/write.
func (a *agent) write(sid, term, data string) (json.RawMessage, *acptest.RPCError) {
	return a.c.Call("_shellagent/terminal/write", map[string]any{
		"sessionId": sid, "terminalId": term, "data": base64.StdEncoding.EncodeToString([]byte(data)),
	})
}

func (a *agent) setOption(sid, id, value string) {
	a.t.Helper()
	a.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": id, "type": "id", "value": value}, nil)
}

func exitCodeOf(es map[string]any) (float64, bool) {
	code, ok := es["exitCode"].(float64)
	return code, ok
}

func TestInitializeAdvertisesTheExtensionMethods(t *testing.T) {
	t.Parallel()
	a := startCheckedAgent(t)
	i := slices.IndexFunc(a.c.Transcript(), func(m *acptest.Msg) bool { return m.ReqMethod == "initialize" })
	var res struct {
		Meta struct {
			Shellagent struct{ Methods []string } `json:"shellagent"`
		} `json:"_meta"`
	}
	if i < 0 || json.Unmarshal(a.c.Transcript()[i].Result, &res) != nil ||
		!slices.Equal(res.Meta.Shellagent.Methods, []string{"_shellagent/terminal/write", "_shellagent/terminal/resize", "_shellagent/session/look", "_shellagent/service/read"}) {
		t.Errorf("initialize answered _meta %+v", res.Meta)
	}
}

// A program that reads a line gets it from /send, and from
// _shellagent/terminal/write.
func TestTypingALine(t *testing.T) {
	t.Parallel()
	a := startCheckedAgent(t)
	sid := a.session()

	a.prompt(sid, "read x; echo got $x")
	a.waitNotice(sid, "term_1", 1)
	a.prompt(sid, "/send term_1 hello")
	a.agentMessage(sid, `Typed "hello" and Enter into term_1.`)
	a.waitOutput(sid, "term_1", "got hello")
	if code, ok := exitCodeOf(a.exitStatus(sid, "term_1")); !ok || code != 0 {
		t.Errorf("term_1 exit %v", a.exitStatus(sid, "term_1"))
	}

	a.prompt(sid, "read x; echo got $x")
	a.waitNotice(sid, "term_2", 1)
	if res, err := a.write(sid, "term_2", "hello\r"); err != nil || string(res) != "{}" {
		t.Fatalf("write answered %s, %v", res, err)
	}
	a.waitOutput(sid, "term_2", "got hello")
	if code, ok := exitCodeOf(a.exitStatus(sid, "term_2")); !ok || code != 0 {
		t.Errorf("term_2 exit %v", a.exitStatus(sid, "term_2"))
	}
}

// Ctrl-C typed with /keys is the terminal's own SIGINT.
func TestKeysInterrupt(t *testing.T) {
	t.Parallel()
	a := startCheckedAgent(t)
	sid := a.session()
	a.prompt(sid, "sleep 100")
	a.c.WaitFor("term_1", func(m *acptest.Msg) bool { return m.TerminalID() == "term_1" })
	// Ctrl-C that comes before sleep runs finds the shell, which may
	// take it for itself and start sleep anyway: type it once sleep runs.
	waitFor(t, "sleep to run", func() bool {
		return slices.ContainsFunc(a.processes(), func(pid int) bool {
			cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			return string(cmdline) == "sleep\x00100\x00"
		})
	})
	a.prompt(sid, "/keys term_1 C-c")
	a.agentMessage(sid, "Typed C-c into term_1.")
	if es := a.exitStatus(sid, "term_1"); es["signal"] != "SIGINT" {
		t.Errorf("exitStatus %v, want signal SIGINT", es)
	}
	a.c.WaitFor("the turn ends", func(m *acptest.Msg) bool { return m.SessionID == sid && m.StopReason() == "end_turn" })
}

// A resize reaches the program (stty size reads it back) and the client
// (a terminal_update with the size), by the method and by /resize.
func TestResize(t *testing.T) {
	t.Parallel()
	a := startCheckedAgent(t)
	sid := a.session()
	sizeUpdate := func(term string, cols, rows float64) *acptest.Msg {
		for _, m := range a.c.Updates(sid) {
			if s, ok := m.Update["size"].(map[string]any); ok && m.TerminalID() == term && m.Kind == "terminal_update" && s["cols"] == cols && s["rows"] == rows {
				return m
			}
		}
		return nil
	}

	a.prompt(sid, "read x; stty size")
	a.c.WaitFor("term_1", func(m *acptest.Msg) bool { return m.TerminalID() == "term_1" })
	res, err := a.c.Call("_shellagent/terminal/resize", map[string]any{"sessionId": sid, "terminalId": "term_1", "size": map[string]int{"cols": 200, "rows": 50}})
	if err != nil || string(res) != "{}" {
		t.Fatalf("resize answered %s, %v", res, err)
	}
	if sizeUpdate("term_1", 200, 50) == nil { // sent before the answer
		t.Errorf("no terminal_update with the new size before the answer")
	}
	a.prompt(sid, "/send term_1")
	a.waitOutput(sid, "term_1", "50 200\r\n")

	a.prompt(sid, "read x; stty size")
	a.c.WaitFor("term_2", func(m *acptest.Msg) bool { return m.TerminalID() == "term_2" })
	a.prompt(sid, "/resize term_2 100x30")
	a.agentMessage(sid, "Resized term_2 to 100 columns and 30 rows.")
	if sizeUpdate("term_2", 100, 30) == nil {
		t.Errorf("no terminal_update with the size set by /resize")
	}
	a.prompt(sid, "/send term_2")
	a.waitOutput(sid, "term_2", "30 100\r\n")
}

// The waiting-for-input notice: once per wait, again once the program
// has read and waits anew, never for a program that does not read.
func TestInputWaitNotice(t *testing.T) {
	t.Parallel()
	a := startCheckedAgent(t)
	sid, quiet := a.session(), a.session()
	a.prompt(quiet, "sleep 5")
	a.prompt(sid, "read a; echo got $a; read b; echo got $b")

	n := a.waitNotice(sid, "term_1", 1)
	if n.Update["severity"] != "info" || !strings.Contains(n.Update["title"].(string), "term_1 is waiting for input") ||
		!strings.Contains(n.Update["description"].(string), "/send term_1 ") {
		t.Errorf("notice %s", n)
	}
	// Looks go on while it waits (at 0.6 s, 1.2 s, 2.4 s after the
	// first): none is noticed again.
	time.Sleep(3 * time.Second)
	if got := len(a.notices(sid, "term_1")); got != 1 {
		t.Errorf("%d notices for one wait", got)
	}
	a.prompt(sid, "/send term_1 one")
	a.waitOutput(sid, "term_1", "got one")
	a.waitNotice(sid, "term_1", 2)
	a.prompt(sid, "/send term_1 two")
	a.exitStatus(sid, "term_1")

	a.exitStatus(quiet, "term_1")
	for _, m := range a.c.Updates(quiet) {
		if m.Kind == "notice" {
			t.Errorf("a notice for sleep 5: %s", m)
		}
	}
	if got := len(a.notices(sid, "term_1")); got != 2 {
		t.Errorf("%d notices for two waits", got)
	}
}

// A background terminal that ends on its own is noticed as the notify
// option says; one that is stopped is not.
func TestExitNotices(t *testing.T) {
	t.Parallel()
	a := startCheckedAgent(t)
	// settled waits until the terminal's exit has been reported and the
	// agent has answered a prompt since: any notice about it came first.
	settled := func(sid, term string) {
		t.Helper()
		a.exitStatus(sid, term)
		a.prompt(sid, "/ps")
	}

	sid := a.session() // notify: failures
	a.prompt(sid, "/bg sh -c 'sleep 0.2; exit 3'")
	n := a.waitNotice(sid, "term_1", 1)
	if n.Update["severity"] != "warning" || n.Update["title"] != "term_1 exited with code 3: sh -c 'sleep 0.2; exit 3'" ||
		!strings.Contains(n.Update["description"].(string), "/tail term_1") {
		t.Errorf("crash notice %s", n)
	}
	a.prompt(sid, "/bg sh -c 'sleep 0.2; exit 0'")
	a.prompt(sid, "/bg sleep 100")
	a.waitProcesses(2) // the agent and sleep 100 (the first two may have ended)
	a.prompt(sid, "/stop term_3")
	settled(sid, "term_2")
	settled(sid, "term_3")
	if got := a.notices(sid, "term_2"); len(got) != 0 {
		t.Errorf("notify failures: a notice for exit 0: %s", got[0])
	}
	if got := a.notices(sid, "term_3"); len(got) != 0 {
		t.Errorf("a notice for /stop: %s", got[0])
	}
	// A command killed by a signal that no stop sent is a failure too.
	a.prompt(sid, "/bg sleep 0.2; kill -KILL $$")
	if n := a.waitNotice(sid, "term_4", 1); n.Update["severity"] != "warning" || n.Update["title"] != "term_4 ended by SIGKILL: sleep 0.2; kill -KILL $$" {
		t.Errorf("notice of a command killed on its own: %s", n)
	}
	// terminal/cancel, like /stop, sends none either.
	a.prompt(sid, "/bg echo ready; sleep 100")
	a.c.WaitFor("term_5 ready", func(*acptest.Msg) bool { return strings.Contains(string(a.c.Output(sid, "term_5")), "ready") })
	a.c.MustCall("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_5"}, nil)
	settled(sid, "term_5")
	if got := a.notices(sid, "term_5"); len(got) != 0 {
		t.Errorf("a notice for terminal/cancel: %s", got[0])
	}

	all := a.session()
	a.setOption(all, "notify", "all")
	a.prompt(all, "/bg sh -c 'sleep 0.2; exit 0'")
	if n := a.waitNotice(all, "term_1", 1); n.Update["severity"] != "info" || n.Update["title"] != "term_1 exited with code 0: sh -c 'sleep 0.2; exit 0'" {
		t.Errorf("notify all: exit 0 noticed as %s", n)
	}

	off := a.session()
	a.setOption(off, "notify", "off")
	a.prompt(off, "/bg sh -c 'sleep 0.2; exit 3'")
	a.prompt(off, "read x")
	time.Sleep(time.Second) // as long as it takes the input wait to be noticed
	a.prompt(off, "/keys term_2 C-c")
	settled(off, "term_1")
	settled(off, "term_2")
	for _, m := range a.c.Updates(off) {
		if m.Kind == "notice" {
			t.Errorf("notify off: %s", m)
		}
	}
}

// /tail shows the end of a background terminal's output as text.
func TestTail(t *testing.T) {
	t.Parallel()
	a := startCheckedAgent(t)
	sid := a.session()
	const line = `printf '\033[1mred\033[0m\n'; seq 30 | sed 's/^/line /'; printf 'a\rb\n\033]0;t\a'; sleep 99`
	short := string([]rune(line)[:59]) + "…"
	a.prompt(sid, "/bg "+line)
	a.waitOutput(sid, "term_1", "a\rb\r\n")

	a.prompt(sid, "/tail term_1 3")
	m := a.agentMessage(sid, "Output of term_1")
	if want := "Output of term_1 (" + short + ", running), the last 3 lines, escape sequences removed:\n```\nline 29\nline 30\nb\n```"; m.Text() != want {
		t.Errorf("/tail term_1 3 answered\n%q\nwant\n%q", m.Text(), want)
	}
	a.prompt(sid, "/tail term_1")
	if m := a.agentMessage(sid, "the last 20 lines"); !strings.Contains(m.Text(), "```\nline 12\n") {
		t.Errorf("/tail term_1 answered %q", m.Text())
	}
	a.prompt(sid, "/tail term_1 100")
	if m := a.agentMessage(sid, "all 32 lines"); !strings.Contains(m.Text(), "```\nred\nline 1\n") || strings.Contains(m.Text(), "\x1b") {
		t.Errorf("/tail term_1 100 answered %q", m.Text())
	}
	a.prompt(sid, "/tail term_9")
	a.agentMessage(sid, `Cannot show term_9: no terminal "term_9" in this session.`)
	a.prompt(sid, "/stop term_1")
	a.exitStatus(sid, "term_1")
	a.prompt(sid, "/tail term_1 1")
	a.agentMessage(sid, "Output of term_1 ("+short+", ended by SIGTERM), the last 1 line")
}

// /tail of a terminal whose last line is longer than the text it shows
// (16 KiB) shows that line's end. Before, it answered "No output from
// term_1", for a line of 20,000 characters as for one of 100 MB.
func TestTailOfALongLine(t *testing.T) {
	t.Parallel()
	a := startCheckedAgent(t)
	sid := a.session()
	a.prompt(sid, `/bg head -c 20000 /dev/zero | tr '\0' b; printf 'c\n'; sleep 99`)
	a.waitOutput(sid, "term_1", "bc\r\n")
	a.prompt(sid, "/tail term_1 3")
	m := a.c.WaitFor("the tail", func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.Kind == "agent_message" && strings.Contains(m.Text(), "term_1 (")
	})
	want := "the end of its last line, escape sequences removed:\n```\n…" + strings.Repeat("b", 16<<10-1) + "c\n```"
	if !strings.HasPrefix(m.Text(), "Output of term_1 (") || !strings.HasSuffix(m.Text(), want) {
		t.Errorf("/tail term_1 3 answered %.200q", m.Text())
	}
	a.prompt(sid, "/stop term_1")
	a.exitStatus(sid, "term_1")
}

// Bad input to the methods gets an error naming what is wrong and
// changes nothing; a program that does not read gets an error, not a
// hang, and the agent goes on.
func TestTerminalInputErrors(t *testing.T) {
	t.Parallel()
	a := startCheckedAgent(t)
	sid := a.session()
	a.prompt(sid, "echo done")
	a.exitStatus(sid, "term_1")
	a.prompt(sid, "/bg stty raw -echo; echo ready; sleep 100")
	a.waitOutput(sid, "term_2", "ready")

	tests := []struct {
		method string
		params map[string]any
		code   int
		says   string
	}{
		{"_shellagent/terminal/write", map[string]any{"sessionId": sid, "terminalId": "term_9", "data": "aGk="}, -32602, `terminalId: no terminal "term_9"`},
		{"_shellagent/terminal/write", map[string]any{"sessionId": sid, "terminalId": "term_1", "data": "aGk="}, -32602, "terminalId: term_1 has already exited"},
		{"_shellagent/terminal/write", map[string]any{"sessionId": sid, "terminalId": "term_2", "data": "not base64!"}, -32602, "data: must be base64"},
		{"_shellagent/terminal/write", map[string]any{"sessionId": "sess_x", "terminalId": "term_2", "data": "aGk="}, -32002, "session not found"},
		{"_shellagent/terminal/resize", map[string]any{"sessionId": sid, "terminalId": "term_1", "size": map[string]int{"cols": 80, "rows": 24}}, -32602, "terminalId: term_1 has already exited"},
		{"_shellagent/terminal/resize", map[string]any{"sessionId": sid, "terminalId": "term_2", "size": map[string]int{"cols": 80, "rows": 0}}, -32602, "size.rows: expected an integer from 1 to 10000, got 0"},
		{"_shellagent/terminal/resize", map[string]any{"sessionId": sid, "terminalId": "term_2", "size": map[string]any{"cols": "wide", "rows": 24}}, -32602, "size.cols"},
		{"_shellagent/terminal/resize", map[string]any{"sessionId": sid, "terminalId": "term_2"}, -32602, "size: required"},
	}
	for _, tt := range tests {
		if _, err := a.c.Call(tt.method, tt.params); err == nil || err.Code != tt.code || !strings.Contains(err.Message, tt.says) {
			t.Errorf("%s %v answered %v, want %d saying %q", tt.method, tt.params, err, tt.code, tt.says)
		}
	}

	// sleep never reads: its input buffer fills, and each write that
	// finds it full fails at once. (The kernel moves input between the
	// PTY's buffer and the line discipline's in the background, so a write
	// may fail before both are full: writes go on until one writes
	// nothing.)
	big := strings.Repeat("x", 60<<10)
	start := time.Now()
	total := 0
	for i := 0; ; i++ {
		_, err := a.write(sid, "term_2", big)
		if err == nil || err.Code != -32800 || !strings.Contains(err.Message, "input buffer of term_2 is full") {
			t.Fatalf("a write to a full buffer answered %v", err)
		}
		var data struct{ Written *int }
		if json.Unmarshal(err.Data, &data) != nil || data.Written == nil || *data.Written < 0 || *data.Written >= len(big) {
			t.Fatalf("error data %s", err.Data)
		}
		total += *data.Written
		if *data.Written == 0 {
			break
		}
		if i == 100 {
			t.Fatalf("the buffer never filled: %d bytes written", total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the failing writes took %v", d)
	}
	a.prompt(sid, "/send term_2 more")
	a.agentMessage(sid, "Cannot type into term_2: the input buffer of term_2 is full")
	a.prompt(sid, "/send term_1 late")
	a.agentMessage(sid, "Cannot type into term_1: terminalId: term_1 has already exited.")
	a.prompt(sid, "/ps")
	a.agentMessage(sid, "term_2  terminal")
	a.prompt(sid, "/stop term_2")
	a.exitStatus(sid, "term_2")
}

// In v1, without the terminal capability: /send types, /tail shows the
// output that the client has no other way to see, a notice arrives as an
// agent_message_chunk, and a background exit is told once, as the exit
// message (its exit notice would say the same).
func TestV1TerminalInput(t *testing.T) {
	t.Parallel()
	a := startV1(t, false)
	sid := a.session()
	a.turn(sid, "/bg read x; echo got $x; exit 3", "end_turn")
	waiting := a.message(nil, "term_1 is waiting for input")
	if id, _ := waiting.Update["messageId"].(string); !strings.HasPrefix(id, "notice_") {
		t.Errorf("notice as %s", waiting)
	}
	a.turn(sid, "/send term_1 hello", "end_turn")
	a.message(waiting, `Typed "hello" and Enter into term_1.`)
	exited := a.message(waiting, "term_1 (read x; echo got $x; exit 3) ended: exit 3.")
	a.turn(sid, "/tail term_1", "end_turn")
	a.message(exited, "Output of term_1 (read x; echo got $x; exit 3, exited with code 3), all 2 lines, escape sequences removed:\n```\nhello\ngot hello\n```")

	a.set(sid, "notify", "all")
	a.turn(sid, "/bg read x; stty size", "end_turn")
	a.turn(sid, "/resize term_2 200x50", "end_turn")
	a.turn(sid, "/keys term_2 Entr", "end_turn")
	a.message(exited, `/keys: unknown key "Entr". Keys are named as tmux send-keys names them`)
	a.turn(sid, "/keys term_2 Enter", "end_turn")
	done := a.message(exited, "term_2 (read x; stty size) ended: exit 0.")
	a.turn(sid, "/tail term_2 1", "end_turn")
	a.message(done, "```\n50 200\n```")
}
