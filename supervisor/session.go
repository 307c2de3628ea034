package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"time"

	"shellagent/acp"
	"shellagent/protocol"
)

// A Session is one conversation: its prompts, its foreground work, its
// background list, and the history of what it reported. Its methods are
// the ways in (see the package's Concurrency section); each runs under do.
type Session struct {
	sv  *Supervisor
	id  string
	cwd string

	mu sync.Mutex // guards st; taken only by do
	st state
}

// lifecycle is where a session is in its life.
type lifecycle int

const (
	// sessionOpen: it serves prompts. Out to sessionClosing
	// (session/close, Shutdown, or Detach under CloseDetached).
	sessionOpen lifecycle = iota
	// sessionClosing: its work is being stopped. Held prompts were
	// refused, and state changes are not reported: the close reports the
	// outcome in one final state_update. Out to sessionClosed once no
	// terminal runs.
	sessionClosing
	// sessionClosed: the final updates went out and the close was
	// answered. The session has no client and is no longer in the
	// Supervisor, so nothing can be sent for it any more. Final.
	sessionClosed
)

// finalState is what the last state_update of a close says.
type finalState int

const (
	finalNone      finalState = iota // an idle session with nothing listed needs none
	finalIdle                        // the list emptied: a repeated idle
	finalCancelled                   // foreground work was stopped: idle, cancelled
)

// state is everything about a session that changes. Only do hands it out.
type state struct {
	s        *Session // for the callbacks that enter later: timers, answers
	life     lifecycle
	settings settings
	title    string
	fgState  string // the foreground state last reported: running, requires_action, idle
	turns    turnQueue
	list     backgroundList
	work     registry
	out      outbox

	final     finalState // while closing
	closeDone []func()   // called once the close is complete
}

func newSession(sv *Supervisor, id, cwd string, c protocol.Client) *Session {
	s := &Session{sv: sv, id: id, cwd: cwd}
	s.st = state{
		s:        s,
		settings: settings{foregroundTimeout: sv.cfg.ForegroundTimeout, killGrace: sv.cfg.KillGrace},
		fgState:  acp.StateIdle,
		work:     newRegistry(),
		out:      outbox{session: id, client: c, updatedAt: time.Now()},
	}
	return s
}

// do is the only way into a session's state: it runs f under the session's
// mutex, then settles what the change owes before anyone else gets in.
func (s *Session) do(f func(st *state)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.st)
	s.st.settle()
}

// settle sends what a change owes: the repeated state_update for a list
// change (RFD rule 4, see background.go) while the session is open, or the
// end of a close once no terminal runs. The history forgets the work
// that the change retired.
func (st *state) settle() {
	switch st.life {
	case sessionOpen:
		st.flushList()
	case sessionClosing:
		if !st.work.live() {
			st.finishClose()
		}
	}
	if len(st.work.retired) > 0 {
		st.out.forget(st.work.retired)
		clear(st.work.retired) // what the slice held must not stay reachable
		st.work.retired = st.work.retired[:0]
	}
}

func (s *Session) info() (info acp.SessionInfo) {
	s.do(func(st *state) {
		info = acp.SessionInfo{SessionID: s.id, Cwd: s.cwd, Title: st.title, UpdatedAt: st.out.updatedAt.UTC().Format(time.RFC3339)}
	})
	return info
}

// prompt inserts a prompt now, or holds it until the foreground is free.
// A held prompt is withdrawn (-32800, never inserted) when ctx ends first.
func (s *Session) prompt(ctx context.Context, from protocol.Client, blocks []acp.ContentBlock, reply protocol.Reply) {
	line, err := promptLine(blocks)
	if err != nil {
		reply(nil, err)
		return
	}
	t := &turn{blocks: blocks, in: parseInput(line), reply: reply, from: from}
	s.do(func(st *state) {
		switch {
		case st.life != sessionOpen:
			reply(nil, acp.RequestCancelled("session is closing"))
		case t.in.immediate() && st.turns.busy():
			st.insert(t)
			st.act(t.in)
		case st.turns.busy() || st.turns.waiting():
			t.unwatch = context.AfterFunc(ctx, func() { s.withdrawHeld(t) })
			st.turns.hold(t)
		default:
			st.start(t)
		}
	})
}

