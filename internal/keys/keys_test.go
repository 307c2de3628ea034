package keys

import (
	"strings"
	"testing"
)

func TestBytes(t *testing.T) {
	tests := []struct {
		key, want, err string
	}{
		{"C-c", "\x03", ""},
		{"c-C", "\x03", ""},
		{"^C", "\x03", ""},
		{"C-x", "\x18", ""},
		{"C-[", "\x1b", ""},
		{"C-Space", "\x00", ""},
		{"C-?", "\x7f", ""},
		{"Enter", "\r", ""},
		{"enter", "\r", ""},
		{"Escape", "\x1b", ""},
		{"Tab", "\t", ""},
		{"BSpace", "\x7f", ""},
		{"Space", " ", ""},
		{"Up", "\x1b[A", ""},
		{"Left", "\x1b[D", ""},
		{"PPage", "\x1b[5~", ""},
		{"PageDown", "\x1b[6~", ""},
		{"F1", "\x1bOP", ""},
		{"F12", "\x1b[24~", ""},
		{"q", "q", ""},
		{"Q", "Q", ""},
		{"é", "é", ""},
		{"-", "-", ""},
		{"M-x", "\x1bx", ""},
		{"M-C-a", "\x1b\x01", ""},
		{"M-Enter", "\x1b\r", ""},
		{"Entr", "", `unknown key "Entr"`},
		{"hello", "", `unknown key "hello"`},
		{"S-Up", "", `unknown key "S-Up"`},
		{"C-Up", "", `"C-Up": Ctrl goes with a letter`},
		{"C-1", "", `"C-1": Ctrl goes with`},
	}
	for _, tt := range tests {
		got, err := Bytes(tt.key)
		switch {
		case tt.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.err)):
			t.Errorf("Bytes(%q) = %q, %v; want error %q", tt.key, got, err, tt.err)
		case tt.err == "" && (err != nil || string(got) != tt.want):
			t.Errorf("Bytes(%q) = %q, %v; want %q", tt.key, got, err, tt.want)
		}
	}
}
