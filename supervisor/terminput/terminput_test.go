package terminput

import (
	"bytes"
	"testing"

	"shellagent/acp"
	"shellagent/ptyio"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, arg string
		want      Args
		problem   string
		usage     bool
	}{
		{name: "send", arg: "", want: Args{Data: []byte("\r"), What: "Enter"}},
		{name: "send", arg: "yes", want: Args{Data: []byte("yes\r"), What: `"yes" and Enter`}},
		{name: "keys", arg: "C-c Enter", want: Args{Data: []byte("\x03\r"), What: "C-c Enter"}},
		{name: "keys", arg: "", problem: "/keys needs at least one key", usage: true},
		{name: "resize", arg: "100x40", want: Args{Size: acp.TerminalSize{Cols: 100, Rows: 40}}},
		{name: "resize", arg: "wide", problem: `/resize: "wide" is not a size COLSxROWS`, usage: true},
		{name: "tail", arg: "", want: Args{Lines: DefaultTail}},
		{name: "tail", arg: "5", want: Args{Lines: 5}},
		{name: "tail", arg: "5000", want: Args{Lines: MaxTail}},
		{name: "tail", arg: "0", problem: `/tail: "0" is not a number of lines (1 or more)`, usage: true},
	}
	for _, tc := range tests {
		got, problem, usage := Parse(tc.name, tc.arg)
		if problem != tc.problem || usage != tc.usage {
			t.Errorf("Parse(%q, %q) problem %q, usage %v; want %q, %v", tc.name, tc.arg, problem, usage, tc.problem, tc.usage)
			continue
		}
		if problem == "" && (!bytes.Equal(got.Data, tc.want.Data) || got.What != tc.want.What || got.Size != tc.want.Size || got.Lines != tc.want.Lines) {
			t.Errorf("Parse(%q, %q) = %+v, want %+v", tc.name, tc.arg, got, tc.want)
		}
	}
	if _, problem, usage := Parse("keys", "Nope"); problem == "" || usage {
		t.Errorf("Parse(keys, Nope): problem %q, usage %v; want a problem without usage", problem, usage)
	}
}

// TestNoticed checks which waits are noticed: the first, and another one
// after input was typed; not the same wait again, nor any wait without
// input typed since.
func TestNoticed(t *testing.T) {
	t.Parallel()
	a, b := ptyio.InputWait{Pid: 7}, ptyio.InputWait{Pid: 8}
	in := &Input{looker: &looker{gap: quietBefore}}
	steps := []struct {
		typed bool
		wait  ptyio.InputWait
		want  bool
	}{
		{false, a, true},
		{false, a, false},
		{false, b, false}, // no input typed since
		{true, a, false},  // the same wait
		{false, b, true},  // input was typed, and it is another
		{true, b, false},
	}
	for i, s := range steps {
		if s.typed {
			in.Typed()
		}
		if got := in.Noticed(s.wait); got != s.want {
			t.Errorf("step %d: Noticed(%+v) = %v, want %v", i, s.wait, got, s.want)
		}
	}
	var none *Input
	none.Typed() // does nothing on a terminal not watched
}

func TestNotify(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"failures", "all", "off"} {
		if got := ParseNotify(v).Option().CurrentValue; got != v {
			t.Errorf("ParseNotify(%q).Option() = %q", v, got)
		}
	}
	if ParseNotify("some") != NotifyFailures || NotifyAll.In(false) != NotifyOff || NotifyAll.In(true) != NotifyAll {
		t.Error("the default, or the setting of a closing session, is wrong")
	}
	zero, one := 0, 1
	ok, failed := &acp.ExitStatus{ExitCode: &zero}, &acp.ExitStatus{ExitCode: &one}
	tests := []struct {
		exit *acp.ExitStatus
		mode Notify
		want string // severity, or "" for no notice
	}{
		{ok, NotifyFailures, ""},
		{failed, NotifyFailures, acp.NoticeWarning},
		{ok, NotifyAll, acp.NoticeInfo},
		{failed, NotifyOff, ""},
		{&acp.ExitStatus{Signal: "SIGKILL"}, NotifyFailures, acp.NoticeWarning},
	}
	for i, tc := range tests {
		n := ExitNotice("term_1", "make", tc.exit, tc.mode)
		switch {
		case n == nil && tc.want != "":
			t.Errorf("case %d: no notice, want %s", i, tc.want)
		case n != nil && n.Severity != tc.want:
			t.Errorf("case %d: notice %q, want %q", i, n.Severity, tc.want)
		}
	}
}
