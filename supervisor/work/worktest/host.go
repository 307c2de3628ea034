// Package worktest is a fake session for the tests of the kinds of work
// (supervisor/jobs, supervisor/wait, supervisor/service,
// supervisor/terminput, supervisor/approval): one Host that is a
// work.RunHost, with no actor, no process and no client, and, for a
// session whose commands wait for the user's permission, its
// Permissions, with a client the test answers for. The test's goroutine stands for the session's
// actor: it calls the kinds, and the fake calls them back on it, never on
// a goroutine of its own. What the session would have sent is kept in
// fields the test reads; what the session would hear of (a timer due, a
// terminal's exit, the end of a foreground run) happens when the test
// says so.
//
// Files: host.go (the Host: agent messages, foreground runs, tool calls,
// terminals and their exits, what goroutines queue through Do),
// clock.go (the Clock the test moves, and its Timers), call.go (Call, a
// tool call; Turn, a foreground turn), terminal.go (Terminal; Run, a
// terminal launched for a tool call), ask.go (Permissions, and each
// Request for permission it sent).
package worktest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/supervisor/work"
)

// A Host is a fake session (a work.RunHost). Make it with NewHost; set
// its fields before the kind under test reads them. All of its methods
// but Do run on the test's goroutine.
type Host struct {
	Clock   Clock  // the session's clock: Now, After
	Dir     string // Cwd's answer: "/p" unless set
	Closing bool   // Open reports false
	// Configuration is Config's answer.
	Configuration work.Config

	Said    []string      // every agent message (Say, Turn.Refuse), in order
	Notices []*acp.Notice // every Notice, in order
	Slows   int           // how many times Slow was called
	// Ran is every Run, in order; Drops counts DropRuns.
	Ran   []*ForegroundRun
	Drops int
	// Calls are the tool calls (NewCall, Thaw), in order; Launched the
	// spec of every Launch, in order.
	Calls    []*Call
	Launched []work.LaunchSpec

	turns []*Turn
	terms map[string]work.Terminal // *Terminal or *Run
	mu    sync.Mutex
	queue []func() // Do's, for Drain
}

var _ work.RunHost = (*Host)(nil)

// NewHost returns a Host whose clock stands at Start, in /p, open, with
// nothing of its own.
func NewHost() *Host {
	return &Host{Clock: Clock{now: Start}, Dir: "/p", terms: map[string]work.Terminal{}}
}

// Now is the Clock's time.
func (h *Host) Now() time.Time { return h.Clock.Now() }

// After arms a timer of the Clock: f is called by Clock.Advance or
// Timer.Fire.
func (h *Host) After(d time.Duration, f func()) work.Timer { return h.Clock.After(d, f) }

// Do queues f, for Drain; any goroutine may call it.
func (h *Host) Do(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queue = append(h.queue, f)
}

// Drain calls what Do queued, in order, as the actor would, until
// nothing is queued (a function queued meanwhile is called too).
func (h *Host) Drain() {
	for {
		h.mu.Lock()
		if len(h.queue) == 0 {
			h.mu.Unlock()
			return
		}
		f := h.queue[0]
		h.queue = h.queue[1:]
		h.mu.Unlock()
		f()
	}
}

// Open reports whether it is not Closing.
func (h *Host) Open() bool { return !h.Closing }

// Cwd is Dir.
func (h *Host) Cwd() string { return h.Dir }

// Say keeps text in Said.
func (h *Host) Say(text string) { h.Said = append(h.Said, text) }

// Slow counts in Slows.
func (h *Host) Slow() { h.Slows++ }

// Notice keeps n in Notices.
func (h *Host) Notice(n *acp.Notice) { h.Notices = append(h.Notices, n) }

// Config is Configuration.
func (h *Host) Config() work.Config { return h.Configuration }

// Find returns the call id and its task; or, if there is none, whether
// id is a terminal's.
func (h *Host) Find(id string) (work.Call, work.Task, bool) {
	for _, c := range h.Calls {
		if c.id == id {
			return c, c.Task, false
		}
	}
	return nil, nil, h.terms[id] != nil
}

// NewCall makes a Call whose work is t, pending if spec is Scheduled or
// Asking, else in_progress, named call_N: the Nth of the Host's calls. It is
// neither sent nor listed.
func (h *Host) NewCall(spec work.CallSpec, t work.Task) work.Call {
	c := &Call{Spec: spec, Task: t, id: fmt.Sprintf("call_%d", len(h.Calls)+1), status: acp.StatusInProgress}
	if spec.Scheduled || spec.Asking {
		c.status = acp.StatusPending
	}
	h.Calls = append(h.Calls, c)
	return c
}

// Thaw does what the session does with the frozen task of a kind k in
// the new image of an upgrade in place: it makes a call as NewCall does
// (its state is spec's), thaws frozen into it, and makes the task
// returned its task.
func (h *Host) Thaw(k work.Kind, spec work.CallSpec, frozen []byte) (*Call, work.Task, error) {
	c := h.NewCall(spec, nil).(*Call)
	t, err := k.Thaw(h, c, frozen)
	c.Task = t
	return c, t, err
}

// A ForegroundRun is one Host.Run: line run as new foreground work of
// origin. The first that is neither done nor dropped holds the
// foreground; the others wait behind it.
type ForegroundRun struct {
	ID      work.RunID // 1, 2, ... in the order of Run
	Line    string
	Origin  any
	Done    bool // it held the foreground and ended (FinishRun)
	Dropped bool // DropRuns dropped it while it waited
}

