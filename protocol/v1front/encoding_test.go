package v1front

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
)

// v1Line is what a test reads of a v1 session/update line.
type v1Line struct {
	Kind, Call, Status string
	Text               string
	Info, Output, Exit map[string]any
}

func decodeV1(t *testing.T, out []byte) []v1Line {
	t.Helper()
	var lines []v1Line
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct {
			Method string
			Params struct {
				Update struct {
					SessionUpdate, ToolCallID, Status string
					Content                           json.RawMessage // a tool call's items, or a chunk's block
					Meta                              struct {
						Info   map[string]any `json:"terminal_info"`
						Output map[string]any `json:"terminal_output"`
						Exit   map[string]any `json:"terminal_exit"`
					} `json:"_meta"`
				}
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.Method != "session/update" {
			t.Fatalf("line %s: %v", sc.Bytes(), err)
		}
		u := m.Params.Update
		l := v1Line{Kind: u.SessionUpdate, Call: u.ToolCallID, Status: u.Status, Info: u.Meta.Info, Output: u.Meta.Output, Exit: u.Meta.Exit}
		var block struct{ Text string }
		var items []struct {
			Type    string
			Content struct{ Text string }
		}
		switch {
		case len(u.Content) == 0:
		case json.Unmarshal(u.Content, &items) == nil:
			for _, c := range items {
				l.Text += c.Content.Text
			}
		case json.Unmarshal(u.Content, &block) == nil:
			l.Text = block.Text
		default:
			t.Fatalf("line %s: content", sc.Bytes())
		}
		lines = append(lines, l)
	}
	return lines
}

// v1Command encodes a command's life for a v1 client: its tool call, its
// output in the given chunks, its exit and its final status.
func v1Command(t *testing.T, meta bool, chunks ...string) []v1Line {
	t.Helper()
	e := newACPV1(meta)
	var out []byte
	add := func(b []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out = b
	}
	add(e.AppendUpdate(out, "s", &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "cmd", Kind: "execute", Status: acp.StatusInProgress,
		Content: []acp.ToolCallContent{acp.TerminalContent("term_1")}, RawInput: map[string]string{"command": "cmd", "cwd": "/w"},
	}))
	o := e.Output("s", "term_1")
	for _, c := range chunks {
		out = o.AppendChunk(out, []byte(c))
	}
	code := 0
	add(e.AppendUpdate(out, "s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1", ExitStatus: &acp.ExitStatus{ExitCode: &code}}))
	add(e.AppendUpdate(out, "s", &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Status: acp.StatusCompleted}))
	return decodeV1(t, out)
}

// data joins the terminal_output data of lines.
func data(lines []v1Line) string {
	var sb strings.Builder
	for _, l := range lines {
		if l.Output != nil {
			sb.WriteString(l.Output["data"].(string))
		}
	}
	return sb.String()
}

// TestV1SplitCharacters cuts é, 漢 and 😀 at every byte: each arrives
// whole, never as U+FFFD.
func TestV1SplitCharacters(t *testing.T) {
	const text = "aé漢😀z"
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			lines := v1Command(t, true, text[:i], text[i:j], text[j:])
			if got := data(lines); got != text {
				t.Fatalf("split at %d, %d: %q", i, j, got)
			}
			for _, l := range lines {
				if l.Output != nil && strings.ContainsRune(l.Output["data"].(string), '\uFFFD') {
					t.Fatalf("split at %d, %d: a chunk with U+FFFD: %q", i, j, l.Output["data"])
				}
			}
		}
	}
}

