package supervisor

import (
	"slices"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/ptyio"
	"shellagent/supervisor/jobs"
	"shellagent/supervisor/service"
	"shellagent/supervisor/wait"
	"shellagent/supervisor/watch"
	"shellagent/supervisor/work"
)

// The kinds of work that live in packages of their own (supervisor/jobs,
// supervisor/wait, supervisor/watch, supervisor/service, supervisor/approval) reach the session
// through package work: a work.Task is a tool call's task here
// (kindTask), and the session is their work.Host (host), each tool call
// their work.Call (callHandle). Adding such a kind is its package (with
// its commands, work.Command), its entry in workKinds, and its commands
// in the table's assembly (commands.go). A stack's
// services thaw into the session's stack (host.Stack, a service.Host),
// which thaw.go then restores; an approval is never handed over (it gets
// no answer first: freeze.go), and starts in permission.go.

// workKinds are the kinds of work in packages of their own, by the name their
// frozen form is written under (handover.Task).
var workKinds = map[string]work.Kind{
	jobs.Kind.Name:    jobs.Kind,
	wait.Kind.Name:    wait.Kind,
	watch.Kind.Name:   watch.Kind,
	service.Kind.Name: service.Kind,
}

// kindTask is a work.Task as the task of its tool call.
type kindTask struct{ t work.Task }

func (k kindTask) listing(now time.Time) string        { return k.t.Listing(now) }
func (k kindTask) cancellable() bool                   { return k.t.Cancellable() }
func (k kindTask) cancel(*state)                       { k.t.Cancel() }
func (k kindTask) close(*state)                        { k.t.Close() }
func (k kindTask) handOver() (kind string, frozen any) { return k.t.HandOver() }

// taskOf returns the work.Task of tool call c, if it has one.
func taskOf(c *toolCall) work.Task {
	if k, ok := c.task.(kindTask); ok {
		return k.t
	}
	return nil
}

// host is the session of st as a kind of work sees it (work.Host). Its
// methods run on the actor, but Do.
type host struct{ st *state }

var _ work.Host = host{}

func (h host) Now() time.Time { return h.st.s.sv.cfg.clock.Now() }

func (h host) After(d time.Duration, f func()) work.Timer {
	s := h.st.s
	return s.sv.cfg.clock.AfterFunc(d, func() { s.do(func(*state) { f() }) })
}

func (h host) Do(f func())     { h.st.s.do(func(*state) { f() }) }
func (h host) Open() bool      { return h.st.life == sessionOpen }
func (h host) Cwd() string     { return h.st.s.cwd }
func (h host) Say(text string) { h.st.out.agentMessage(text) }
func (h host) Slow()           { h.st.s.slow() }

func (h host) Find(id string) (c work.Call, t work.Task, terminal bool) {
	call := h.st.work.calls[id]
	if call == nil {
		return nil, nil, h.st.work.terminals[id] != nil
	}
	return callHandle{h.st, call}, taskOf(call), false
}

func (h host) NewCall(spec work.CallSpec, t work.Task) work.Call {
	state := callRunning
	switch {
	case spec.Scheduled:
		state = callScheduled
	case spec.Asking:
		state = callAsking
	}
	c := h.st.newCall(state, spec.Kind, spec.Title)
	c.input, c.task = spec.Input, kindTask{t}
	return callHandle{h.st, c}
}

func (h host) Run(line string, origin any) {
	q := &h.st.turns
	q.runs++
	h.st.startOrHold(&turn{in: input{cmd: shellLine, line: line}, origin: kindOrigin{origin}, run: q.runs})
}

func (h host) RunOf(origin any) work.RunID {
	if t := h.st.turns.runOf(kindOrigin{origin}.owns); t != nil {
		return t.run
	}
	return work.NoRun
}

func (h host) DropRuns(origin any) { h.st.turns.drop(kindOrigin{origin}.owns) }

func (h host) Terminal(id string) work.Terminal {
	if t := h.st.work.terminals[id]; t != nil {
		return terminalHandle{h.st, t}
	}
	return nil
}

