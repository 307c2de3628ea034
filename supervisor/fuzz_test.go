package supervisor

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/internal/words"
	"shellagent/supervisor/jobs"
	"shellagent/supervisor/service"
	"shellagent/supervisor/terminput"
	"shellagent/supervisor/wait"
	"shellagent/supervisor/watch"
)

// FuzzPrompt checks the prompt parser on any text and resource link:
// promptLine either refuses the prompt with -32602 or returns the trimmed
// line, a resource link's path comes back from the shell quoting intact,
// and parseInput reads every line as exactly one well-formed input.
// Seeded from testdata/fuzz/; .ci/run runs it briefly.
func FuzzPrompt(f *testing.F) {
	f.Add("/every 1s date", "file:///tmp/a%20b")
	f.Add("/scenario paused 250ms", "")
	f.Fuzz(func(t *testing.T, text, uri string) {
		line, err := promptLine([]acp.ContentBlock{acp.TextBlock(text)})
		var perr *acp.Error
		switch {
		case err != nil && (!errors.As(err, &perr) || perr.Code != acp.CodeInvalidParams):
			t.Fatalf("promptLine(%q): %v", text, err)
		case err != nil:
			if strings.TrimSpace(text) != "" {
				t.Fatalf("promptLine(%q) refused a non-empty prompt: %v", text, err)
			}
		case line != strings.TrimSpace(text) || line == "":
			t.Fatalf("promptLine(%q) = %q", text, line)
		default:
			checkInput(t, line, parseInput(line))
		}

		if uri != "" {
			path, err := linkPath(uri)
			if err != nil {
				if u, perr := url.Parse(uri); perr != nil || u.Scheme != "file" { // schemes are case-insensitive
					t.Fatalf("linkPath(%q) refused a URI that is not a file URI: %v", uri, err)
				}
				return
			}
			if got, ok := shellUnquote(words.Quote(path)); !ok || got != path {
				t.Fatalf("words.Quote(%q) = %q, which a shell reads as %q", path, words.Quote(path), got)
			}
			if w, _, _, _ := words.Next(words.Quote(path)); w.Text != path {
				t.Fatalf("words.Quote(%q) = %q, which /watch reads as %q", path, words.Quote(path), w.Text)
			}
		}
	})
}

func checkInput(t *testing.T, line string, in input) {
	t.Helper()
	name := in.cmd.name
	switch {
	case in.cmd == shellLine:
		if in.line != line {
			t.Fatalf("parseInput(%q) runs %q", line, in.line)
		}
	case name == "bg" && in.line != "":
		if !strings.HasSuffix(line, in.line) {
			t.Fatalf("parseInput(%q) = %+v: its command is not the end of the line", line, in)
		}
	case name == "after", name == "every":
		a := in.args.(jobs.Args)
		if in.line == "" || a.Line != in.line || !strings.HasSuffix(line, in.line) {
			t.Fatalf("parseInput(%q) = %+v: its command is not the end of the line", line, in)
		}
		if a.Delay <= 0 {
			t.Fatalf("parseInput(%q) = %+v: a schedule without a positive delay", line, in)
		}
	case name == "wait":
		w := in.args.(*wait.Spec)
		targets := 0
		for _, set := range []bool{w.Pattern != nil, w.Port != 0, w.URL != ""} {
			if set {
				targets++
			}
		}
		if w.Term == "" || w.Timeout <= 0 || w.Timeout > wait.MaxTimeout || targets > 1 || w.Fresh && w.Pattern == nil {
			t.Fatalf("parseInput(%q) waits for %+v", line, w)
		}
	case name == "watch":
		w := in.args.(*watch.Spec)
		if w.Path == "" || w.Line == "" || !strings.HasSuffix(line, w.Line) {
			t.Fatalf("parseInput(%q) watches %+v", line, w)
		}
	case name == "stop", name == "pause", name == "resume", name == "restart":
		if id := in.args.(string); id == "" || strings.ContainsAny(id, " \t") {
			t.Fatalf("parseInput(%q) acts on %q", line, id)
		}
	case name == "send", name == "keys", name == "resize", name == "tail":
		a := in.args.(terminput.Args)
		if a.ID == "" || strings.ContainsAny(a.ID, " ") {
			t.Fatalf("parseInput(%q) acts on terminal %q", line, a.ID)
		}
		if (name == "send" || name == "keys") && (len(a.Data) == 0 || a.What == "") ||
			name == "resize" && a.Size.Validate("size") != nil ||
			name == "tail" && (a.Lines < 1 || a.Lines > terminput.MaxTail) {
			t.Fatalf("parseInput(%q) = %+v", line, in)
		}
	case name == "up", name == "down":
		if in.args.(string) != in.line {
			t.Fatalf("parseInput(%q) = %+v", line, in)
		}
	case name == "logs":
		if a := in.args.(service.LogsArgs); a.Name == "" || a.Lines < 1 {
			t.Fatalf("parseInput(%q) = %+v", line, in)
		}
	case name == "bg", name == "ps", name == "scenario", name == "status":
	case in.cmd == scenarioPlay:
		if in.args.(string) == "" {
			t.Fatalf("parseInput(%q) plays no scenario", line)
		}
	case in.cmd == malformed:
		if in.problem == "" {
			t.Fatalf("parseInput(%q): bad input without a problem", line)
		}
	default:
		t.Fatalf("parseInput(%q): command %+v", line, in.cmd)
	}
}

// shellUnquote reads s as a POSIX shell reads one word made of bare
// characters and single-quoted strings, which is all words.Quote writes.
func shellUnquote(s string) (string, bool) {
	var b strings.Builder
	for len(s) > 0 {
		switch {
		case s[0] == '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return "", false
			}
			b.WriteString(s[1 : 1+end])
			s = s[end+2:]
		case s[0] == '\\' && len(s) > 1:
			b.WriteByte(s[1])
			s = s[2:]
		case strings.ContainsRune(" \t\n\"$`\\|&;<>()*?[#~", rune(s[0])):
			return "", false // would be split, expanded or quoted by the shell
		default:
			b.WriteByte(s[0])
			s = s[1:]
		}
	}
	return b.String(), true
}
