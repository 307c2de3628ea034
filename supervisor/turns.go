package supervisor

import (
	"errors"
	"slices"
	"strings"

	"shellagent/acp"
	"shellagent/protocol"
	"shellagent/supervisor/work"
)

// turnState is where a turn is in its life.
type turnState int

const (
	// turnHeld: waiting in the queue while another turn holds the
	// foreground; a prompt is not inserted yet. Out when it starts (to
	// turnAsking or turnRunning for a command, to turnOver for anything
	// else), or to turnOver when it is dropped (session/cancel, close,
	// $/cancel_request, its job cancelled).
	turnHeld turnState = iota
	// turnAsking: it holds the foreground; its command waits for
	// permission (the session is requires_action). Out to turnRunning once
	// allowed, to turnOver when refused, withdrawn or cancelled.
	turnAsking
	// turnRunning: it holds the foreground; its command runs. Out to
	// turnCancelling (session/cancel or close), or to turnOver when the
	// command exits or leaves the foreground.
	turnRunning
	// turnCancelling: session/cancel or close is stopping its command; its
	// tool call will end cancelled and the turn with stop reason
	// cancelled. Out to turnOver when the command exits.
	turnCancelling
	// turnScenario: it holds the foreground for a playing scenario
	// (kit.go: a kit.Foreground), which runs its own commands. Out to turnOver when the
	// scenario ends its foreground work, or (close) to turnCancelling.
	turnScenario
	// turnOver: done, or never run. Final.
	turnOver
)

// A turn is one piece of foreground work: a prompt, or the firing of a
// scheduled job (agent-initiated: no prompt, no user message).
type turn struct {
	blocks  []acp.ContentBlock
	in      input
	reply   protocol.Reply  // answers the prompt once inserted; nil for a firing
	from    protocol.Client // the connection the prompt came from
	origin  any             // the work that brought it with no prompt: a kind's (kindOrigin), a scenario's (kitOrigin); nil for a prompt
	unwatch func() bool     // stops watching for the client withdrawing the held prompt
	state   turnState
	run     work.RunID // names it while it holds or waits for the foreground, if a kind of work ran it (kinds.go)

	// Once it holds the foreground:
	fore  foreground // what it runs: a command, a wait, a scenario's work
	call  *toolCall  // the command's, or the wait's
	term  *terminal  // once the command runs
	timer work.Timer // the foreground timeout
}

// A dropper is an origin that hears of a turn it brought being dropped
// while held (a scenario, whose foreground work then will not come).
type dropper interface{ dropped(t *turn) }

// foreground is what a turn runs while it holds the foreground: a command
// (commandRun, terminal.go), a wait (supervisor/wait, through kindForeground), or a scenario's work
// (kit.go). Each kind says what session/cancel and /bg alone do to it.
type foreground interface {
	// cancelTurn serves session/cancel of fg, the turn that runs it.
	cancelTurn(st *state, fg *turn)
	// toBackground serves /bg alone: it moves to the background, or says
	// why not.
	toBackground(st *state, fg *turn)
}

// turnQueue is the session's foreground: the turn that holds it, and the
// turns waiting for it, in order. A turn holds the foreground from the
// moment its command is announced until the command exits or leaves the
// foreground; immediate work (/bg, /ps, /stop, scheduling) never holds it.
type turnQueue struct {
	fg   *turn
	held []*turn
	runs work.RunID // the last turn.run issued
}

// busy reports whether a turn holds the foreground.
func (q *turnQueue) busy() bool { return q.fg != nil }

// waiting reports whether turns wait for the foreground.
func (q *turnQueue) waiting() bool { return len(q.held) > 0 }

// take gives t the foreground.
func (q *turnQueue) take(t *turn, state turnState) {
	q.fg, t.state = t, state
}

