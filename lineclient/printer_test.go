package lineclient

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPrinter(t *testing.T) {
	type step struct {
		term  string // "" for a note
		data  string
		label bool
	}
	tests := []struct {
		name  string
		steps []step
		want  string
	}{
		{"one terminal, CRLF to LF", []step{{"t1", "a\r\nb\r\n", false}}, "a\nb\n"},
		{"CRLF split across chunks", []step{{"t1", "a\r", false}, {"t1", "\nb\r\n", false}}, "a\nb\n"},
		{"a lone CR is kept", []step{{"t1", "50%\r", false}, {"t1", "99%\r\n", false}}, "50%\r99%\n"},
		{"a note ends an unfinished line", []step{{"t1", "prompt> ", false}, {"", "t1 ended: exit 0", false}}, "prompt> \n[t1 ended: exit 0]\n"},
		{"an unfinished line goes on", []step{{"t1", "ab", false}, {"t1", "c\n", false}}, "abc\n"},
		{"labels on every line", []step{{"t1", "a\nb\n", true}, {"t2", "c\n", true}}, "t1| a\nt1| b\nt2| c\n"},
		{"another terminal breaks an unfinished line", []step{{"t1", "ab", true}, {"t2", "c\n", true}, {"t1", "d\n", true}}, "t1| ab\nt2| c\nt1| d\n"},
		{"a label once per line", []step{{"t1", "ab", true}, {"t1", "cd\n", true}}, "t1| abcd\n"},
	}
	for _, tt := range tests {
		var sb strings.Builder
		p := newPrinter(&sb)
		for _, s := range tt.steps {
			if s.term == "" {
				p.note(s.data)
			} else {
				p.output(s.term, []byte(s.data), s.label)
			}
		}
		if sb.String() != tt.want {
			t.Errorf("%s: printed %q, want %q", tt.name, sb.String(), tt.want)
		}
	}
}

func TestPrinterText(t *testing.T) {
	var sb strings.Builder
	p := newPrinter(&sb)
	p.stream("thinking")
	p.stream(" more")
	p.text("a message")
	p.output("t1", []byte("out"), false)
	p.text("after\n")
	if want := "thinking more\na message\nout\nafter\n"; sb.String() != want {
		t.Errorf("printed %q, want %q", sb.String(), want)
	}
}

func TestVisible(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text, a tab\tand\nlines\n", "plain text, a tab\tand\nlines\n"},
		{"\x1b]0;title\x07", `\x1b]0;title\a`},
		{"\x1b[2J\x1b[31mred", `\x1b[2J\x1b[31mred`},
		{"50%\r99%", `50%\r99%`},
		{"nul\x00 del\x7f", `nul\x00 del\x7f`},
		{"csi\u009b2J", `csi\u009b2J`},
		{"bidi \u202eevil\u202c \u2066iso\u2069", `bidi \u202eevil\u202c \u2066iso\u2069`},
		{"not utf-8: \xff\x9b", `not utf-8: \xff\x9b`},
		{`a backslash \x1b stays`, `a backslash \x1b stays`},
		{"unicode é 日本 👍 stays", "unicode é 日本 👍 stays"},
	}
	for _, tt := range tests {
		if got := visible(tt.in); got != tt.want {
			t.Errorf("visible(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Notes, messages and streamed text are escaped; terminal output is not.
	var sb strings.Builder
	p := newPrinter(&sb)
	p.note("n\x1b[2J")
	p.text("t\x1b[2J")
	p.stream("s\x1b[2J\n")
	p.output("t1", []byte("o\x1b[2J\n"), false)
	if want := "[n\\x1b[2J]\nt\\x1b[2J\ns\\x1b[2J\no\x1b[2J\n"; sb.String() != want {
		t.Errorf("printed %q, want %q", sb.String(), want)
	}
}

// TestHelpShowsArguments: /help shows each of the agent's commands with
// the arguments it takes (its input hint), and none for one that takes
// none.
func TestHelpShowsArguments(t *testing.T) {
	t.Parallel()
	var commands []command
	wire := `[{"type":"command","name":"ps","description":"List background work"},` +
		`{"type":"command","name":"tail","description":"Show the last lines","input":{"type":"text","hint":"terminal id and a number of lines, e.g. term_1 50"}}]`
	if err := json.Unmarshal([]byte(wire), &commands); err != nil {
		t.Fatal(err)
	}
	text := help(commands, false)
	want := "  /ps             List background work\n" +
		"  /tail           Show the last lines\n" +
		"                  arguments: terminal id and a number of lines, e.g. term_1 50\n"
	if !strings.HasSuffix(text, want) {
		t.Errorf("/help ends:\n%s\nwant:\n%s", text[strings.Index(text, "The agent's"):], want)
	}
}