func (h host) EndTurn(c work.Call, stopReason string) {
	st := h.st
	if fg := st.turns.fg; fg != nil && fg.call == c.(callHandle).c { // Safe: every work.Call is a callHandle.
		st.turns.release(fg)
		st.endTurn(stopReason)
	}
}

// terminalExited serves the exit of terminal t to the tasks that watch
// terminals (work.TerminalWatcher: the waits), oldest first.
func terminalExited(st *state, t *terminal) {
	for _, c := range st.work.unfinished() {
		if w, ok := taskOf(c).(work.TerminalWatcher); ok {
			w.TerminalExited(terminalHandle{st, t})
		}
	}
}

// kindTurn is the turn t of a kind's command that holds the foreground
// (work.Turn).
type kindTurn struct {
	st *state
	t  *turn
}

func (k kindTurn) Hold(c work.Call, fg work.Foreground) {
	if c != nil {
		k.t.call = c.(callHandle).c // Safe: every work.Call is a callHandle.
	}
	k.t.fore = kindForeground{fg}
	k.st.turns.take(k.t, turnRunning)
	k.st.transition(acp.StateRunning, "")
}

func (k kindTurn) Refuse(text string) {
	k.st.transition(acp.StateRunning, "")
	k.st.out.agentMessage(text)
	k.t.state = turnOver
	k.st.endTurn(acp.StopEndTurn)
}

func (k kindTurn) Holds() bool { return k.st.turns.fg == k.t }

func (k kindTurn) End(stopReason string) {
	if k.Holds() {
		k.st.turns.release(k.t)
		k.st.endTurn(stopReason)
	}
}

// supersede tells the kind's work that holds the foreground of st, if a
// kind's work does, of the held turn t, if t's command supersedes
// (work.Command.Supersede): that work may end its turn. (A function: a
// state has methods enough.)
func supersede(st *state, t *turn) {
	fg := st.turns.fg
	if fg == nil || t.in.cmd.supersede == nil {
		return
	}
	if k, ok := fg.fore.(kindForeground); ok {
		t.in.cmd.supersede(st, k.fg, t.in)
	}
}

// supersedeHeld tells the kind's work of turn t, which has just taken
// the foreground (its command's Hold is done), of each turn held behind
// it, in order, as supersede does of a prompt held later: a /down queued
// behind a queued /up ends the /up's wait as soon as it begins, rather
// than once its services' ready_timeout has run out. It stops once t no
// longer holds the foreground.
func supersedeHeld(st *state, t *turn) {
	for _, held := range slices.Clone(st.turns.held) {
		if st.turns.fg != t {
			return
		}
		supersede(st, held)
	}
}

// kindForeground is a kind's work.Foreground as a turn's foreground.
type kindForeground struct{ fg work.Foreground }

func (k kindForeground) cancelTurn(*state, *turn)   { k.fg.CancelTurn() }
func (k kindForeground) toBackground(*state, *turn) { k.fg.ToBackground() }

// terminalHandle is terminal t of the session of st as a kind of work
// reads it (work.Terminal).
type terminalHandle struct {
	st *state
	t  *terminal
}

func (h terminalHandle) ID() string              { return h.t.id }
func (h terminalHandle) Output() *outputbuf.Ring { return h.t.ring }
func (h terminalHandle) Exited() bool            { return h.t.state >= termExited }
func (h terminalHandle) Exit() *acp.ExitStatus   { return h.t.exit }

func (h terminalHandle) Launched() bool { return h.t.proc != nil }

func (h terminalHandle) Write(data []byte) (int, error) {
	n, err := h.t.proc.Write(data)
	if n > 0 {
		h.t.input.Typed()
	}
	return n, err
}

func (h terminalHandle) Resize(size acp.TerminalSize) error {
	s := ptyio.Size{Cols: uint16(size.Cols), Rows: uint16(size.Rows)}
	if err := h.t.proc.Resize(s); err != nil {
		return err
	}
	h.t.size = s
	h.st.out.sendTerminal(h.t, &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: h.t.id, Size: &size}, protocol.StreamOutput)
	return nil
}

