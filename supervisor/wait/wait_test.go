package wait

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/supervisor/work"
)

func TestParseWait(t *testing.T) {
	t.Parallel()
	const def = DefaultTimeout
	tests := []struct {
		line    string
		want    Spec // but Pattern
		pattern bool
	}{
		{"/wait term_1", Spec{Term: "term_1", Timeout: def}, false},
		{"/wait term_1 'ready on' --timeout 30s", Spec{Term: "term_1", Text: "ready on", Timeout: 30 * time.Second}, true},
		{"/wait term_1 ready on", Spec{Term: "term_1", Text: "ready on", Timeout: def}, true},
		{`/wait term_1 --new "say \"hi\"" --timeout=1h`, Spec{Term: "term_1", Text: `say "hi"`, Timeout: time.Hour, Fresh: true}, true},
		{`/wait term_1 \d+ms`, Spec{Term: "term_1", Text: `\d+ms`, Timeout: def}, true},
		{`/wait term_1 '--new'`, Spec{Term: "term_1", Text: "--new", Timeout: def}, true},
		{`/wait term_1 \-\-new`, Spec{Term: "term_1", Text: `\-\-new`, Timeout: def}, true}, // a regular expression for --new
		{"/wait term_1 :3000", Spec{Term: "term_1", Text: ":3000", Port: 3000, Timeout: def}, false},
		{`/wait term_1 \:3000x`, Spec{Term: "term_1", Text: `\:3000x`, Timeout: def}, true}, // a pattern that starts with ':'
		{"/wait term_1 :65535", Spec{Term: "term_1", Text: ":65535", Port: 65535, Timeout: def}, false},
		{"/wait term_1 https://[::1]:8443/x", Spec{Term: "term_1", Text: "https://[::1]:8443/x", URL: "https://[::1]:8443/x", Timeout: def}, false},
		{"/wait term_2 http://localhost:3000/ --timeout 1m", Spec{Term: "term_2", Text: "http://localhost:3000/", URL: "http://localhost:3000/", Timeout: time.Minute}, false},
	}
	for _, tt := range tests {
		spec, problem := Parse(strings.TrimPrefix(tt.line, "/wait "))
		if problem != "" {
			t.Errorf("Parse(%q): %s", tt.line, problem)
			continue
		}
		got := *spec
		if (got.Pattern != nil) != tt.pattern {
			t.Errorf("Parse(%q): pattern %v", tt.line, got.Pattern)
		}
		got.Pattern = nil
		if got != tt.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

// A wait for a terminal's exit holds its turn until the exit, then
// completes, says so and ends the turn; a wait for an unknown terminal is
// refused; a frozen wait whose terminal is gone ends failed in the new
// image, saying why.
func TestWaitForTheExitOnAFakeSession(t *testing.T) {
	t.Parallel()
	h := &fakeHost{terms: map[string]*fakeTerminal{"term_1": {id: "term_1", ring: outputbuf.New(1 << 10)}}}
	turn := &fakeTurn{}
	Start(h, turn, &Spec{Term: "term_9", Timeout: time.Minute})
	if !strings.Contains(turn.refused, "no terminal") || h.call != nil {
		t.Fatalf("a wait for term_9: refused %q, call %v", turn.refused, h.call)
	}

	Start(h, turn, &Spec{Term: "term_1", Timeout: time.Minute})
	c := h.call
	if turn.held != c || c.spec.Title != "wait for term_1 to exit" || c.sent != 1 || c.final {
		t.Fatalf("held %v, call %+v", turn.held, c)
	}
	term := h.terms["term_1"]
	code := 3
	term.exit = &acp.ExitStatus{ExitCode: &code}
	c.task.(work.TerminalWatcher).TerminalExited(term)
	if c.status != acp.StatusCompleted || len(h.said) != 1 || !strings.HasPrefix(h.said[0], "term_1 exited with code 3; waited ") || h.ended != acp.StopEndTurn {
		t.Errorf("after the exit: status %q, said %q, turn ended %q", c.status, h.said, h.ended)
	}

	frozen, _ := json.Marshal(Frozen{Term: "term_2", Target: "ready", Timeout: time.Minute, Started: time.Now()})
	gone := &fakeCall{}
	task, err := Kind.Thaw(h, gone, frozen)
	if err != nil || task != nil || gone.status != acp.StatusFailed {
		t.Errorf("thawed without its terminal: %v, %v, status %q", task, err, gone.status)
	}
}

type fakeHost struct {
	terms map[string]*fakeTerminal
	call  *fakeCall
	said  []string
	ended string
}

func (h *fakeHost) Now() time.Time                           { return time.Now() }
func (h *fakeHost) After(time.Duration, func()) work.Timer   { return nil }
func (h *fakeHost) Do(f func())                              { f() }
func (h *fakeHost) Open() bool                               { return true }
func (h *fakeHost) Cwd() string                              { return "/p" }
func (h *fakeHost) Say(text string)                          { h.said = append(h.said, text) }
func (h *fakeHost) Slow()                                    {}
func (h *fakeHost) Find(string) (work.Call, work.Task, bool) { return nil, nil, false }
func (h *fakeHost) Run(string, any)                          {}
func (h *fakeHost) RunOf(any) work.RunID                     { return work.NoRun }
func (h *fakeHost) DropRuns(any)                             {}
func (h *fakeHost) EndTurn(_ work.Call, stopReason string)   { h.ended = stopReason }
func (h *fakeHost) NewCall(spec work.CallSpec, t work.Task) work.Call {
	h.call = &fakeCall{spec: spec, task: t}
	return h.call
}
func (h *fakeHost) Terminal(id string) work.Terminal {
	if t := h.terms[id]; t != nil {
		return t
	}
	return nil
}

type fakeTurn struct {
	held    work.Call
	refused string
}

func (t *fakeTurn) Hold(c work.Call, _ work.Foreground) { t.held = c }
func (t *fakeTurn) Refuse(text string)                  { t.refused = text }
func (t *fakeTurn) Holds() bool                         { return t.held != nil }
func (t *fakeTurn) End(string)                          {}

type fakeTerminal struct {
	id   string
	ring *outputbuf.Ring
	exit *acp.ExitStatus
}

func (t *fakeTerminal) ID() string              { return t.id }
func (t *fakeTerminal) Output() *outputbuf.Ring { return t.ring }
func (t *fakeTerminal) Exited() bool            { return t.exit != nil }
func (t *fakeTerminal) Exit() *acp.ExitStatus   { return t.exit }

func (t *fakeTerminal) Launched() bool                     { return true }
func (t *fakeTerminal) Write(data []byte) (int, error)     { return len(data), nil }
func (t *fakeTerminal) Resize(size acp.TerminalSize) error { return nil }

type fakeCall struct {
	spec   work.CallSpec
	task   work.Task
	status string
	final  bool
	sent   int
}

func (c *fakeCall) ID() string                        { return "call_1" }
func (c *fakeCall) Title() string                     { return c.spec.Title }
func (c *fakeCall) Status() string                    { return c.status }
func (c *fakeCall) Final() bool                       { return c.final }
func (c *fakeCall) Send()                             { c.sent++ }
func (c *fakeCall) List()                             {}
func (c *fakeCall) SetContent(...acp.ToolCallContent) {}
func (c *fakeCall) SetPaused(bool)                    {}
func (c *fakeCall) End(status string)                 { c.status, c.final = status, true }
