package words

import (
	"os/exec"
	"strings"
	"testing"
)

func TestNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, word, rest, err string
	}{
		{"  a b  c", "a", "b  c", ""},
		{"'a b'c d", "a bc", "d", ""},
		{`"a \"b\" \d $x"`, `a "b" \d $x`, "", ""},
		{`\d+\ \'x`, `\d+ 'x`, "", ""},
		{"'open", "", "", "a ' quote is not closed"},
		{`"open`, "", "", `a " quote is not closed`},
	}
	for _, tt := range tests {
		w, rest, _, err := Next(tt.in)
		if w.Text != tt.word || rest != tt.rest || err != nil && err.Error() != tt.err || err == nil && tt.err != "" {
			t.Errorf("Next(%q) = %q, %q, %v; want %q, %q, %s", tt.in, w.Text, rest, err, tt.word, tt.rest, tt.err)
		}
	}
	// A path that Quote wrote reads back as it was.
	for _, p := range []string{"/a b/c", "it's", `back\slash`, "plain"} {
		if w, _, _, _ := Next(Quote(p)); w.Text != p {
			t.Errorf("Next(Quote(%q)) = %q", p, w.Text)
		}
	}
}

// TestQuote checks each quoting against the shell itself: the quoted
// word must come back as one argument, unchanged.
func TestQuote(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"/usr/bin/env", "/usr/bin/env"},
		{"a=b,c:d@e%f+g", "a=b,c:d@e%f+g"},
		{"", "''"},
		{"two words", "'two words'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
		{"`x`;|&<>*?~#!\\\"", "'`x`;|&<>*?~#!\\\"'"},
		{"new\nline", "'new\nline'"},
		{"-n", "-n"},
	}
	args := []string{"-c", "", "sh"}
	for _, tt := range tests {
		got := Quote(tt.in)
		if got != tt.want {
			t.Errorf("Quote(%q) = %q, want %q", tt.in, got, tt.want)
		}
		args[1] += "set -- " + got + "; [ $# -eq 1 ] || exit 9; printf '%s\\0' \"$1\"; "
	}
	out, err := exec.Command("/bin/sh", args...).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	words := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	for i, tt := range tests {
		if i >= len(words) || words[i] != tt.in {
			t.Errorf("the shell read Quote(%q) as %q", tt.in, words)
			break
		}
	}
}
