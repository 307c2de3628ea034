package termtext

import "testing"

func TestPlain(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a\r\nb\n", "a\nb\n"},
		{"\x1b[1;31mred\x1b[0m", "red"},
		{"\x1b]0;title\x07x\x1b]8;;http://x\x1b\\y", "xy"},
		{"\x1b(Bz\x1b=", "z"},
		{"10%\r50%\r100%\ndone", "100%\ndone"},
		{"a\bb\x07c\td", "abc\td"},
		{"bad \xff byte", "bad \ufffd byte"},
		{"cut \x1b[3", "cut "},
		// A line ended with "\r\n" in a PTY (ONLCR makes it "\r\r\n"),
		// and a carriage return that nothing follows, keep their line.
		{"ready\r\r\n", "ready\n"},
		{"line1\r\nline2\r\r\nline3\r", "line1\nline2\nline3"},
		{"50%\r\x1b[K", ""},
		{"progress\r\x1b[K\n", "\n"},
		{"progress\r\x1b[0Kdone\r\n", "done\n"},
		{"a\x1b[K\n", "a\n"},
		{"abc\x1b[2K\rd\n", "d\n"},
		{"keep\x1b[2K\n", "\n"},
		{"50%\r\x1b[K60%", "60%"},
		{"abc\r\r\n\rX\n", "abc\nX\n"},
		{"é\r€", "€"},
		{"ok\r\xff", "\ufffd"},
	}
	for _, tt := range tests {
		if got := Plain([]byte(tt.in)); got != tt.want {
			t.Errorf("Plain(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLastLines(t *testing.T) {
	tests := []struct {
		text  string
		n     int
		want  string
		lines int
	}{
		{"", 3, "", 0},
		{"\n\n", 3, "", 0},
		{"a", 3, "a", 1},
		{"a\nb\nc\n", 2, "b\nc", 3},
		{"a\nb\nc", 2, "b\nc", 3},
		{"a\nb", 2, "a\nb", 2},
		{"\nb", 1, "b", 2},
		{"\nb", 2, "\nb", 2},
		{"a\n\nb\n\n\n", 2, "\nb", 3},
	}
	for _, tt := range tests {
		if got, lines := LastLines(tt.text, tt.n); got != tt.want || lines != tt.lines {
			t.Errorf("LastLines(%q, %d) = %q, %d; want %q, %d", tt.text, tt.n, got, lines, tt.want, tt.lines)
		}
	}
}

func TestLastLinesStart(t *testing.T) {
	for _, tt := range []struct {
		b    string
		n    int
		want string // b from LastLinesStart on
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\n", 5, "a\nb\n"},
		{"a\n\n\n", 2, "\n\n"}, // empty lines are lines
		{"\x1b[31ma\x1b[0m\nb", 1, "b"},
		{"", 3, ""},
		{"a\nb", 0, ""},
	} {
		if got := tt.b[LastLinesStart([]byte(tt.b), tt.n):]; got != tt.want {
			t.Errorf("the last %d lines of %q: %q, want %q", tt.n, tt.b, got, tt.want)
		}
	}
}

// Unfence gives back what Fence was given, and the text before it.
func TestUnfence(t *testing.T) {
	for _, tt := range []struct{ head, body string }{
		{"Output of term_1, all 2 lines:", "a\nb"},
		{"", "x"},
		{"Services of f:", ""},
		{"Its last lines:", "\n"},
		{"two\nlines", "a ``` b\n```"},
		{"a command with ``` in it", "`x`\n``"},
		{"```", "body"}, // a head that is a fence itself
	} {
		s := Fence(tt.body)
		if tt.head != "" {
			s = tt.head + "\n" + s
		}
		head, body, ok := Unfence(s)
		if !ok || head != tt.head || body != tt.body {
			t.Errorf("Unfence(%q) = %q, %q, %v; want %q, %q, true", s, head, body, ok, tt.head, tt.body)
		}
	}
	for _, s := range []string{"", "Ready: db, web.", "no fence\n``", "x\n```", "```"} {
		if head, body, ok := Unfence(s); ok || head != s || body != "" {
			t.Errorf("Unfence(%q) = %q, %q, %v; want it as it is, false", s, head, body, ok)
		}
	}
}

func TestFence(t *testing.T) {
	tests := []struct{ in, want string }{
		{"x", "```\nx\n```"},
		{"a ``` b", "````\na ``` b\n````"},
		{"````", "`````\n````\n`````"},
	}
	for _, tt := range tests {
		if got := Fence(tt.in); got != tt.want {
			t.Errorf("Fence(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