func TestV1Lines(t *testing.T) {
	lines := v1Command(t, true, "h\xc3", "\xa9llo\r\n", "\xe6\x97") // ends inside 漢
	want := []v1Line{
		{Kind: "tool_call", Call: "call_1", Status: "in_progress", Info: map[string]any{"terminal_id": "term_1", "cwd": "/w"}},
		{Kind: "tool_call_update", Call: "call_1", Output: map[string]any{"terminal_id": "term_1", "data": "h"}},
		{Kind: "tool_call_update", Call: "call_1", Output: map[string]any{"terminal_id": "term_1", "data": "éllo\r\n"}},
		{Kind: "tool_call_update", Call: "call_1", Output: map[string]any{"terminal_id": "term_1", "data": "\ufffd"}},
		{Kind: "tool_call_update", Call: "call_1", Exit: map[string]any{"terminal_id": "term_1", "exit_code": 0.0, "signal": nil}},
		{Kind: "tool_call_update", Call: "call_1", Status: "completed"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(lines), len(want), lines)
	}
	for i := range want {
		if g, w := jsonOf(lines[i]), jsonOf(want[i]); g != w {
			t.Errorf("line %d: %s\nwant %s", i, g, w)
		}
	}
}

func TestV1WithoutTerminalOutput(t *testing.T) {
	lines := v1Command(t, false, "\x1b[32mok\x1b[0m\r\n", "done\r\n")
	if len(lines) != 2 || lines[0].Kind != "tool_call" || lines[0].Info != nil || lines[1].Status != "completed" {
		t.Fatalf("lines %+v", lines)
	}
	if want := "Output (19 bytes, escape sequences removed):\n```\nok\ndone\n```"; lines[1].Text != want {
		t.Errorf("final text %q, want %q", lines[1].Text, want)
	}
}

