package supervisor

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"shellagent/protocol"
)

func TestParseInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want input
		says string // for badInput: a part of the problem
	}{
		{line: "echo hi", want: input{kind: runCommand, line: "echo hi"}},
		{line: "/usr/bin/env FOO=1 true", want: input{kind: runCommand, line: "/usr/bin/env FOO=1 true"}},
		{line: "/", want: input{kind: runCommand, line: "/"}},
		{line: "./run", want: input{kind: runCommand, line: "./run"}},
		{line: "/bg", want: input{kind: bgDetach}},
		{line: "/bg   npm run dev ", want: input{kind: bgCommand, line: "npm run dev"}},
		{line: "/ps", want: input{kind: listWork}},
		{line: "/ps -a", want: input{kind: badInput}, says: "/ps takes no arguments. Write it as /ps."},
		{line: "/stop term_3", want: input{kind: stopWork, id: "term_3"}},
		{line: "/stop", want: input{kind: badInput}, says: "needs exactly one terminal or tool call id"},
		{line: "/stop a b", want: input{kind: badInput}, says: "Write it as /stop ID"},
		{line: "/after 5m make test", want: input{kind: afterWork, delay: 5 * time.Minute, line: "make test"}},
		{line: "/after 1ns x", want: input{kind: afterWork, delay: 1, line: "x"}},
		{line: "/after 5m", want: input{kind: badInput}, says: "/after needs a duration and a command"},
		{line: "/after soon x", want: input{kind: badInput}, says: `"soon" is not a duration`},
		{line: "/after 0s x", want: input{kind: badInput}, says: "must be more than 0, got 0s"},
		{line: "/every 30s git fetch", want: input{kind: everyWork, delay: 30 * time.Second, line: "git fetch"}},
		{line: "/every 1s x", want: input{kind: everyWork, delay: time.Second, line: "x"}},
		{line: "/every 999ms x", want: input{kind: badInput}, says: "the interval must be at least 1s, got 999ms"},
		{line: "/every -5s x", want: input{kind: badInput}, says: "must be more than 0"},
		{line: "/nope now", want: input{kind: badInput}, says: "Unknown command /nope. Available: /bg, /ps, /stop, /after, /every."},
	}
	for _, tt := range tests {
		got := parseInput(tt.line)
		if tt.want.kind == badInput {
			if got.kind != badInput || !strings.Contains(got.problem, tt.says) {
				t.Errorf("parseInput(%q) = %+v, want a problem saying %q", tt.line, got, tt.says)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("parseInput(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

func TestImmediateInputs(t *testing.T) {
	t.Parallel()
	for kind, want := range map[inputKind]bool{
		runCommand: false, bgCommand: true, bgDetach: true, listWork: true,
		stopWork: true, afterWork: false, everyWork: false, badInput: false,
	} {
		if got := (input{kind: kind}).immediate(); got != want {
			t.Errorf("input kind %d immediate = %v, want %v", kind, got, want)
		}
	}
}

func TestPromptLine(t *testing.T) {
	t.Parallel()
	text := func(s string) protocol.ContentBlock { return protocol.TextBlock(s) }
	link := func(uri string) protocol.ContentBlock {
		return protocol.ContentBlock{Type: "resource_link", URI: uri, Name: "x"}
	}
	tests := []struct {
		name   string
		blocks []protocol.ContentBlock
		want   string
		err    string // a part of the -32602 message
	}{
		{"one block", []protocol.ContentBlock{text("ls -l")}, "ls -l", ""},
		{"blocks joined by spaces", []protocol.ContentBlock{text("echo"), text("a b")}, "echo a b", ""},
		{"trimmed", []protocol.ContentBlock{text("  ls \n")}, "ls", ""},
		{"file link is its quoted path", []protocol.ContentBlock{text("cat"), link("file:///tmp/it's%20here.txt")}, `cat '/tmp/it'\''s here.txt'`, ""},
		{"plain path stays bare", []protocol.ContentBlock{text("cat"), link("file:///etc/hosts")}, "cat /etc/hosts", ""},
		{"other link is its URI", []protocol.ContentBlock{text("curl"), link("https://example.com/a?b=c&d")}, "curl 'https://example.com/a?b=c&d'", ""},
		{"link without uri", []protocol.ContentBlock{{Type: "resource_link", Name: "x"}}, "", "prompt[0].uri: required"},
		{"image", []protocol.ContentBlock{text("x"), {Type: "image"}}, "", `prompt[1].type: "image" is not supported`},
		{"no blocks", nil, "", "prompt: empty"},
		{"only spaces", []protocol.ContentBlock{text(" \t\n")}, "", "prompt: empty"},
	}
	for _, tt := range tests {
		got, err := promptLine(tt.blocks)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%s: promptLine = %q, %v; want %q", tt.name, got, err, tt.want)
		case tt.err != "" && (!isInvalidParams(err) || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: promptLine = %q, %v; want -32602 saying %q", tt.name, got, err, tt.err)
		}
	}
}

func TestLinkPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ uri, want string }{
		{"file:///home/me/a.txt", "/home/me/a.txt"},
		{"file:///home/me/with%20space", "/home/me/with space"},
		{"file://host/share/x", "/share/x"},
		{"file:", "file:"},
		{"https://example.com/x", "https://example.com/x"},
		{"relative/path", "relative/path"},
		{"%zz", "%zz"},
	}
	for _, tt := range tests {
		if got := linkPath(tt.uri); got != tt.want {
			t.Errorf("linkPath(%q) = %q, want %q", tt.uri, got, tt.want)
		}
	}
}

// TestShellQuote checks each quoting against the shell itself: the quoted
// word must come back as one argument, unchanged.
func TestShellQuote(t *testing.T) {
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
		got := shellQuote(tt.in)
		if got != tt.want {
			t.Errorf("shellQuote(%q) = %q, want %q", tt.in, got, tt.want)
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
			t.Errorf("the shell read shellQuote(%q) as %q", tt.in, words)
			break
		}
	}
}