// withdrawHeld answers a held prompt that the client withdrew
// ($/cancel_request) before it was inserted.
func (s *Session) withdrawHeld(t *turn) {
	s.do(func(st *state) {
		if st.turns.remove(t) {
			t.reply(nil, acp.RequestCancelled("withdrawn by $/cancel_request before it was inserted"))
		}
	})
}

// cancel serves session/cancel: held prompts are answered -32800 and the
// foreground command is stopped; background work goes on.
func (s *Session) cancel() {
	s.do(func(st *state) {
		st.dropHeld(func(*turn) bool { return true }, "cancelled by session/cancel")
		fg := st.turns.fg
		switch {
		case fg == nil:
		case fg.state == turnAsking:
			st.abandon(fg.call.appr, acp.StatusCancelled, "Cancelled by session/cancel while waiting for permission.")
			st.endTurn(acp.StopCancelled)
		default:
			fg.state = turnCancelling
			fg.term.stop(st.settings.killGrace)
		}
	})
}

// cancelTerminal serves terminal/cancel: the answer goes out first, then
// what the stop causes (the exit status).
func (s *Session) cancelTerminal(id string, reply protocol.Reply) {
	s.do(func(st *state) {
		if err := st.stopTerminal(id, func() { reply(struct{}{}, nil) }); err != nil {
			reply(nil, err)
		}
	})
}

// cancelToolCall serves tool_call/cancel: the answer goes out first, then
// the tool call's final status.
func (s *Session) cancelToolCall(id string, reply protocol.Reply) {
	s.do(func(st *state) {
		stop, err := st.acceptCancel(id)
		if err != nil {
			reply(nil, err)
			return
		}
		reply(struct{}{}, nil)
		stop()
	})
}

// setConfigOption serves session/set_config_option.
func (s *Session) setConfigOption(p *acp.SetConfigOptionRequest) (resp *acp.SetConfigOptionResponse, err error) {
	s.do(func(st *state) {
		if err = st.settings.set(p); err == nil {
			resp = &acp.SetConfigOptionResponse{ConfigOptions: st.settings.options()}
		}
	})
	return resp, err
}

// killGrace is the kill grace the session's next stop uses.
func (s *Session) killGrace() (grace time.Duration) {
	s.do(func(st *state) { grace = st.settings.killGrace })
	return grace
}

func (s *Session) configOptions() (opts []acp.ConfigOption) {
	s.do(func(st *state) { opts = st.settings.options() })
	return opts
}

// resume attaches the session to c and brings c up to date: the retained
// history if replay asks for it (history.go), then a current
// terminal_update (with a replacement of the output) and tool_call_update
// for the foreground command and each listed item that the replay did not
// already deliver at its current state, then the current state.
func (s *Session) resume(c protocol.Client, p *acp.ResumeSessionRequest) (resp *acp.ResumeSessionResponse, err error) {
	if filepath.Clean(p.Cwd) != filepath.Clean(s.cwd) {
		return nil, acp.InvalidParams("cwd: %q is not this session's working directory %q", p.Cwd, s.cwd)
	}
	replay, err := replayFrom(p.ReplayFrom)
	if err != nil {
		return nil, err
	}
	s.do(func(st *state) {
		if st.life != sessionOpen {
			err = acp.SessionNotFound(s.id)
			return
		}
		st.out.attach(c)
		delivered := map[any]bool{}
		if replay {
			delivered = st.out.replay()
		}
		if fg := st.turns.fg; fg != nil {
			st.out.sendCurrent(delivered, fg.call, fg.term)
		}
		for _, it := range st.list.items {
			if it.term != nil {
				st.out.sendCurrent(delivered, it.term.call, it.term)
			} else {
				st.out.sendCurrent(delivered, it.call, nil)
			}
		}
		st.reportState("")
		resp = &acp.ResumeSessionResponse{ConfigOptions: st.settings.options(), AvailableCommands: availableCommands()}
	})
	return resp, err
}

// replayFrom reads session/resume's replay cursor: absent or null is no
// replay, {"type":"start"} the whole retained history. Any other cursor is
// -32602: the schema forbids resuming without the replay that was asked
// for.
func replayFrom(raw json.RawMessage) (bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var cursor struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &cursor) != nil || cursor.Type != "start" {
		return false, acp.InvalidParams("replayFrom: unsupported cursor %s (only {\"type\":\"start\"})", raw)
	}
	return true, nil
}

