package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/supervisor/work"
)

// TestStackAlone: the stack and its services on a fake session: /up
// without a stack file says so and ends its turn; /up starts a service
// once its dependency is ready and ends its turn once both are; /down
// stops the services, dependents first, and holds its turn until they
// have stopped.
func TestStackAlone(t *testing.T) {
	dir := t.TempDir()
	h := &fakeHost{cwd: dir, runs: map[string]*fakeRun{}}
	ss := NewStack(h)

	turn := &fakeTurn{h: h}
	ss.Up(turn, "")
	if !turn.ended || len(h.said) != 1 || !strings.HasPrefix(h.said[0], "No stack file in "+dir) {
		t.Fatalf("/up without a stack file: ended %v, said %q", turn.ended, h.said)
	}

	file := "[services.db]\ncommand = \"db\"\n\n[services.web]\ncommand = \"web\"\ndepends_on = [\"db\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "shellagent.toml"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	h.said = nil
	turn = &fakeTurn{h: h}
	ss.Up(turn, "")
	if got := strings.Join(h.launched, " "); got != "db web" || !turn.ended || turn.reason != acp.StopEndTurn || strings.Join(h.said, "|") != "Ready: db, web." {
		t.Fatalf("/up: launched %q, ended %v, said %q", got, turn.ended, h.said)
	}
	if got := strings.Join(ss.Names(), " "); got != "db web" {
		t.Fatalf("names %q", got)
	}
	for _, name := range ss.Names() {
		if in := ss.Service(name).Info(); in.State != Ready || in.Term == nil || in.Call.Status() != acp.StatusInProgress {
			t.Fatalf("%s: %+v", name, in)
		}
	}

	h.said = nil
	turn = &fakeTurn{h: h}
	ss.Down(turn, "")
	web, db := ss.Service("web").Info().Term.(*fakeRun), ss.Service("db").Info().Term.(*fakeRun)
	if !web.stopped || db.stopped || turn.ended {
		t.Fatalf("/down stops web first: web %v, db %v, ended %v", web.stopped, db.stopped, turn.ended)
	}
	ss.Service("web").RunExited(web, false)
	h.do()
	if !db.stopped {
		t.Fatal("/down did not stop db once web had stopped")
	}
	ss.Service("db").RunExited(db, false)
	h.do()
	if !turn.ended || len(h.said) != 1 || h.said[0] != "Stopped: web, db." {
		t.Fatalf("/down: ended %v, said %q", turn.ended, h.said)
	}
	for _, name := range ss.Names() {
		if in := ss.Service(name).Info(); in.State != Stopped || in.Call.Status() != acp.StatusCompleted {
			t.Errorf("%s after /down: %s, %s", name, in.State, in.Call.Status())
		}
	}
}

type fakeHost struct {
	cwd      string
	runs     map[string]*fakeRun
	launched []string
	said     []string
	queue    []func()
}

// do runs what was queued through Do, as the actor would.
func (h *fakeHost) do() {
	for len(h.queue) > 0 {
		f := h.queue[0]
		h.queue = h.queue[1:]
		f()
	}
}

func (h *fakeHost) Now() time.Time                           { return time.Now() }
func (h *fakeHost) After(time.Duration, func()) work.Timer   { return nil }
func (h *fakeHost) Do(f func())                              { h.queue = append(h.queue, f) }
func (h *fakeHost) Open() bool                               { return true }
func (h *fakeHost) Cwd() string                              { return h.cwd }
func (h *fakeHost) Say(text string)                          { h.said = append(h.said, text) }
func (h *fakeHost) Slow()                                    {}
func (h *fakeHost) Find(string) (work.Call, work.Task, bool) { return nil, nil, false }
func (h *fakeHost) Run(string, any)                          {}
func (h *fakeHost) RunOf(any) work.RunID                     { return work.NoRun }
func (h *fakeHost) DropRuns(any)                             {}
func (h *fakeHost) EndTurn(work.Call, string)                {}
func (h *fakeHost) Terminal(string) work.Terminal            { return nil }
func (h *fakeHost) Notice(*acp.Notice)                       {}
func (h *fakeHost) Config() work.Config                      { return work.Config{} }
func (h *fakeHost) Tail(string, int) string                  { return "" }
func (h *fakeHost) NewCall(spec work.CallSpec, _ work.Task) work.Call {
	return &fakeCall{status: acp.StatusInProgress}
}

func (h *fakeHost) Launch(c work.Call, spec work.LaunchSpec) (work.Run, error) {
	r := &fakeRun{id: "term_" + spec.Line, started: time.Now(), ring: outputbuf.New(1024)}
	h.runs[r.id], h.launched = r, append(h.launched, spec.Line)
	return r, nil
}

func (h *fakeHost) TerminalRun(id string) work.Run {
	if r := h.runs[id]; r != nil {
		return r
	}
	return nil
}

type fakeCall struct{ status string }

func (c *fakeCall) ID() string                        { return "call_1" }
func (c *fakeCall) Title() string                     { return "" }
func (c *fakeCall) Status() string                    { return c.status }
func (c *fakeCall) Final() bool                       { return c.status != acp.StatusInProgress }
func (c *fakeCall) Send()                             {}
func (c *fakeCall) List()                             {}
func (c *fakeCall) SetContent(...acp.ToolCallContent) {}
func (c *fakeCall) SetPaused(bool)                    {}
func (c *fakeCall) End(status string) {
	if !c.Final() {
		c.status = status
	}
}

type fakeRun struct {
	id      string
	started time.Time
	ring    *outputbuf.Ring
	stopped bool
}

func (r *fakeRun) ID() string                         { return r.id }
func (r *fakeRun) Output() *outputbuf.Ring            { return r.ring }
func (r *fakeRun) Exited() bool                       { return false }
func (r *fakeRun) Exit() *acp.ExitStatus              { return &acp.ExitStatus{} }
func (r *fakeRun) Started() time.Time                 { return r.started }
func (r *fakeRun) Running() bool                      { return !r.stopped }
func (r *fakeRun) Retired() bool                      { return false }
func (r *fakeRun) Stop()                              { r.stopped = true }
func (r *fakeRun) List()                              {}
func (r *fakeRun) Pid() int                           { return 0 }
func (r *fakeRun) Members() []int                     { return nil }
func (r *fakeRun) Launched() bool                     { return true }
func (r *fakeRun) Write(data []byte) (int, error)     { return len(data), nil }
func (r *fakeRun) Resize(size acp.TerminalSize) error { return nil }

type fakeTurn struct {
	h      *fakeHost
	held   bool
	ended  bool
	reason string
}

func (t *fakeTurn) Hold(_ work.Call, _ work.Foreground) { t.held = true }
func (t *fakeTurn) Refuse(string)                       {}
func (t *fakeTurn) Holds() bool                         { return t.held && !t.ended }
func (t *fakeTurn) End(reason string)                   { t.ended, t.reason = true, reason }
