package supervisor

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/jobs"
	"shellagent/supervisor/service"
	"shellagent/supervisor/terminput"
)

func TestParseInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want input
		says string // for badInput: a part of the problem
	}{
		{line: "echo hi", want: input{cmd: shellLine, line: "echo hi"}},
		{line: "/usr/bin/env FOO=1 true", want: input{cmd: shellLine, line: "/usr/bin/env FOO=1 true"}},
		{line: "/", want: input{cmd: shellLine, line: "/"}},
		{line: "./run", want: input{cmd: shellLine, line: "./run"}},
		{line: "/bg", want: input{cmd: lookup("bg")}},
		{line: "/bg   npm run dev ", want: input{cmd: lookup("bg"), line: "npm run dev"}},
		{line: "/ps", want: input{cmd: lookup("ps")}},
		{line: "/ps -a", want: input{cmd: malformed}, says: "/ps takes no arguments. Write it as /ps."},
		{line: "/stop term_3", want: input{cmd: lookup("stop"), args: "term_3"}},
		{line: "/stop", want: input{cmd: malformed}, says: "needs exactly one terminal or tool call id"},
		{line: "/stop a b", want: input{cmd: malformed}, says: "Write it as /stop ID"},
		{line: "/after 5m make test", want: input{cmd: lookup("after"), line: "make test", args: jobs.Args{Delay: 5 * time.Minute, Line: "make test"}}},
		{line: "/after 1ns x", want: input{cmd: lookup("after"), line: "x", args: jobs.Args{Delay: 1, Line: "x"}}},
		{line: "/after 5m", want: input{cmd: malformed}, says: "/after needs a duration and a command"},
		{line: "/after soon x", want: input{cmd: malformed}, says: `"soon" is not a duration`},
		{line: "/after 0s x", want: input{cmd: malformed}, says: "must be more than 0, got 0s"},
		{line: "/every 30s git fetch", want: input{cmd: lookup("every"), line: "git fetch", args: jobs.Args{Delay: 30 * time.Second, Line: "git fetch"}}},
		{line: "/every 1s x", want: input{cmd: lookup("every"), line: "x", args: jobs.Args{Delay: time.Second, Line: "x"}}},
		{line: "/every 999ms x", want: input{cmd: malformed}, says: "the interval must be at least 1s, got 999ms"},
		{line: "/every -5s x", want: input{cmd: malformed}, says: "must be more than 0"},
		{line: "/nope now", want: input{cmd: malformed}, says: "Unknown command /nope. Available: /bg, /ps, /stop, /after, /every, /send, /keys, /resize, /tail, /wait, /watch, /pause, /resume, /scenario, /up, /down, /restart, /status, /logs."},
		{line: "/send term_1 hello  world", want: input{cmd: lookup("send"), args: terminput.Args{ID: "term_1", Data: []byte("hello  world\r"), What: `"hello  world" and Enter`}}},
		{line: "/send term_1", want: input{cmd: lookup("send"), args: terminput.Args{ID: "term_1", Data: []byte("\r"), What: "Enter"}}},
		{line: "/send", want: input{cmd: malformed}, says: "/send needs a terminal id. Write it as /send ID TEXT"},
		{line: "/keys term_2 C-c", want: input{cmd: lookup("keys"), args: terminput.Args{ID: "term_2", Data: []byte{3}, What: "C-c"}}},
		{line: "/keys term_2 Up Enter q", want: input{cmd: lookup("keys"), args: terminput.Args{ID: "term_2", Data: []byte("\x1b[A\rq"), What: "Up Enter q"}}},
		{line: "/keys term_2", want: input{cmd: malformed}, says: "/keys needs at least one key"},
		{line: "/keys term_2 Enter Retrun", want: input{cmd: malformed}, says: `/keys: unknown key "Retrun". Keys are named as tmux`},
		{line: "/resize term_1 200x50", want: input{cmd: lookup("resize"), args: terminput.Args{ID: "term_1", Size: acp.TerminalSize{Cols: 200, Rows: 50}}}},
		{line: "/resize term_1 200", want: input{cmd: malformed}, says: `/resize: "200" is not a size COLSxROWS`},
		{line: "/resize term_1 0x50", want: input{cmd: malformed}, says: "size.cols: expected an integer from 1 to 10000, got 0"},
		{line: "/tail term_1", want: input{cmd: lookup("tail"), args: terminput.Args{ID: "term_1", Lines: terminput.DefaultTail}}},
		{line: "/tail term_1 50", want: input{cmd: lookup("tail"), args: terminput.Args{ID: "term_1", Lines: 50}}},
		{line: "/tail term_1 5000", want: input{cmd: lookup("tail"), args: terminput.Args{ID: "term_1", Lines: terminput.MaxTail}}},
		{line: "/tail term_1 -3", want: input{cmd: malformed}, says: `"-3" is not a number of lines`},
		{line: "/scenario", want: input{cmd: lookup("scenario")}},
		{line: "/scenario  paused  2s ", want: input{cmd: scenarioPlay, args: "paused  2s"}}, // read by the kit
		{line: "/pause call_2", want: input{cmd: lookup("pause"), args: "call_2"}},
		{line: "/resume", want: input{cmd: malformed}, says: "/resume needs exactly one watch's tool call id. Write it as /resume ID, e.g. /resume call_2."},
		{line: "/up", want: input{cmd: lookup("up"), args: ""}},
		{line: "/down web db", want: input{cmd: lookup("down"), line: "web db", args: "web db"}}, // the names title a new session
		{line: "/restart web", want: input{cmd: lookup("restart"), args: "web"}},
		{line: "/restart web db", want: input{cmd: malformed}, says: "/restart needs exactly one service name. Write it as /restart NAME"},
		{line: "/status", want: input{cmd: lookup("status")}},
		{line: "/status all", want: input{cmd: malformed}, says: "/status takes no arguments. Write it as /status."},
		{line: "/logs web", want: input{cmd: lookup("logs"), args: service.LogsArgs{Name: "web", Lines: 50}}},
		{line: "/logs web 1000", want: input{cmd: lookup("logs"), args: service.LogsArgs{Name: "web", Lines: 1000}}},
		{line: "/logs web 1001", want: input{cmd: malformed}, says: `/logs: "1001" is not a number of lines from 1 to 1000. Write it as /logs NAME [N]`},
		{line: "/logs", want: input{cmd: malformed}, says: "/logs needs a service name and at most a number of lines"},
	}
	for _, tt := range tests {
		got := parseInput(tt.line)
		if tt.want.cmd == malformed {
			if got.cmd != malformed || !strings.Contains(got.problem, tt.says) {
				t.Errorf("parseInput(%q) = %+v, want a problem saying %q", tt.line, got, tt.says)
			}
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseInput(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
	// A problem that says all (an unknown key, with the keys' help) is
	// not followed by the usage.
	if got := parseInput("/keys term_2 Retrun").problem; strings.Contains(got, "Write it as") || !strings.HasSuffix(got, ".") {
		t.Errorf("parseInput(/keys term_2 Retrun) says %q, want the problem alone", got)
	}
}

func TestImmediateInputs(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]bool{
		"echo hi": false, "/bg x": true, "/bg": true, "/ps": true,
		"/stop term_1": true, "/after 1s x": false, "/every 1s x": false, "/nope": false,
		"/send term_1 y": true, "/keys term_1 C-c": true, "/resize term_1 80x24": true, "/tail term_1": true,
		"/wait term_1": false, "/watch . x": false, "/pause call_1": true, "/resume call_1": true,
		"/scenario": true, "/scenario paused": false,
	} {
		if got := parseInput(line).immediate(); got != want {
			t.Errorf("%q immediate = %v, want %v", line, got, want)
		}
	}
}

// TestCommandTable checks that each slash command's entry is whole: its
// usage writes its arguments as its syntax says, it has a hint exactly
// when it takes arguments, and it runs something.
func TestCommandTable(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		written := strings.TrimSpace("/" + c.name + " " + c.syntax)
		if !strings.Contains(c.usage, written) || c.description == "" || (c.hint == "") != (c.syntax == "") {
			t.Errorf("/%s: usage %q, syntax %q, hint %q: the usage must write %q and the hint go with arguments", c.name, c.usage, c.syntax, c.hint, written)
		}
		if c.parse == nil || (c.act == nil) == (c.hold == nil) || c.now && c.act == nil {
			t.Errorf("/%s: it needs a parser and one of act or hold (act if it acts at once)", c.name)
		}
	}
	for _, c := range []*command{shellLine, malformed, scenarioPlay, kitWork} {
		if (c.act == nil) == (c.hold == nil) || c.now {
			t.Errorf("%+v: an input no slash command writes needs one of act or hold, and waits its turn", c)
		}
	}
}

