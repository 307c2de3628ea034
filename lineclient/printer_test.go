package lineclient

import (
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