// kindOrigin is a kind of work's origin of the turns it runs (host.Run).
type kindOrigin struct{ v any }

// owns reports whether t is a turn it brought.
func (o kindOrigin) owns(t *turn) bool { return t.origin == any(o) }

// callHandle is a tool call of the session as its kind of work sees it
// (work.Call).
type callHandle struct {
	st *state
	c  *toolCall
}

func (h callHandle) ID() string     { return h.c.id }
func (h callHandle) Title() string  { return h.c.title }
func (h callHandle) Status() string { return h.c.status() }
func (h callHandle) Final() bool    { return h.c.state >= callDone }
func (h callHandle) Send()          { h.st.out.send(h.c.update()) }
func (h callHandle) List()          { h.st.list.add(listItem{call: h.c}) }

func (h callHandle) SetContent(content ...acp.ToolCallContent) { h.c.content = content }

func (h callHandle) SetPaused(paused bool) {
	h.c.state = callRunning
	if paused {
		h.c.state = callPaused
	}
}

func (h callHandle) End(status string) {
	if !h.Final() {
		endCall(h.st, h.c, status)
	}
}

// The session is a work.RunHost too: a kind's tool call may launch runs
// of its own (a stack's services, supervisor/service), which it hears of
// through work.RunWatcher (Session.exited).

var _ service.Host = host{}

func (h host) Launch(c work.Call, spec work.LaunchSpec) (work.Run, error) {
	call := c.(callHandle).c // Safe: every work.Call is a callHandle.
	t, err := launchWith(h.st, call, spec.Line, launchOptions{dir: spec.Dir, env: spec.Env, note: spec.Note})
	if err != nil {
		return nil, ptyio.FailedStep(err) // the line is the kind's own
	}
	return runHandle{terminalHandle{h.st, t}}, nil
}

func (h host) TerminalRun(id string) work.Run {
	if t := h.st.work.terminals[id]; t != nil {
		return runHandle{terminalHandle{h.st, t}}
	}
	return nil
}

func (h host) Notice(n *acp.Notice) { h.st.out.notice(n) }

// Stack implements service.Host: the session's stack, made on first use.
func (h host) Stack() *service.Stack {
	if h.st.stack == nil {
		h.st.stack = service.NewStack(h)
	}
	return h.st.stack
}

func (h host) Tail(id string, n int) string { return h.st.work.tail(id, n) }

func (h host) Config() work.Config {
	cfg := &h.st.s.sv.cfg
	return work.Config{Shell: cfg.Shell, Env: h.st.s.sv.env, StateDir: cfg.StateDir, LogCap: cfg.logCap, Logger: cfg.Log, Probe: h.st.s.sv.probes.probe}
}

// runHandle is a terminal that a kind launched for its tool call, as the
// kind sees it (work.Run).
type runHandle struct {
	terminalHandle
}

func (r runHandle) Started() time.Time { return r.t.started }
func (r runHandle) Running() bool      { return r.t.state == termRunning }
func (r runHandle) Retired() bool      { return r.t.state == termRetired }
func (r runHandle) Stop()              { r.t.stop(r.st.settings.KillGrace) }

func (r runHandle) Pid() int {
	if r.t.proc == nil {
		return 0
	}
	return r.t.proc.Pid()
}

func (r runHandle) Members() []int {
	if r.t.proc == nil {
		return nil
	}
	return pids(r.t.proc)
}

func (r runHandle) List() {
	if r.st.list.index(listItem{call: r.t.call}) >= 0 {
		r.st.list.replaceCall(r.t.call, r.t)
	} else {
		r.st.list.add(listItem{term: r.t})
	}
}

// runExited serves the exit of terminal t to the task of its tool call
// if it launched t (work.RunWatcher), and reports whether it did: the
// terminal leaves the list first. Called by Session.exited once t's
// exitStatus is out.
func runExited(st *state, t *terminal, onItsOwn bool) bool {
	w, ok := taskOf(t.call).(work.RunWatcher)
	if !ok {
		return false
	}
	st.list.drop(listItem{term: t})
	w.RunExited(runHandle{terminalHandle{st, t}}, onItsOwn)
	return true
}
