package supervisor

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/ptyio"
	"shellagent/supervisor/terminput"
	"shellagent/supervisor/work"
)

// The work of a session: its terminals and tool calls (and the jobs behind
// scheduled tool calls, supervisor/jobs), each with one state field, and the
// registry that finds them by id and decides how long finished work is
// kept.

// Retention: a long-lived session (an /every job firing all day) must not
// grow without bound. Only the most recent exited terminals keep their
// output, and only the most recent finished tool calls without a terminal
// are kept; older ones are retired: forgotten entirely (their ids then
// answer -32602 as unknown, as an exited one would), their output released
// even where the history still names them.
const (
	maxExited   = 100 // exited terminals whose output is kept
	maxFinished = 100 // finished tool calls without a terminal that are kept
)

// termState is where a terminal is in its life. Where it runs (the
// foreground turn, or the background list) is owned by the turn queue and
// the list; the terminal only knows whether it runs.
type termState int

const (
	// termRunning: a process it started is alive. In from launch.
	// Out to termStopping (a cancel or close), or termExited.
	termRunning termState = iota
	// termStopping: the agent is stopping it: SIGTERM was sent, SIGKILL
	// follows after the kill grace, and a second stop skips the rest of
	// the grace. It stays where it was (foreground or listed) until it
	// exits. Out to termExited.
	termStopping
	// termExited: no process of it is left and its exitStatus has been
	// reported; its output is kept for display and replay. Out to
	// termRetired once maxExited more recent terminals have exited.
	termExited
	// termRetired: forgotten: its id is unknown, its ring and process are
	// released. Final.
	termRetired
)

// terminal is one command: its PTY process, its output ring, and the tool
// call that started it. It is owned by its session's actor.
type terminal struct {
	id      string
	line    string
	cwd     string
	size    ptyio.Size
	call    *toolCall
	started time.Time
	state   termState

	ring     *outputbuf.Ring  // its output; nil once retired
	proc     ptyio.Process    // nil once retired
	returned *ptyio.Status    // the shell's status, once it returned while others ran on
	exit     *acp.ExitStatus  // once exited
	input    *terminput.Input // its input watch and the waits noticed

	// source, if not nil, is its output as the connection reads it, in
	// place of the ring itself (output): a scenario's command hears of the
	// copies a replacement takes (stagework.go). Nil once retired.
	source protocol.OutputSource
}

// announcement is the terminal's full terminal_update while it runs: what
// a client needs to show it from scratch, but its output, which goes with
// it on the connection.
func (t *terminal) announcement() *acp.TerminalUpdate {
	return &acp.TerminalUpdate{
		SessionUpdate: acp.KindTerminal, TerminalID: t.id,
		Command: t.line, Cwd: t.cwd,
		Size:         &acp.TerminalSize{Cols: int(t.size.Cols), Rows: int(t.size.Rows)},
		Capabilities: acp.CapsCancel,
	}
}

// stop starts (or, the second time, hurries) the TERM→KILL escalation of
// the terminal's processes. It never waits.
func (t *terminal) stop(grace time.Duration) {
	t.state = termStopping
	t.proc.Stop(grace)
}

// exitedUpdate is the exited terminal as a whole: its announcement and
// exitStatus in one terminal_update, to send with its output as a
// replacement (a replay).
func (t *terminal) exitedUpdate() *acp.TerminalUpdate {
	u := t.announcement()
	u.ExitStatus, u.Capabilities = t.exit, acp.CapsNone
	return u
}

// callState is where a tool call is in its life. Its wire status follows
// from it: pending while asking or scheduled, in_progress while running,
// then its outcome.
type callState int