// detach serves the end of connection c. A session that reports to c
// closes under CloseDetached, and calls done once closed; otherwise it
// goes on, without a client if it reported to c, and the prompts c left
// held are answered -32800 (no one is there to see them inserted). It
// reports whether done will be called.
func (s *Session) detach(c protocol.Client, policy DetachPolicy, done func()) (closes bool) {
	s.do(func(st *state) {
		switch {
		case st.life == sessionClosed:
			return
		case st.out.client == c && policy == CloseDetached:
			closes = true
			st.close(done)
			return
		case st.out.client == c:
			st.out.attach(nil)
		}
		st.dropHeld(func(t *turn) bool { return t.from == c }, "the connection went away before it was inserted")
	})
	return closes
}

// close stops everything of the session in parallel, reports every final
// status and the last state_update, and then calls done. A close that is
// under way or complete calls done when it is (or at once).
func (s *Session) close(done func()) {
	s.do(func(st *state) { st.close(done) })
}

func (st *state) close(done func()) {
	switch st.life {
	case sessionClosed:
		done()
		return
	case sessionClosing:
		st.closeDone = append(st.closeDone, done)
		return
	}
	st.life, st.closeDone = sessionClosing, append(st.closeDone, done)
	if len(st.list.items) > 0 {
		st.final = finalIdle
	}
	st.dropHeld(func(*turn) bool { return true }, "session closed")
	const why = "Cancelled: the session closed while it waited for permission."
	if fg := st.turns.fg; fg != nil {
		st.final = finalCancelled
		if fg.state == turnAsking {
			st.abandon(fg.call.appr, acp.StatusCancelled, why)
		} else {
			fg.state = turnCancelling
		}
	}
	for _, c := range st.work.unfinished() {
		switch c.state {
		case callScheduled:
			st.cancelJob(c.job)
		case callAsking:
			st.abandon(c.appr, acp.StatusCancelled, why)
		}
	}
	for _, t := range st.work.running() { // a stop under way keeps its grace
		t.stop(st.settings.killGrace)
	}
}

// finishClose completes a close once no terminal runs: the final
// state_update, then the session is closed for good: it drops its client
// and leaves the Supervisor before anyone hears that it closed.
func (st *state) finishClose() {
	switch st.final {
	case finalCancelled:
		st.fgState = acp.StateIdle
		st.reportState(acp.StopCancelled)
	case finalIdle:
		st.fgState = acp.StateIdle
		st.reportState("")
	}
	st.life, st.out.client = sessionClosed, nil
	st.s.sv.forget(st.s.id)
	for _, done := range st.closeDone {
		done()
	}
	st.closeDone = nil
}

// start runs a turn on an idle session: a prompt (inserted first) or the
// firing of a scheduled job (no user message). The turn reports running
// (or requires_action), its work, and idle once the work is done: at once
// for everything but a foreground command.
func (st *state) start(t *turn) {
	if t.reply != nil {
		st.insert(t)
	}
	if t.in.kind == runCommand {
		st.runForeground(t)
		return
	}
	st.transition(acp.StateRunning, "")
	st.act(t.in)
	t.state = turnOver
	st.endTurn(acp.StopEndTurn)
}

// insert adds the prompt to the conversation: user_message, then the
// response with its id.
func (st *state) insert(t *turn) {
	if st.title == "" {
		st.title = t.in.line
	}
	id := st.out.message(acp.KindUserMessage, t.blocks)
	t.reply(&acp.PromptResponse{MessageID: id}, nil)
}

// endTurn reports the end of foreground work and starts the next turn.
func (st *state) endTurn(stopReason string) {
	if st.turns.busy() {
		return
	}
	st.transition(acp.StateIdle, stopReason)
	if st.life != sessionOpen {
		return
	}
	if t := st.turns.next(); t != nil {
		st.start(t)
	}
}

// dropHeld takes the held turns that match off the queue: prompts are
// answered -32800 with why; firings are dropped.
func (st *state) dropHeld(match func(*turn) bool, why string) {
	for _, t := range st.turns.drop(match) {
		if t.reply != nil {
			t.reply(nil, acp.RequestCancelled(why))
		}
	}
}

