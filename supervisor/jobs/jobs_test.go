package jobs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/work"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		every   bool
		rest    string
		delay   time.Duration
		line    string
		problem string
	}{
		{false, "5m make test", 5 * time.Minute, "make test", ""},
		{true, "30s  git fetch ", 30 * time.Second, "git fetch", ""},
		{false, "5m", 0, "", "/after needs a duration and a command"},
		{false, "soon echo", 0, "", `/after: "soon" is not a duration`},
		{false, "-1s echo", 0, "", "/after: the duration must be more than 0, got -1s"},
		{true, "500ms echo", 0, "", "/every: the interval must be at least 1s, got 500ms"},
	}
	for _, tt := range tests {
		d, line, problem := Parse(tt.every, tt.rest)
		if d != tt.delay || line != tt.line || problem != tt.problem {
			t.Errorf("Parse(%v, %q) = %v, %q, %q; want %v, %q, %q", tt.every, tt.rest, d, line, problem, tt.delay, tt.line, tt.problem)
		}
	}
}

// A recurring job runs at each firing unless its previous run still holds
// or waits for the foreground: then it skips, saying so once per run;
// cancelled, it fires no more, and its waiting run is dropped. Its frozen
// form thaws into a job armed for the same next run.
func TestEverySkipsOncePerRunAndThaws(t *testing.T) {
	t.Parallel()
	h := &fakeHost{now: time.Unix(1000, 0)}
	j := Schedule(h, "make", 30*time.Second, true)
	c := h.call
	if c.spec.Title != "every 30s: make" || !c.spec.Scheduled || !c.listed || c.sent != 1 || h.timers[0].d != 30*time.Second {
		t.Fatalf("scheduled as %+v, timers %v", c, h.timers)
	}
	h.timers[0].f()
	if len(h.runs) != 1 || h.runs[0] != "make" {
		t.Fatalf("the first firing ran %v", h.runs)
	}
	h.running = 7 // its run still goes
	h.timers[1].f()
	h.timers[2].f()
	if len(h.runs) != 1 || len(h.said) != 1 || !strings.Contains(h.said[0], "skipped") {
		t.Errorf("firings during a run: ran %v, said %q; want one skip said", h.runs, h.said)
	}
	kind, frozen := j.HandOver()
	data, err := json.Marshal(frozen)
	if err != nil || kind != "Job" {
		t.Fatalf("HandOver: %s, %v", kind, err)
	}
	j.Cancel()
	if c.status != acp.StatusCancelled || h.dropped != 1 || !h.timers[3].stopped {
		t.Errorf("cancel: status %q, dropped %d", c.status, h.dropped)
	}

	h2 := &fakeHost{now: time.Unix(1010, 0)}
	c2 := &fakeCall{}
	task, err := Kind.Thaw(h2, c2, data)
	if err != nil || task.Listing(h2.now) != "call_1  every 30s  make  age 10s  pending, next run in 20s" || len(h2.timers) != 1 || h2.timers[0].d != 20*time.Second {
		t.Errorf("thawed: %v, %q", err, task.Listing(h2.now))
	}
}

type fakeHost struct {
	now     time.Time
	call    *fakeCall
	timers  []*fakeTimer
	runs    []string
	said    []string
	running work.RunID
	dropped int
}

func (h *fakeHost) Now() time.Time { return h.now }
func (h *fakeHost) After(d time.Duration, f func()) work.Timer {
	t := &fakeTimer{d: d, f: f}
	h.timers = append(h.timers, t)
	return t
}
func (h *fakeHost) Do(f func())                              { f() }
func (h *fakeHost) Open() bool                               { return true }
func (h *fakeHost) Cwd() string                              { return "/p" }
func (h *fakeHost) Say(text string)                          { h.said = append(h.said, text) }
func (h *fakeHost) Slow()                                    {}
func (h *fakeHost) Terminal(string) work.Terminal            { return nil }
func (h *fakeHost) EndTurn(work.Call, string)                {}
func (h *fakeHost) Find(string) (work.Call, work.Task, bool) { return nil, nil, false }
func (h *fakeHost) NewCall(spec work.CallSpec, _ work.Task) work.Call {
	h.call = &fakeCall{spec: spec}
	return h.call
}
func (h *fakeHost) Run(line string, _ any) { h.runs = append(h.runs, line) }
func (h *fakeHost) RunOf(any) work.RunID   { return h.running }
func (h *fakeHost) DropRuns(any)           { h.dropped++ }

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool { t.stopped = true; return true }

type fakeCall struct {
	spec   work.CallSpec
	status string
	sent   int
	listed bool
}

func (c *fakeCall) ID() string    { return "call_1" }
func (c *fakeCall) Title() string { return c.spec.Title }
func (c *fakeCall) Status() string {
	if c.status == "" {
		return acp.StatusPending
	}
	return c.status
}
func (c *fakeCall) Final() bool                       { return c.status != "" }
func (c *fakeCall) Send()                             { c.sent++ }
func (c *fakeCall) List()                             { c.listed = true }
func (c *fakeCall) End(status string)                 { c.status = status }
func (c *fakeCall) SetContent(...acp.ToolCallContent) {}
func (c *fakeCall) SetPaused(bool)                    {}