func TestV1DetachText(t *testing.T) {
	tests := []struct{ why, want string }{
		{"Still running after the 10s foreground timeout: moved to the background. It runs on in terminal term_3; stop it with terminal/cancel or /stop term_3.",
			"Still running after the 10s foreground timeout: moved to the background as term_3; /ps lists it, /stop term_3 stops it."},
		{"Moved to the background by /bg. It runs on in terminal term_3; stop it with terminal/cancel or /stop term_3.",
			"Detached by /bg: moved to the background as term_3; /ps lists it, /stop term_3 stops it."},
		{"The shell returned; processes it started keep running in the background. It runs on in terminal term_3; stop it with terminal/cancel or /stop term_3.",
			"The shell returned while processes it started run on: moved to the background as term_3; /ps lists it, /stop term_3 stops it."},
		{"", "Moved to the background as term_3; /ps lists it, /stop term_3 stops it."},
	}
	for _, tt := range tests {
		if got := v1DetachText(tt.why, "term_3"); got != tt.want {
			t.Errorf("v1DetachText(%q) = %q, want %q", tt.why, got, tt.want)
		}
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestV1Replacement: after a gap, the client gets a note of what it
// missed and the rest, starting at a character; a client that attaches
// gets the screen cleared first if this connection sent it output before.
func TestV1Replacement(t *testing.T) {
	e := newACPV1(true)
	out, err := e.AppendUpdate(nil, "s", &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "cmd", Kind: "execute", Status: acp.StatusInProgress,
		Content: []acp.ToolCallContent{acp.TerminalContent("term_1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := e.Output("s", "term_1")
	out = o.AppendChunk(out, []byte("first\r\n\xe6"))
	// The gap: 10 bytes lost, with the start of 漢 before them and its
	// end after.
	if out, err = o.AppendReplacement(out, nil, []byte("\xbc\xa2 after\r\n"), 10); err != nil {
		t.Fatal(err)
	}
	if out, err = o.AppendReplacement(out, &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1"}, []byte("all\r\n"), 0); err != nil {
		t.Fatal(err)
	}
	got := data(decodeV1(t, out))
	want := "first\r\n" + "\r\n[shellagent: 13 bytes of output not shown]\r\n after\r\n" + "\x1b[H\x1b[2J\x1b[3Jall\r\n"
	if got != want {
		t.Errorf("output %q\nwant   %q", got, want)
	}
}

// BenchmarkV1Chunk encodes 64 KiB chunks of terminal output for a v1
// client (UTF-8 carried across chunks, JSON-escaped); package protocol's
// BenchmarkV2Chunk encodes the same bytes for v2 (base64).
func BenchmarkV1Chunk(b *testing.B) {
	text := []byte(strings.Repeat("GET /api/items 200 12ms é漢😀 \x1b[32mok\x1b[0m\r\n", 2000))[:64<<10]
	for _, enc := range []struct {
		name string
		e    protocol.Encoding
	}{{"v1", newACPV1(true)}} {
		b.Run(enc.name, func(b *testing.B) {
			dst, err := enc.e.AppendUpdate(nil, "s", &acp.ToolCallUpdate{
				SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "cmd", Kind: "execute",
				Content: []acp.ToolCallContent{acp.TerminalContent("term_1")},
			})
			if err != nil {
				b.Fatal(err)
			}
			o := enc.e.Output("s", "term_1")
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				dst = o.AppendChunk(dst[:0], text)
			}
		})
	}
}

// v1Driver feeds one v1 encoding what the writer would, in order, as the
// supervisor reports a command that goes to the background: updates,
// output chunks and replacements, keeping the lines.
type v1Driver struct {
	t   *testing.T
	e   *acpV1
	o   protocol.OutputEncoder
	out []byte
}

func newV1Driver(t *testing.T, meta bool) *v1Driver {
	e := newACPV1(meta)
	return &v1Driver{t: t, e: e, o: e.Output("s", "term_1")}
}

func (d *v1Driver) update(u acp.Update) {
	d.t.Helper()
	var err error
	if d.out, err = d.e.AppendUpdate(d.out, "s", u); err != nil {
		d.t.Fatal(err)
	}
}

func (d *v1Driver) chunk(p string) { d.out = d.o.AppendChunk(d.out, []byte(p)) }

// replace is a replacement for a client that attaches, of term_1 as it is
// now: running (exit nil) or exited.
func (d *v1Driver) replace(data string, exit *acp.ExitStatus) {
	d.t.Helper()
	var err error
	u := &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1", Command: "cmd", ExitStatus: exit}
	if d.out, err = d.o.AppendReplacement(d.out, u, []byte(data), 0); err != nil {
		d.t.Fatal(err)
	}
}

// The supervisor's updates of call_1, which runs "cmd" in term_1.
var (
	v1Started = &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "cmd", Kind: "execute", Status: acp.StatusInProgress,
		Content: []acp.ToolCallContent{acp.TerminalContent("term_1")}, RawInput: map[string]string{"command": "cmd", "cwd": "/w"},
	}
	v1Why      = "Moved to the background by /bg. It runs on in terminal term_1; stop it with terminal/cancel or /stop term_1."
	v1Detached = &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Status: acp.StatusCompleted,
		Content: []acp.ToolCallContent{acp.TerminalContent("term_1"), acp.TextContent(v1Why)},
	}
	// v1DetachedNow is call_1 as a client that attaches gets it after the
	// detach.
	v1DetachedNow = &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "cmd", Kind: "execute", Status: acp.StatusCompleted,
		Content: []acp.ToolCallContent{acp.TerminalContent("term_1"), acp.TextContent(v1Why)}, RawInput: map[string]string{"command": "cmd", "cwd": "/w"},
	}
	v1Stopped = &acp.ExitStatus{Signal: "SIGTERM"}
	v1Exit    = &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1", ExitStatus: v1Stopped}
)

const (
	v1DetachedText = "Detached by /bg: moved to the background as term_1; /ps lists it, /stop term_1 stops it."
	v1ExitedText   = "term_1 (cmd) ended: signal SIGTERM."
	v1Clear        = "\x1b[H\x1b[2J\x1b[3J"
)

// TestV1AttachAnnouncesAgain: once the client attaches to a session again
// on the same connection (protocol.Encoding.Attached), each of its tool calls is announced
// again by a tool_call, with its terminal, and the terminal is redrawn;
// without terminal_output, the final tool call's text comes with the
// replacement, and the background command's exit as a message.
func TestV1AttachAnnouncesAgain(t *testing.T) {
	info := map[string]any{"terminal_id": "term_1", "cwd": "/w"}
	tail := func(s string) string { return "Output (" + s + ", escape sequences removed):\n```\n" }
	for _, tt := range []struct {
		meta bool
		want []v1Line
	}{
		{true, []v1Line{
			{Kind: "tool_call", Call: "call_1", Status: "in_progress", Info: info},
			{Kind: "tool_call_update", Call: "call_1", Output: map[string]any{"terminal_id": "term_1", "data": "a\r\n"}},
			{Kind: "tool_call_update", Call: "call_1", Status: "completed", Text: v1DetachedText},
			{Kind: "tool_call_update", Call: "call_1", Output: map[string]any{"terminal_id": "term_1", "data": "b\r\n"}},
			{Kind: "tool_call", Call: "call_1", Status: "completed", Text: v1DetachedText, Info: info},
			{Kind: "tool_call_update", Call: "call_1", Output: map[string]any{"terminal_id": "term_1", "data": v1Clear + "a\r\nb\r\n"}},
			{Kind: "tool_call_update", Call: "call_1", Output: map[string]any{"terminal_id": "term_1", "data": "c\r\n"}},
			{Kind: "tool_call_update", Call: "call_1", Exit: map[string]any{"terminal_id": "term_1", "exit_code": nil, "signal": "SIGTERM"}},
		}},
		{false, []v1Line{
			{Kind: "tool_call", Call: "call_1", Status: "in_progress"},
			{Kind: "tool_call_update", Call: "call_1", Status: "completed", Text: v1DetachedText + tail("3 bytes") + "a\n```"},
			{Kind: "tool_call", Call: "call_1", Status: "completed", Text: v1DetachedText},
			{Kind: "tool_call_update", Call: "call_1", Text: v1DetachedText + tail("6 bytes") + "a\nb\n```"},
			{Kind: "agent_message_chunk", Text: v1ExitedText},
		}},
	} {
		d := newV1Driver(t, tt.meta)
		d.update(v1Started)
		d.chunk("a\r\n")
		d.update(v1Detached)
		d.chunk("b\r\n")
		d.e.Attached("s")
		d.update(v1DetachedNow)
		d.replace("a\r\nb\r\n", nil)
		d.chunk("c\r\n")
		d.update(v1Exit)
		checkV1Lines(t, decodeV1(t, d.out), tt.want)
		if len(d.e.calls) != 0 || len(d.e.terms) != 0 {
			t.Errorf("meta %v: the encoding still knows %d tool calls and %d terminals", tt.meta, len(d.e.calls), len(d.e.terms))
		}
	}
}

// TestV1ReplayOnAFreshConnection: the replay of a command that exited in
// the foreground, and of one stopped in the background, to a client that
// never saw them: each tool call at its final state, then its terminal's
// output and exit, or the output's tail (and, for the background
// command, its exit as a message).
func TestV1ReplayOnAFreshConnection(t *testing.T) {
	zero := 0
	fg := &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "cmd", Kind: "execute", Status: acp.StatusCompleted,
		Content: []acp.ToolCallContent{acp.TerminalContent("term_1")}, RawInput: map[string]string{"command": "cmd", "cwd": "/w"},
		RawOutput: map[string]any{"exitCode": 0},
	}
	info := map[string]any{"terminal_id": "term_1", "cwd": "/w"}
	text := "Output (3 bytes, escape sequences removed):\n```\na\n```"
	for _, tt := range []struct {
		name string
		meta bool
		call *acp.ToolCallUpdate
		exit *acp.ExitStatus
		want []v1Line
	}{
		{"foreground", true, fg, &acp.ExitStatus{ExitCode: &zero}, []v1Line{
			{Kind: "tool_call", Call: "call_1", Status: "completed", Info: info},
			{Kind: "tool_call_update", Call: "call_1", Output: map[string]any{"terminal_id": "term_1", "data": "a\r\n"}},
			{Kind: "tool_call_update", Call: "call_1", Exit: map[string]any{"terminal_id": "term_1", "exit_code": 0.0, "signal": nil}},
		}},
		{"foreground", false, fg, &acp.ExitStatus{ExitCode: &zero}, []v1Line{
			{Kind: "tool_call", Call: "call_1", Status: "completed"},
			{Kind: "tool_call_update", Call: "call_1", Text: text},
		}},
		{"background", true, v1DetachedNow, v1Stopped, []v1Line{
			{Kind: "tool_call", Call: "call_1", Status: "completed", Text: v1DetachedText, Info: info},
			{Kind: "tool_call_update", Call: "call_1", Output: map[string]any{"terminal_id": "term_1", "data": "a\r\n"}},
			{Kind: "tool_call_update", Call: "call_1", Exit: map[string]any{"terminal_id": "term_1", "exit_code": nil, "signal": "SIGTERM"}},
		}},
		{"background", false, v1DetachedNow, v1Stopped, []v1Line{
			{Kind: "tool_call", Call: "call_1", Status: "completed", Text: v1DetachedText},
			{Kind: "tool_call_update", Call: "call_1", Text: v1DetachedText + text},
			{Kind: "agent_message_chunk", Text: v1ExitedText},
		}},
	} {
		d := newV1Driver(t, tt.meta)
		d.e.Attached("s")
		d.update(tt.call)
		d.replace("a\r\n", tt.exit)
		checkV1Lines(t, decodeV1(t, d.out), tt.want)
		if len(d.e.calls) != 0 || len(d.e.terms) != 0 {
			t.Errorf("%s, meta %v: the encoding still knows %d tool calls and %d terminals", tt.name, tt.meta, len(d.e.calls), len(d.e.terms))
		}
	}
}