// release ends t's hold on the foreground, if it has it.
func (q *turnQueue) release(t *turn) {
	if q.fg != t {
		return
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	q.fg, t.state = nil, turnOver
}

// foreground reports whether t is the foreground command.
func (q *turnQueue) foreground(t *terminal) bool {
	return t != nil && q.fg != nil && q.fg.term == t
}

// hold queues t behind the foreground.
func (q *turnQueue) hold(t *turn) {
	t.state = turnHeld
	q.held = append(q.held, t)
}

// next takes the first waiting turn off the queue, if the foreground is
// free.
func (q *turnQueue) next() *turn {
	if q.fg != nil || len(q.held) == 0 {
		return nil
	}
	t := q.held[0]
	q.held = slices.Delete(q.held, 0, 1)
	t.stopWatching()
	return t
}

// remove takes a held turn off the queue and reports whether it was there.
func (q *turnQueue) remove(t *turn) bool {
	i := slices.Index(q.held, t)
	if i < 0 {
		return false
	}
	q.held = slices.Delete(q.held, i, i+1)
	t.state = turnOver
	return true
}

// drop takes every held turn that matches off the queue, and returns them.
func (q *turnQueue) drop(match func(*turn) bool) []*turn {
	var out []*turn
	q.held = slices.DeleteFunc(q.held, func(t *turn) bool {
		if !match(t) {
			return false
		}
		t.stopWatching()
		t.state = turnOver
		out = append(out, t)
		return true
	})
	return out
}

// runOf returns the turn that holds or waits for the foreground and
// matches (the run of a job or a watch), or nil.
func (q *turnQueue) runOf(match func(*turn) bool) *turn {
	if q.fg != nil && match(q.fg) {
		return q.fg
	}
	for _, t := range q.held {
		if match(t) {
			return t
		}
	}
	return nil
}

func (t *turn) stopWatching() {
	if t.unwatch != nil {
		t.unwatch()
	}
}

// The turn engine. A turn starts when the foreground is free (start): a
// prompt is inserted first; a command (runForeground) holds the foreground
// while it asks for permission and while it runs, and everything else
// (act) is done at once. The turn ends (endTurn) when its command exits,
// leaves the foreground (detach), is refused or cancelled, or could not
// start; the next held turn then starts.

// start runs a turn on an idle session: a prompt (inserted first) or the
// firing of a scheduled job (no user message). The turn reports running
// (or requires_action), its work, and idle once the work is done: at once
// for everything but a foreground command. It begins once what dead agents
// left has been swept (awaitSweep).
func (st *state) start(t *turn) {
	awaitSweep(st)
	if t.reply != nil {
		if err := listFull(st, t.in); err != nil {
			t.reply(nil, err) // not inserted: the next turn's
			if next := st.turns.next(); next != nil {
				st.start(next)
			}
			return
		}
		st.insert(t)
	}
	if c := t.in.cmd; c.act == nil {
		c.hold(st, t)
		return
	}
	st.transition(acp.StateRunning, "")
	t.in.cmd.act(st, t.in)
	t.state = turnOver
	st.endTurn(acp.StopEndTurn)
}

// awaitSweep waits until what dead agents left has been swept
// (Config.Swept), as slow work: a moment at an agent's start, and only
// there, since the channel stays closed.
func awaitSweep(st *state) {
	swept := st.s.sv.cfg.Swept
	if swept == nil {
		return
	}
	select {
	case <-swept:
	default:
		st.s.slow()
		<-swept
	}
}

// startOrHold starts t, new foreground work that no prompt brought (a
// firing, a watch's run, a scenario's turn), on an idle session, or holds
// it behind the turns that hold or wait for the foreground.
func (st *state) startOrHold(t *turn) {
	if st.turns.busy() || st.turns.waiting() {
		st.turns.hold(t)
		return
	}
	st.start(t)
}

// insert adds the prompt to the conversation: user_message, then the
// response with its id.
func (st *state) insert(t *turn) {
	if st.title == "" {
		st.title = sessionTitle(t.in.line)
		st.out.disk.Meta(st.s.cwd, st.title)
	}
	id := st.out.message(acp.KindUserMessage, t.blocks)
	t.reply(&acp.PromptResponse{MessageID: id}, nil)
}

// titleLen is the most runes of its first prompt a session's title takes.
const titleLen = 100

// sessionTitle is the title a session takes from its first prompt, line:
// its first line, " …" marking the lines after it, cut to titleLen runes
// ("…" marking the cut). A prompt may be a file's worth (a heredoc that
// writes one), and session/list sends every session's title.
func sessionTitle(line string) string {
	first, rest, _ := strings.Cut(strings.TrimSpace(line), "\n")
	title := strings.TrimSpace(first)
	if strings.TrimSpace(rest) != "" {
		title += " …"
	}
	return work.Shorten(title, titleLen)
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
func (q *turnQueue) dropHeld(match func(*turn) bool, why string) {
	for _, t := range q.drop(match) {
		if t.reply != nil {
			t.reply(nil, acp.RequestCancelled(why))
		}
		if d, ok := t.origin.(dropper); ok {
			d.dropped(t)
		}
	}
}

// runForeground runs the turn's command as foreground work: at once, or
// after the user allows it in permission mode "ask". It is a shell line's
// hold (commands.go).
func runForeground(st *state, t *turn) {
	if st.settings.Ask {
		st.ask(t.in.line, t)
		return
	}
	t.fore = commandRun{}
	t.call = st.newCall(callRunning, "execute", t.in.line)
	st.turns.take(t, turnRunning)
	st.transition(acp.StateRunning, "")
	st.startForeground(t)
}

// startForeground launches the command of the turn that holds the
// foreground and arms its foreground timeout. If it cannot start, the turn
// ends.
func (st *state) startForeground(t *turn) {
	term := st.launch(t.call, t.in.line, launchOptions{})
	if term == nil {
		st.turns.release(t)
		st.endTurn(acp.StopEndTurn)
		return
	}
	t.term = term
	if d := st.settings.ForegroundTimeout; d > 0 {
		t.timer = st.s.sv.cfg.clock.AfterFunc(d, func() { st.s.timeout(t, d) })
	}
}

// detach hands the foreground command, which runs, over to the
// background: its tool call completes, its terminal is listed (handOff),
// and its turn ends.
func (st *state) detach(why string) {
	fg := st.turns.fg
	st.turns.release(fg)
	st.handOff(fg.term, why)
	st.endTurn(acp.StopEndTurn)
}

// actStop serves /stop ID: the same acceptance and errors as the cancel
// methods, told as an agent message.
func actStop(st *state, in input) {
	id := in.args.(string) // Safe: work.ParseWord's.
	var stop func()
	var err error
	if st.work.calls[id] != nil {
		stop, err = st.acceptCancel(id)
	} else if taken, oerr := st.kit.takes(false, id, false); taken {
		stop, err = func() {}, oerr
	} else {
		if err := stopTerminal(st, id, nil); err != nil {
			st.out.agentMessage("Cannot stop " + id + ": " + errorMessage(err) + ".")
			return
		}
		st.out.agentMessage("Stopping " + id + ": SIGTERM sent; its exit status follows.")
		return
	}
	if err != nil {
		msg := "Cannot stop " + id + ": " + errorMessage(err) + "."
		if c := st.work.calls[id]; c != nil && c.term != nil && c.term.state < termExited {
			msg += " Its command runs in " + c.term.id + ": /stop " + c.term.id + " stops it."
		}
		st.out.agentMessage(msg)
		return
	}
	st.out.agentMessage("Cancelling " + id + ".")
	stop()
}

// stopTerminal accepts terminal/cancel (or /stop) of terminal id and
// stops it, as registry.stop does, unless the overlay takes that cancel
// (kit.go): then it answers it.
func stopTerminal(st *state, id string, accepted func()) error {
	t := st.work.terminals[id]
	if taken, err := st.kit.takes(true, id, t != nil && t.state < termExited); taken {
		if err == nil && accepted != nil {
			accepted()
		}
		return err
	}
	return st.work.stop(id, st.settings.KillGrace, accepted)
}

func errorMessage(err error) string {
	if pe, ok := errors.AsType[*acp.Error](err); ok {
		return pe.Message
	}
	return err.Error()
}

// errCallOver is the -32602 error of a cancel of tool call id, which
// ended with outcome.
func errCallOver(id, outcome string) error {
	return acp.InvalidParams("toolCallId: %s is already %s", id, outcome)
}

// acceptCancel accepts tool_call/cancel and returns what stops the tool
// call: its task's cancel (a job, a wait, a watch, background work
// waiting for permission). One the session does not know may be the
// overlay's (kit.go).
func (st *state) acceptCancel(id string) (stop func(), err error) {
	c := st.work.calls[id]
	if c == nil {
		if taken, err := st.kit.takes(false, id, false); taken {
			return func() {}, err
		}
	}
	switch {
	case c == nil:
		return nil, acp.InvalidParams("toolCallId: no tool call %q in this session", id)
	case c.state == callDone:
		return nil, errCallOver(id, c.outcome)
	case c.cancellable():
		return func() { c.task.cancel(st) }, nil
	}
	return nil, acp.InvalidParams("toolCallId: %s is not cancellable (a command is stopped with terminal/cancel on its terminal)", id)
}
