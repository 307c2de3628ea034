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