// TestV1BackgroundExitWithoutTerminalOutput: a client without
// terminal_output learns of a background command's exit by a message; of
// a foreground one's by its tool call's final update only.
func TestV1BackgroundExitWithoutTerminalOutput(t *testing.T) {
	d := newV1Driver(t, false)
	d.update(v1Started)
	d.chunk("a\r\n")
	d.update(v1Detached)
	d.chunk("b\r\n")
	d.update(v1Exit)
	// The exit notice that follows says the same: it is left out; another
	// notice is not.
	exited := func(term string) *acp.Notice {
		return &acp.Notice{SessionUpdate: acp.KindNotice, Severity: acp.NoticeWarning, Title: term + " failed",
			Meta: map[string]any{"shellagent": map[string]any{"terminalId": term, "event": "exited"}}}
	}
	d.update(exited("term_1"))
	d.update(exited("term_1")) // a second one is not the one that followed
	lines := decodeV1(t, d.out)
	if n := len(lines); n != 4 || lines[2].Kind != "agent_message_chunk" || lines[2].Text != v1ExitedText || lines[3].Text != "Warning: term_1 failed" {
		t.Errorf("lines %+v, want the exit as the third, %q, then one notice", lines, v1ExitedText)
	}
	for _, l := range v1Command(t, false, "a\r\n") {
		if l.Kind == "agent_message_chunk" {
			t.Errorf("a foreground command's exit as a message: %+v", l)
		}
	}
}