func (r *ForegroundRun) live() bool { return !r.Done && !r.Dropped }

// Run keeps a ForegroundRun in Ran.
func (h *Host) Run(line string, origin any) {
	h.Ran = append(h.Ran, &ForegroundRun{ID: work.RunID(len(h.Ran) + 1), Line: line, Origin: origin})
}

// RunOf returns the ID of origin's run that holds or waits for the
// foreground, or work.NoRun.
func (h *Host) RunOf(origin any) work.RunID {
	for _, r := range h.Ran {
		if r.live() && r.Origin == origin {
			return r.ID
		}
	}
	return work.NoRun
}

// DropRuns counts in Drops, and drops origin's runs that wait.
func (h *Host) DropRuns(origin any) {
	h.Drops++
	for _, r := range waiting(h.Ran) {
		if r.Origin == origin {
			r.Dropped = true
		}
	}
}

// waiting returns the live runs of ran behind the one that holds the
// foreground.
func waiting(ran []*ForegroundRun) []*ForegroundRun {
	var live []*ForegroundRun
	for _, r := range ran {
		if r.live() {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[1:]
}

// FinishRun ends the run that holds the foreground, if one does: the
// next one that waits holds it.
func (h *Host) FinishRun() {
	for _, r := range h.Ran {
		if r.live() {
			r.Done = true
			return
		}
	}
}

// NewTurn returns a new foreground turn for a kind's command.
func (h *Host) NewTurn() *Turn {
	t := &Turn{h: h}
	h.turns = append(h.turns, t)
	return t
}

// EndTurn ends, with stopReason, the turn of the Host that c's work holds
// (Turn.Hold), if one does.
func (h *Host) EndTurn(c work.Call, stopReason string) {
	for _, t := range h.turns {
		if c != nil && t.Call == c && t.Holds() {
			t.End(stopReason)
		}
	}
}

// AddTerminal makes t (a new Terminal if t is nil) the Host's terminal
// id, with a ring of 1 KiB if it has none, and returns it.
func (h *Host) AddTerminal(id string, t *Terminal) *Terminal {
	if t == nil {
		t = &Terminal{}
	}
	t.id = id
	if t.ring == nil {
		t.ring = outputbuf.New(1 << 10)
	}
	h.terms[id] = t
	return t
}

// Terminal returns the terminal or run id, nil if there is none or it
// is Gone.
func (h *Host) Terminal(id string) work.Terminal {
	switch t := h.terms[id].(type) {
	case *Terminal:
		if !t.Gone {
			return t
		}
	case *Run:
		if !t.Gone {
			return t
		}
	}
	return nil
}

// TerminalRun returns the run id (Launch), nil if there is none (a
// terminal of AddTerminal is none).
func (h *Host) TerminalRun(id string) work.Run {
	if r, ok := h.terms[id].(*Run); ok {
		return r
	}
	return nil
}

// Launch makes a Run, term_N (the Host's Nth terminal), started now, for
// c: c's content references it and spec.Note's text, and an update of c
// is sent. It keeps spec in Launched. It never fails.
func (h *Host) Launch(c work.Call, spec work.LaunchSpec) (work.Run, error) {
	id := fmt.Sprintf("term_%d", len(h.terms)+1)
	r := &Run{Terminal: &Terminal{}, Call: c, Spec: spec, Start: h.Now()}
	h.AddTerminal(id, r.Terminal)
	h.terms[id] = r
	h.Launched = append(h.Launched, spec)
	content := []acp.ToolCallContent{acp.TerminalContent(id)}
	if spec.Note != nil {
		content = append(content, acp.TextContent(spec.Note(id)))
	}
	c.SetContent(content...)
	c.Send()
	return r, nil
}

// Exit ends terminal or run id with es, as its process's exit does: a
// run leaves the list and the task of its call hears of it first
// (work.RunWatcher, with onItsOwn), then every task of a call not final
// that watches terminals (work.TerminalWatcher), the oldest first.
func (h *Host) Exit(id string, es *acp.ExitStatus, onItsOwn bool) {
	t := h.Terminal(id)
	if t == nil {
		panic("worktest: Exit of " + id + ", which is no terminal of the Host")
	}
	if r, ok := t.(*Run); ok {
		r.ExitStatus, r.Listed = es, false
		if w, ok := callTask(r.Call).(work.RunWatcher); ok {
			w.RunExited(r, onItsOwn)
		}
	} else {
		t.(*Terminal).ExitStatus = es
	}
	for _, c := range h.Calls {
		if w, ok := c.Task.(work.TerminalWatcher); ok && !c.Final() {
			w.TerminalExited(t)
		}
	}
}

// callTask returns the task of c, if it is a Call.
func callTask(c work.Call) work.Task {
	if c, ok := c.(*Call); ok {
		return c.Task
	}
	return nil
}

// Tail returns the last n lines of terminal id's output as its ring holds
// them, escape sequences and all, or why there are none.
func (h *Host) Tail(id string, n int) string {
	t := h.Terminal(id)
	if t == nil {
		return fmt.Sprintf("no terminal %q", id)
	}
	data, _ := t.Output().Snapshot()
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