func TestPromptLine(t *testing.T) {
	t.Parallel()
	text := func(s string) acp.ContentBlock { return acp.TextBlock(s) }
	link := func(uri string) acp.ContentBlock {
		return acp.ContentBlock{Type: "resource_link", URI: uri, Name: "x"}
	}
	tests := []struct {
		name   string
		blocks []acp.ContentBlock
		want   string
		err    string // a part of the -32602 message
	}{
		{"one block", []acp.ContentBlock{text("ls -l")}, "ls -l", ""},
		{"blocks joined by spaces", []acp.ContentBlock{text("echo"), text("a b")}, "echo a b", ""},
		{"trimmed", []acp.ContentBlock{text("  ls \n")}, "ls", ""},
		{"file link is its quoted path", []acp.ContentBlock{text("cat"), link("file:///tmp/it's%20here.txt")}, `cat '/tmp/it'\''s here.txt'`, ""},
		{"plain path stays bare", []acp.ContentBlock{text("cat"), link("file:///etc/hosts")}, "cat /etc/hosts", ""},
		{"other link is its URI", []acp.ContentBlock{text("curl"), link("https://example.com/a?b=c&d")}, "curl 'https://example.com/a?b=c&d'", ""},
		{"link without uri", []acp.ContentBlock{{Type: "resource_link", Name: "x"}}, "", "prompt[0].uri: required"},
		{"link to another host", []acp.ContentBlock{text("cat"), link("file://otherhost/etc/passwd")}, "", `prompt[1].uri: file://otherhost/etc/passwd names the host "otherhost"`},
		{"image", []acp.ContentBlock{text("x"), {Type: "image"}}, "", `prompt[1].type: "image" is not supported`},
		{"no blocks", nil, "", "prompt: empty"},
		{"only spaces", []acp.ContentBlock{text(" \t\n")}, "", "prompt: empty"},
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
	tests := []struct{ uri, want, err string }{
		{"file:///home/me/a.txt", "/home/me/a.txt", ""},
		{"file:///home/me/with%20space", "/home/me/with space", ""},
		{"file://localhost/etc/hosts", "/etc/hosts", ""},
		{"file://otherhost/etc/passwd", "", `names the host "otherhost"`},
		{"file://host/share/x", "", `names the host "host"`},
		{"file:", "file:", ""},
		{"https://example.com/x", "https://example.com/x", ""},
		{"relative/path", "relative/path", ""},
		{"%zz", "%zz", ""},
	}
	for _, tt := range tests {
		got, err := linkPath(tt.uri)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("linkPath(%q) = %q, %v; want %q", tt.uri, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("linkPath(%q) = %q, %v; want an error saying %q", tt.uri, got, err, tt.err)
		}
	}
}