func TestV1ExitText(t *testing.T) {
	code, signalled := 3, 143
	for _, tt := range []struct {
		es   acp.ExitStatus
		want string
	}{
		{acp.ExitStatus{ExitCode: &code}, "term_2 (make dev) ended: exit 3."},
		{acp.ExitStatus{Signal: "SIGKILL"}, "term_2 (make dev) ended: signal SIGKILL."},
		{acp.ExitStatus{Signal: "SIGTERM", ExitCode: &signalled}, "term_2 (make dev) ended: signal SIGTERM, exit 143."},
		{acp.ExitStatus{}, "term_2 (make dev) ended: exit status unknown."},
	} {
		if got := v1ExitText("term_2", "make dev", &tt.es); got != tt.want {
			t.Errorf("v1ExitText(%+v) = %q, want %q", tt.es, got, tt.want)
		}
	}
}

// checkV1Lines compares decoded lines with what a test wants.
func checkV1Lines(t *testing.T, got, want []v1Line) {
	t.Helper()
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = jsonOf(got[i])
		}
		if i < len(want) {
			w = jsonOf(want[i])
		}
		if g != w {
			t.Errorf("line %d: %s\nwant    %s", i, g, w)
		}
	}
}

// A notice, which v1 lacks, is an agent message of its own: one
// agent_message_chunk per notice, each with a new messageId.
func TestV1Notice(t *testing.T) {
	e := newACPV1(false)
	var out []byte
	for _, n := range []*acp.Notice{
		{SessionUpdate: acp.KindNotice, Severity: acp.NoticeWarning, Title: "term_2 exited with code 3", Description: "/tail term_2 shows its output."},
		{SessionUpdate: acp.KindNotice, Severity: acp.NoticeInfo, Title: "term_1 is waiting for input"},
	} {
		var err error
		if out, err = e.AppendUpdate(out, "s", n); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			Params struct {
				Update struct {
					SessionUpdate, MessageID string
					Content                  struct{ Type, Text string }
				}
			}
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		u := m.Params.Update
		if u.SessionUpdate != "agent_message_chunk" || u.Content.Type != "text" {
			t.Errorf("notice as %s", line)
		}
		ids = append(ids, u.MessageID)
		if len(ids) == 1 && u.Content.Text != "Warning: term_2 exited with code 3\n/tail term_2 shows its output." ||
			len(ids) == 2 && u.Content.Text != "term_1 is waiting for input" {
			t.Errorf("notice %d as %q", len(ids), u.Content.Text)
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] || ids[0] == "" {
		t.Errorf("message ids %q", ids)
	}
}

// A tool call of another kind than a command's that references a terminal
// (a /wait) does not take the terminal over: its output and exit stay
// with the command's tool call, and the reference is not sent.
func TestV1OnlyACommandTakesItsTerminal(t *testing.T) {
	e := newACPV1(true)
	var out []byte
	add := func(u acp.Update) {
		var err error
		if out, err = e.AppendUpdate(out, "s", u); err != nil {
			t.Fatal(err)
		}
	}
	add(&acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "npm run dev", Kind: "execute", Status: acp.StatusCompleted,
		RawInput: map[string]string{"cwd": "/w"}, Content: []acp.ToolCallContent{acp.TerminalContent("term_1")},
	})
	add(&acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_2", Title: "wait for term_1: ready", Kind: "search", Status: acp.StatusInProgress,
		Content: []acp.ToolCallContent{acp.TerminalContent("term_1"), acp.TextContent("Waiting")},
	})
	out = e.Output("s", "term_1").AppendChunk(out, []byte("ready\r\n"))
	code := 0
	add(&acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1", ExitStatus: &acp.ExitStatus{ExitCode: &code}})
	got := jsonOf(decodeV1(t, out))
	want := jsonOf([]v1Line{
		{Kind: "tool_call", Call: "call_1", Status: "completed", Info: map[string]any{"terminal_id": "term_1", "cwd": "/w"}},
		{Kind: "tool_call", Call: "call_2", Status: "in_progress", Text: "Waiting"},
		{Kind: "tool_call_update", Call: "call_1", Output: map[string]any{"terminal_id": "term_1", "data": "ready\r\n"}},
		{Kind: "tool_call_update", Call: "call_1", Exit: map[string]any{"terminal_id": "term_1", "exit_code": 0.0, "signal": nil}},
	})
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, `"toolCallId":"call_2"`) && strings.Contains(line, `"type":"terminal"`) {
			t.Errorf("the wait's terminal reference was sent: %s", line)
		}
	}
}

