package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"shellagent/acp"
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
					Content                           []struct {
						Type    string
						Content struct{ Text string }
					}
					Meta struct {
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
		for _, c := range u.Content {
			l.Text += c.Content.Text
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
	add(e.appendUpdate(out, "s", &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "cmd", Kind: "execute", Status: acp.StatusInProgress,
		Content: []acp.ToolCallContent{acp.TerminalContent("term_1")}, RawInput: map[string]string{"command": "cmd", "cwd": "/w"},
	}))
	o := e.output("s", "term_1")
	for _, c := range chunks {
		out = o.appendChunk(out, []byte(c))
	}
	code := 0
	add(e.appendUpdate(out, "s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1", ExitStatus: &acp.ExitStatus{ExitCode: &code}}))
	add(e.appendUpdate(out, "s", &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Status: acp.StatusCompleted}))
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
	out, err := e.appendUpdate(nil, "s", &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "cmd", Status: acp.StatusInProgress,
		Content: []acp.ToolCallContent{acp.TerminalContent("term_1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := e.output("s", "term_1")
	out = o.appendChunk(out, []byte("first\r\n\xe6"))
	// The gap: 10 bytes lost, with the start of 漢 before them and its
	// end after.
	if out, err = o.appendReplacement(out, nil, []byte("\xbc\xa2 after\r\n"), 10); err != nil {
		t.Fatal(err)
	}
	if out, err = o.appendReplacement(out, &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1"}, []byte("all\r\n"), 0); err != nil {
		t.Fatal(err)
	}
	got := data(decodeV1(t, out))
	want := "first\r\n" + "\r\n[shellagent: 13 bytes of output not shown]\r\n after\r\n" + "\x1b[H\x1b[2J\x1b[3Jall\r\n"
	if got != want {
		t.Errorf("output %q\nwant   %q", got, want)
	}
}

// BenchmarkV1Chunk encodes 64 KiB chunks of terminal output for a v1
// client (UTF-8 carried across chunks, JSON-escaped), against the v2
// encoding of the same bytes (base64).
func BenchmarkV1Chunk(b *testing.B) {
	text := []byte(strings.Repeat("GET /api/items 200 12ms é漢😀 \x1b[32mok\x1b[0m\r\n", 2000))[:64<<10]
	for _, enc := range []struct {
		name string
		e    encoding
	}{{"v1", newACPV1(true)}, {"v2", acpV2{}}} {
		b.Run(enc.name, func(b *testing.B) {
			dst, err := enc.e.appendUpdate(nil, "s", &acp.ToolCallUpdate{
				SessionUpdate: acp.KindToolCall, ToolCallID: "call_1", Title: "cmd",
				Content: []acp.ToolCallContent{acp.TerminalContent("term_1")},
			})
			if err != nil {
				b.Fatal(err)
			}
			o := enc.e.output("s", "term_1")
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				dst = o.appendChunk(dst[:0], text)
			}
		})
	}
}