// act carries out everything but a foreground command.
func (st *state) act(in input) {
	switch in.kind {
	case bgCommand:
		st.runBackground(in.line)
	case bgDetach:
		fg := st.turns.fg
		switch {
		case fg == nil:
			st.out.agentMessage("Nothing is running in the foreground: /bg alone moves the running command to the background. To start a command in the background, write /bg CMD.")
		case fg.state == turnAsking:
			st.out.agentMessage("The foreground command is waiting for permission; it can move to the background once it runs.")
		case fg.term.state == termStopping:
			st.out.agentMessage("The foreground command is being stopped; it stays in the foreground until it exits.")
		default:
			st.detach(fg.term, "Moved to the background by /bg.")
		}
	case listWork:
		st.out.agentMessage(st.listing())
	case stopWork:
		st.stopByID(in.id)
	case afterWork, everyWork:
		st.schedule(in)
	case badInput:
		st.out.agentMessage(in.problem)
	}
}

// stopByID serves /stop: the same acceptance and errors as the cancel
// methods, told as an agent message.
func (st *state) stopByID(id string) {
	if st.work.terminals[id] != nil || st.work.calls[id] == nil {
		if err := st.stopTerminal(id, nil); err != nil {
			st.out.agentMessage("Cannot stop " + id + ": " + errorMessage(err) + ".")
			return
		}
		st.out.agentMessage("Stopping " + id + ": SIGTERM sent; its exit status follows.")
		return
	}
	stop, err := st.acceptCancel(id)
	if err != nil {
		st.out.agentMessage("Cannot stop " + id + ": " + errorMessage(err) + ".")
		return
	}
	st.out.agentMessage("Cancelling " + id + ".")
	stop()
}

func errorMessage(err error) string {
	if pe, ok := errors.AsType[*acp.Error](err); ok {
		return pe.Message
	}
	return err.Error()
}

// stopTerminal accepts terminal/cancel of a running terminal and starts
// (or, the second time, hurries) its stop. accepted, if not nil, runs
// between the two, so that an answer goes out before what the stop causes.
func (st *state) stopTerminal(id string, accepted func()) error {
	t := st.work.terminals[id]
	switch {
	case t == nil:
		return acp.InvalidParams("terminalId: no terminal %q in this session", id)
	case t.state >= termExited:
		return acp.InvalidParams("terminalId: %s has already exited", id)
	}
	if accepted != nil {
		accepted()
	}
	t.stop(st.settings.killGrace)
	return nil
}

// acceptCancel accepts tool_call/cancel and returns what stops the tool
// call: a job, or background work waiting for permission.
func (st *state) acceptCancel(id string) (stop func(), err error) {
	c := st.work.calls[id]
	switch {
	case c == nil:
		return nil, acp.InvalidParams("toolCallId: no tool call %q in this session", id)
	case c.state == callDone:
		return nil, acp.InvalidParams("toolCallId: %s is already %s", id, c.outcome)
	case c.state == callScheduled:
		return func() { st.cancelJob(c.job) }, nil
	case c.cancellable():
		return func() {
			st.abandon(c.appr, acp.StatusCancelled, "Cancelled before it was allowed to run.")
		}, nil
	}
	return nil, acp.InvalidParams("toolCallId: %s is not cancellable (a command is stopped with terminal/cancel on its terminal)", id)
}

// transition reports a foreground state change with the current list.
// While closing, nothing is reported: the close reports the outcome once.
func (st *state) transition(fgState, stopReason string) {
	st.fgState = fgState
	if st.life == sessionOpen {
		st.reportState(stopReason)
	}
}

// reportState sends a state_update: the current foreground state, the stop
// reason given (empty for a repeated one) and the current list.
func (st *state) reportState(stopReason string) {
	st.list.dirty = false
	st.out.send(&acp.StateUpdate{
		SessionUpdate: acp.KindState, State: st.fgState, StopReason: stopReason, Background: st.list.wire(),
	})
}

// flushList sends the repeated state_update owed for a list change.
func (st *state) flushList() {
	if st.list.dirty {
		st.reportState("")
	}
}

// newCall registers a tool call and records it in the history, where it
// is announced: at once, by the caller.
func (st *state) newCall(state callState, kind, title string) *toolCall {
	c := st.work.newCall(state, kind, title)
	st.out.record(entry{call: c})
	return c
}