func TestV1Status(t *testing.T) {
	for v2, v1 := range map[string]string{
		"": "", "pending": "pending", "in_progress": "in_progress", "completed": "completed", "failed": "failed",
		"cancelled": "failed", "paused": "in_progress", "_shellagent_waiting": "in_progress",
	} {
		if got := v1Status(v2); got != v1 {
			t.Errorf("v1Status(%q) = %q, want %q", v2, got, v1)
		}
	}
}

// TestEveryUpdateEncodes runs each kind of update through the v1
// encoding's switch, with and without terminal_output (package
// protocol's TestEverySwitchCoversEveryUpdate does the others): a variant
// added to acp.Update and forgotten here panics.
func TestEveryUpdateEncodes(t *testing.T) {
	for _, u := range acp.Variants() {
		for _, meta := range []bool{true, false} {
			if _, err := newACPV1(meta).AppendUpdate(nil, "s", u); err != nil {
				t.Errorf("meta %v: AppendUpdate(%T): %v", meta, u, err)
			}
		}
	}
}

// A chunk costs the line appended to the batch: once the batch has grown
// to a chunk's line and the terminal's prefix is built, nothing is
// allocated per chunk (package protocol's TestAChunkAllocatesNothing
// checks the writer's side and v2).
func TestAChunkAllocatesNothing(t *testing.T) {
	const maxChunk = 64 << 10 // the writer's largest chunk
	e := newACPV1(true)
	if _, err := e.AppendUpdate(nil, "s", v1Started); err != nil {
		t.Fatal(err)
	}
	ring := outputbuf.New(1 << 20)
	all := make([]byte, 1<<20)
	for i := range all {
		all[i] = byte(i % 251) // every byte value, invalid UTF-8 included
	}
	ring.Write(all)
	o := e.Output("s", "term_1")
	scratch := make([]byte, maxChunk)
	var buf []byte
	off := int64(0)
	chunk := func() {
		n, start := ring.ReadAt(scratch, off%(1<<20))
		buf = o.AppendChunk(buf[:0], scratch[:n])
		off = start + int64(n)
	}
	chunk()
	if len(buf) < maxChunk {
		t.Fatalf("a chunk of %d bytes became a line of %d", maxChunk, len(buf))
	}
	if allocs := testing.AllocsPerRun(50, chunk); allocs != 0 {
		t.Errorf("%.1f allocations per chunk, want 0", allocs)
	}
}