const (
	// callAsking: pending; its command waits for the user's permission
	// (permission mode "ask"), holding the foreground turn or listed in
	// the background. Out to callRunning once allowed; to callDone when
	// refused, unanswered, withdrawn or cancelled.
	callAsking callState = iota
	// callScheduled: pending and listed: a job that waits to fire. Out to
	// callDone when a wakeup fires or the job is cancelled.
	callScheduled
	// callRunning: in_progress; its command runs in its terminal, or its
	// wait (supervisor/wait) or watch (supervisor/watch) goes on. Out to callDone when the
	// command exits in the foreground, leaves it, or fails to start, or
	// when the wait or watch ends; a watch to callPaused by /pause.
	callRunning
	// callPaused: paused and listed: a watch suspended by /pause, which
	// watches nothing meanwhile. Out to callRunning by /resume, to
	// callDone when it is cancelled or cannot watch again.
	callPaused
	// callDone: its final status (completed, failed or cancelled) was
	// reported; its terminal, if it has one, may run on in the background.
	// Out to callRetired with its terminal, or, without one, once
	// maxFinished more recent tool calls without a terminal have finished.
	callDone
	// callRetired: forgotten: its id is unknown. Final.
	callRetired
)

// toolCall is a tool call of the session: a command's (term, once it
// runs), or one whose work is a task (a scheduled job, a wait, a watch, a
// command waiting for permission). It is owned by its session's actor.
type toolCall struct {
	id      string
	title   string
	kind    string
	state   callState
	outcome string                // the final status, once done
	input   any                   // rawInput
	output  any                   // rawOutput, once reported
	content []acp.ToolCallContent // the current content
	caps    acp.Capabilities      // as last reported: nil (never), cancel, or cleared
	term    *terminal             // its command's terminal, once it runs
	task    task                  // the work it is, if it is no command that runs
}

// A task is the work of a tool call that is not (or not yet) a running
// command: a scheduled job (package supervisor/jobs, through kindTask,
// kinds.go), a wait (supervisor/wait), a watch (supervisor/watch), a service
// (supervisor/service), or a command waiting for permission
// (supervisor/approval, permission.go).
// Each kind is a type of its own, in a file or a package of its own; the
// session lists, cancels and closes them through this interface, never
// asking which kind it has. A kind of work in a package of its own
// implements work.Task instead (kinds.go).
type task interface {
	// listing is its line in /ps.
	listing(now time.Time) string
	// cancellable reports whether tool_call/cancel (and /stop) applies,
	// while its tool call is not final.
	cancellable() bool
	// cancel ends it as an accepted tool_call/cancel does.
	cancel(st *state)
	// close ends it as the session's close does.
	close(st *state)
	// handOver returns what the next image of an upgrade in place needs
	// to go on with it (handover.Task), and the name it is written under;
	// frozen is nil if it is not handed over.
	handOver() (kind string, frozen any)
}

// status is the tool call's wire status.
func (c *toolCall) status() string {
	switch c.state {
	case callAsking, callScheduled:
		return acp.StatusPending
	case callRunning:
		return acp.StatusInProgress
	case callPaused:
		return acp.StatusPaused
	}
	return c.outcome
}

// cancellable reports whether tool_call/cancel applies: to a task that
// has not ended and says it does (a job, a wait, a watch, background work
// that waits for permission), never to a command's tool call.
func (c *toolCall) cancellable() bool {
	return c.state < callDone && c.task != nil && c.task.cancellable()
}

// update is the tool call's current state as a full tool_call_update.
func (c *toolCall) update() *acp.ToolCallUpdate {
	switch {
	case c.cancellable():
		c.caps = acp.CapsCancel
	case c.caps != nil:
		c.caps = acp.CapsNone // advertised once: clearing it must be sent
	}
	return &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: c.id, Title: c.title, Kind: c.kind,
		Status: c.status(), RawInput: c.input, RawOutput: c.output, Content: c.content, Capabilities: c.caps,
	}
}

// registry holds a session's work by id and retires finished work beyond
// the retention limits. It is part of the session's state.
type registry struct {
	seq       map[string]int // last id issued per prefix: call, term
	terminals map[string]*terminal
	calls     map[string]*toolCall
	exited    []*terminal // exited terminals that keep their output, oldest first
	finished  []*toolCall // finished tool calls without a terminal, oldest first
	retired   []entry     // work retired since the history last forgot it
}

func newRegistry() registry {
	return registry{seq: make(map[string]int), terminals: make(map[string]*terminal), calls: make(map[string]*toolCall)}
}

// newID returns the next id with prefix: ids are never reused.
func (r *registry) newID(prefix string) string {
	r.seq[prefix]++
	return prefix + "_" + strconv.Itoa(r.seq[prefix])
}