// A permission request's toolCall is a v1 ToolCallUpdate, which has no
// sessionUpdate: it carries the members of the tool call alone.
func TestV1PermissionToolCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p    *acp.PermissionRequest
		want []string // the members of params.toolCall
	}{
		{&acp.PermissionRequest{SessionID: "s", Title: "Run echo x?", Description: "shellagent will run this command in /cwd.",
			Subject: &acp.PermissionSubject{Type: "command", Command: "echo x", Cwd: "/cwd", ToolCallID: "call_1"},
			Options: []acp.PermissionOption{{OptionID: "allow", Name: "Allow", Kind: "allow_once"}}},
			[]string{"content", "kind", "rawInput", "title", "toolCallId"}},
		{&acp.PermissionRequest{SessionID: "s", Title: "Run ls?", Subject: &acp.PermissionSubject{Type: "command", Command: "ls", Cwd: "/", ToolCallID: "call_2"}},
			[]string{"kind", "rawInput", "title", "toolCallId"}},
	}
	for _, tt := range tests {
		b, err := json.Marshal(v1Permission(tt.p))
		var params struct{ ToolCall map[string]json.RawMessage }
		if err != nil || json.Unmarshal(b, &params) != nil {
			t.Fatalf("%s, %v", b, err)
		}
		if got := slices.Sorted(maps.Keys(params.ToolCall)); !slices.Equal(got, tt.want) {
			t.Errorf("permission request %s: toolCall has %q, want %q", b, got, tt.want)
		}
	}
}