// newCall registers a new tool call in state.
func (r *registry) newCall(state callState, kind, title string) *toolCall {
	c := &toolCall{id: r.newID("call"), state: state, kind: kind, title: title}
	r.calls[c.id] = c
	return c
}

// addTerminal registers a launched terminal.
func (r *registry) addTerminal(t *terminal) { r.terminals[t.id] = t }

// liveTerminal returns the terminal id if it runs, or the -32602 error
// that says why not (work.Live, which reads only its Liveness: the
// handle needs no session, and nothing else of it is reachable there).
func (r *registry) liveTerminal(id string) (*terminal, error) {
	t := r.terminals[id]
	var h work.Liveness
	if t != nil {
		h = terminalHandle{t: t}
	}
	if err := work.Live(id, h); err != nil {
		return nil, err
	}
	return t, nil
}

// stop accepts terminal/cancel of running terminal id and starts (or, the
// second time, hurries) its stop with grace. accepted, if not nil, runs
// between the two, so that an answer goes out before what the stop causes.
func (r *registry) stop(id string, grace time.Duration, accepted func()) error {
	t, err := r.liveTerminal(id)
	if err != nil {
		return err
	}
	if accepted != nil {
		accepted()
	}
	t.stop(grace)
	return nil
}

// finish gives a tool call its final status. One without a terminal
// counts towards maxFinished; one with a terminal retires with it.
func (r *registry) finish(c *toolCall, outcome string) {
	c.state, c.outcome = callDone, outcome
	if c.term != nil {
		return
	}
	r.finished = append(r.finished, c)
	if len(r.finished) > maxFinished {
		r.retireCall(r.finished[0])
		r.finished = slices.Delete(r.finished, 0, 1)
	}
}

// exit records that a terminal exited: it keeps its output (shrunk to
// what it holds), and the oldest exited terminal beyond maxExited retires.
func (r *registry) exit(t *terminal) {
	t.state = termExited
	t.ring.Compact()
	r.exited = append(r.exited, t)
	if len(r.exited) > maxExited {
		old := r.exited[0]
		r.exited = slices.Delete(r.exited, 0, 1)
		old.state = termRetired
		old.ring, old.proc, old.source = nil, nil, nil
		delete(r.terminals, old.id)
		r.retired = append(r.retired, entry{term: old})
		if old.call.term == old { // a service's call lives on past its earlier runs (supervisor/service)
			r.retireCall(old.call)
		}
	}
}

func (r *registry) retireCall(c *toolCall) {
	c.state = callRetired
	c.content, c.input, c.output, c.task, c.term = nil, nil, nil, nil, nil
	delete(r.calls, c.id)
	r.retired = append(r.retired, entry{call: c})
}

// live reports whether any terminal runs.
func (r *registry) live() bool {
	for _, t := range r.terminals {
		if t.state < termExited {
			return true
		}
	}
	return false
}

// unfinished returns the tool calls that have not reached a final status,
// oldest first.
func (r *registry) unfinished() []*toolCall {
	return oldestFirst(r.calls, func(c *toolCall) bool { return c.state < callDone })
}

// running returns the terminals that run and are not being stopped,
// oldest first.
func (r *registry) running() []*terminal {
	return oldestFirst(r.terminals, func(t *terminal) bool { return t.state == termRunning })
}

// liveTerminals returns the terminals that run or are being stopped,
// oldest first.
func (r *registry) liveTerminals() []*terminal {
	return oldestFirst(r.terminals, func(t *terminal) bool { return t.state < termExited })
}

// oldestFirst returns the work of m (by id) that keep accepts, in the
// order its ids were issued.
func oldestFirst[T any](m map[string]T, keep func(T) bool) []T {
	var ids []string
	for id, v := range m {
		if keep(v) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(idNumber(a), idNumber(b)) })
	out := make([]T, len(ids))
	for i, id := range ids {
		out[i] = m[id]
	}
	return out
}

// idNumber is the sequence number of an id such as term_12.
func idNumber(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '_')+1:]) // Safe: every id comes from newID.
	return n
}
