package supervisor

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/internal/actor"
	"shellagent/internal/clientcheck"
	"shellagent/protocol"
	"shellagent/ptyio"
	"shellagent/supervisor/kit"
	"shellagent/supervisor/record"
	"shellagent/supervisor/service"
	"shellagent/supervisor/settings"
	"shellagent/supervisor/terminput"
	"shellagent/supervisor/work"
)

// A Session is one conversation: its prompts, its foreground work, its
// background list, and the history of what it reported. Its methods are
// the ways in (see the package's Concurrency section); each runs on its
// actor (actor.go), which owns st.
type Session struct {
	sv    *Supervisor
	id    string
	cwd   string
	disk  *record.Recorder // its history on disk
	st    state
	actor *actor.Actor[*state, *snapshot] // the goroutine that owns st (actor.go)
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
	settings settings.Settings
	title    string
	fgState  string // the foreground state last reported: running, requires_action, idle
	turns    turnQueue
	list     backgroundList
	work     registry
	out      outbox
	kit      overlaySlot // the overlay of the scenario playing, if one is (kit.go)
	failure  *acp.Error  // the error of the next state_update, if its stop reason is error

	final     finalState // while closing
	closeDone []func()   // called once the close is complete

	stack  *service.Stack  // the services of its stack, once /up ran (host.Stack, kinds.go)
	expiry *detachedExpiry // armed while detached with no live work (Config.DetachedTTL)
}

func newSession(sv *Supervisor, id, cwd string, c protocol.Client) *Session {
	s := &Session{sv: sv, id: id, cwd: cwd, disk: record.New(sv.cfg.History, id)}
	s.st = state{
		s:        s,
		settings: settings.Settings{ForegroundTimeout: sv.cfg.ForegroundTimeout, KillGrace: sv.cfg.KillGrace, ClientChecks: sv.cfg.ClientChecks},
		fgState:  acp.StateIdle,
		work:     newRegistry(),
		out:      outbox{session: id, client: c, updatedAt: time.Now(), since: time.Now(), disk: s.disk},
	}
	s.actor = newActor(&s.st)
	return s
}

// settle sends what a change owes: the repeated state_update for a list
// change (RFD rule 4, see background.go) while the session is open, or the
// end of a close once no terminal runs. The history forgets the work
// that the change retired.
func (st *state) settle() {
	switch st.life {
	case sessionOpen:
		if st.list.dirty { // the repeated state_update owed for a list change
			st.reportState("")
		}
	case sessionClosing:
		if !st.work.live() {
			st.finishClose()
		}
	}
	st.watchExpiry()
	if len(st.work.retired) > 0 {
		st.out.forget(st.work.retired)
		clear(st.work.retired) // what the slice held must not stay reachable
		st.work.retired = st.work.retired[:0]
	}
}

// prompt inserts a prompt now, or holds it until the foreground is free.
// A held prompt is withdrawn (-32800, never inserted) when ctx ends first.
//
// A prompt that acts at once beside the foreground turn (/bg, /ps, /stop
// while a command runs) has no turn whose end could tell that it is done:
// once everything it does is reported, after its own slow work (/ps's
// scan, /bg CMD's launch), the client it came from is told (protocol.PromptActed; the v1 front answers it then).
func (s *Session) prompt(ctx context.Context, from protocol.Client, blocks []acp.ContentBlock, reply protocol.Reply) {
	line, err := promptLine(blocks)
	if err != nil {
		reply(nil, err)
		if kind := clientcheck.UnsupportedBlock(blocks); kind != "" {
			s.do(func(st *state) {
				checkClient(st, from, clientcheck.UnsupportedContent, "a session/prompt with a "+kind+" block")
			})
		}
		return
	}
	t := &turn{blocks: blocks, in: parseInput(line), reply: reply, from: from}
	s.do(func(st *state) {
		switch {
		case st.out.lost(from):
			reply(nil, errTaken(s.id))
		case st.life != sessionOpen:
			reply(nil, acp.RequestCancelled("session is closing"))
		case t.in.immediate() && st.turns.busy():
			if err := listFull(st, t.in); err != nil {
				reply(nil, err)
				return
			}
			st.insert(t)
			t.in.cmd.act(st, t.in)
			// What it does is reported, slow work included (a /ps scan, a
			// /bg launch): no turn end will say so.
			if a, ok := from.(protocol.PromptActed); ok {
				a.Acted(st.out.session)
			}
		case st.turns.busy() || st.turns.waiting():
			t.unwatch = context.AfterFunc(ctx, func() { s.withdrawHeld(t) })
			st.turns.hold(t)
			supersede(st, t)
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

// cancel serves session/cancel from c: held prompts are answered -32800
// and the foreground command is stopped; background work goes on. A
// connection the session was taken from cancels nothing.
func (s *Session) cancel(c protocol.Client) {
	s.do(func(st *state) {
		if st.out.lost(c) {
			return
		}
		st.turns.dropHeld(func(*turn) bool { return true }, "cancelled by session/cancel")
		if protocol.Version(c) == acp.ProtocolVersion {
			// Requests for listed work stay open in v2; a v1 client
			// answers every pending request cancelled (schema.v1's
			// RequestPermissionOutcome).
			st.out.asks.SessionCancelled(st.kit.listed(&st.list))
		}
		if fg := st.turns.fg; fg != nil {
			fg.fore.cancelTurn(st, fg)
		}
	})
}

// cancelTerminal serves terminal/cancel: the answer goes out first, then
// what the stop causes (the exit status).
// A client c that sends it for a terminal that does not advertise cancel
// is told so, with client_checks.
func (s *Session) cancelTerminal(c protocol.Client, id string, reply protocol.Reply) {
	s.do(func(st *state) {
		if st.out.lost(c) {
			reply(nil, errTaken(s.id))
			return
		}
		defer checkCancel(st, c, true, id)
		if err := stopTerminal(st, id, func() { reply(struct{}{}, nil) }); err != nil {
			reply(nil, err)
		}
	})
}

// cancelToolCall serves tool_call/cancel: the answer goes out first, then
// the tool call's final status. A client c that sends it for a tool call
// that does not advertise cancel is told so, with client_checks.
func (s *Session) cancelToolCall(c protocol.Client, id string, reply protocol.Reply) {
	s.do(func(st *state) {
		if st.out.lost(c) {
			reply(nil, errTaken(s.id))
			return
		}
		defer checkCancel(st, c, false, id)
		stop, err := st.acceptCancel(id)
		if err != nil {
			reply(nil, err)
			return
		}
		reply(struct{}{}, nil)
		stop()
	})
}

// setConfigOption serves session/set_config_option from c.
func (s *Session) setConfigOption(c protocol.Client, p *acp.SetConfigOptionRequest) (resp *acp.SetConfigOptionResponse, err error) {
	s.doWait(func(st *state) {
		if st.out.lost(c) {
			err = errTaken(s.id)
			return
		}
		if err = st.settings.Set(p); err == nil {
			resp = &acp.SetConfigOptionResponse{ConfigOptions: st.settings.Options()}
			for _, o := range resp.ConfigOptions {
				if o.ConfigID == p.ConfigID {
					s.disk.Config(o.ConfigID, o.CurrentValue)
				}
			}
		}
	})
	return resp, err
}

// resume attaches the session to c and brings c up to date: the retained
// history if replay asks for it (history.go), then a current
// terminal_update (with a replacement of the output) and tool_call_update
// for the foreground command and each listed item that the replay did not
// already deliver at its current state, then notice if not nil (why a
// past session runs nothing), then the current state: all before the
// response.
func (s *Session) resume(c protocol.Client, p *acp.ResumeSessionRequest, notice *acp.Notice) (resp *acp.ResumeSessionResponse, err error) {
	if filepath.Clean(p.Cwd) != filepath.Clean(s.cwd) {
		s.do(func(st *state) {
			checkClient(st, c, clientcheck.ResumeCwd, "session/resume of "+s.id+" with cwd "+p.Cwd+", not "+s.cwd)
		})
		return nil, acp.InvalidParams("cwd: %q is not this session's working directory %q", p.Cwd, s.cwd)
	}
	replay, err := replayFrom(p.ReplayFrom)
	if err != nil {
		return nil, err
	}
	var closing time.Duration // the kill grace of a close under way
	s.doWait(func(st *state) {
		if st.life != sessionOpen {
			err = acp.SessionNotFound(s.id)
			if st.life == sessionClosing {
				closing = max(st.settings.KillGrace, time.Millisecond)
			}
			return
		}
		from := st.out.attach(c)
		taken := from != nil
		if taken {
			// Taken from another connection: the prompts it left held
			// are never inserted into what c now follows.
			st.turns.dropHeld(func(t *turn) bool { return t.from == from }, "another client took the session (session/resume) before it was inserted")
		}
		delivered := map[any]bool{}
		if replay {
			delivered = st.out.replay()
		}
		if fg := st.turns.fg; fg != nil && fg.call != nil {
			st.out.sendCurrent(delivered, fg.call, fg.term)
		}
		for _, it := range st.list.items {
			if it.term != nil {
				st.out.sendCurrent(delivered, it.term.call, it.term)
			} else {
				st.out.sendCurrent(delivered, it.call, nil)
			}
		}
		if st.kit.overlay != nil {
			st.kit.overlay.Resumed(kit.NewScene(scene{st: st, delivered: delivered}))
		}
		if notice != nil {
			st.out.notice(notice)
		}
		st.reportState("")
		if taken {
			askers(st, work.Asker.Reask)
		}
		resp = &acp.ResumeSessionResponse{ConfigOptions: st.settings.Options(), AvailableCommands: availableCommands()}
	})
	if closing > 0 {
		err = closingError(s.id, closing, s.sv.histories.Has(s.id))
	}
	return resp, err
}

// closingError is the answer to session/resume of session id while a
// session/close (another connection's, or the daemon's --detached-ttl)
// stops its work, within its kill grace: -32002, as the session cannot be
// resumed live, but saying so, and, where its history keeps it (past
// tells), that it can be resumed once closed, as a past session: its
// data says retryAfterMs, the kill grace. Answering later would hold the
// connection's read loop for the kill grace.
func closingError(id string, grace time.Duration, past bool) *acp.Error {
	e := acp.SessionNotFound(id)
	data := map[string]any{"sessionId": id, "closing": true}
	if past {
		e.Message = fmt.Sprintf("session %s is closing (a session/close is stopping its work, within its kill grace of %v): resume it again once it has closed, as a past session", id, grace)
		data["retryAfterMs"] = grace.Milliseconds()
	} else {
		e.Message = fmt.Sprintf("session %s is closing (a session/close is stopping its work, within its kill grace of %v), and no history keeps it: it cannot be resumed", id, grace)
	}
	e.Data = data
	return e
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
	s.doWait(func(st *state) {
		st.out.gone(c)
		switch {
		case st.life == sessionClosed:
			return
		case st.out.client == c && policy == CloseDetached:
			closes = true
			st.close(done)
			return
		case st.out.client == c:
			st.out.attach(nil)
			if fg := st.turns.fg; fg != nil && fg.from == c {
				// Inserted and answered already: nothing of c is needed.
				fg.from, fg.reply = nil, nil
			}
		}
		st.turns.dropHeld(func(t *turn) bool { return t.from == c }, "the connection went away before it was inserted")
	})
	return closes
}

// close stops everything of the session in parallel, reports every final
// status and the last state_update, and then calls done. A close that is
// under way or complete calls done when it is (or at once).
func (s *Session) close(done func()) {
	s.do(func(st *state) { st.close(done) })
}

// closeFrom serves session/close (or, with deleting, session/delete)
// from c, as close does; but a connection the session was taken from
// closes nothing: the session is not active on it, and closing such a
// session succeeds (the schema's CloseSessionRequest), deleting it is
// refused (taken, errTaken). A client attached on another connection is
// told first who closes its session (terminput.ClosedNotice), then gets
// its work's final statuses as a close sends them.
func (s *Session) closeFrom(c protocol.Client, deleting bool, done func(), taken func()) {
	s.do(func(st *state) {
		if st.out.lost(c) {
			if deleting {
				taken()
			} else {
				done()
			}
			return
		}
		if o := st.out.client; o != nil && o != c && st.life == sessionOpen {
			o.Update(s.id, terminput.ClosedNotice(s.id, deleting))
		}
		st.close(done)
	})
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
	if len(st.kit.listed(&st.list)) > 0 {
		st.final = finalIdle
	}
	if st.kit.overlay != nil {
		st.kit.overlay.Closing()
	}
	st.turns.dropHeld(func(*turn) bool { return true }, "session closed")
	if fg := st.turns.fg; fg != nil {
		st.final = finalCancelled
		if fg.state == turnAsking {
			fg.call.task.close(st) // its request for permission
			st.turns.release(fg)
		} else {
			fg.state = turnCancelling
		}
	}
	for _, c := range st.work.unfinished() {
		if c.task != nil { // not a command that runs: its terminal is stopped below
			c.task.close(st)
		}
	}
	for _, t := range st.work.running() { // a stop under way keeps its grace
		t.stop(st.settings.KillGrace)
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
	st.out.disk.Closed()
	st.s.sv.live.forget(st.s.id)
	for _, done := range st.closeDone {
		done()
	}
	st.closeDone = nil
}

// timeout serves the foreground timeout of turn t.
func (s *Session) timeout(t *turn, d time.Duration) {
	s.do(func(st *state) {
		if st.turns.fg == t && t.term.state == termRunning {
			st.detach(fmt.Sprintf("Still running after the %s foreground timeout: moved to the background.", d))
		}
	})
}

// events forwards a process's lifecycle into its session.
type events struct {
	s *Session
	t *terminal
}

func (e events) ShellReturned(st ptyio.Status) { e.s.shellReturned(e.t, st) }
func (e events) Exited(x ptyio.Exit)           { e.s.exited(e.t, x) }

// shellReturned: the shell exited but other processes of its session run
// on ("npm run dev &"). A foreground command detaches.
func (s *Session) shellReturned(t *terminal, status ptyio.Status) {
	s.do(func(st *state) {
		t.returned = &status
		if st.turns.foreground(t) && t.state == termRunning {
			st.detach("The shell returned; processes it started keep running in the background.")
		}
	})
}

// exited: no process of the terminal is left. Its exitStatus goes out
// first, then the tool call's outcome and the end of the turn
// (foreground), or the removal from the list (background).
func (s *Session) exited(t *terminal, x ptyio.Exit) {
	s.do(func(st *state) {
		if x.Err != nil {
			s.sv.cfg.Log.Warn("terminal ended with errors", "session", s.id, "terminal", t.id, "err", x.Err)
		}
		if len(x.Left) > 0 {
			s.sv.cfg.Log.Warn("terminal reported ended though processes a SIGKILL has not ended are still there; they are released when they go",
				"session", s.id, "terminal", t.id, "left", leftText(x.Left))
		}
		t.unwatchInput()
		st.out.sendTerminal(t, t.exitUpdate(x), protocol.StreamOutput)
		onItsOwn := t.state == termRunning // nobody stopped it
		st.work.exit(t)
		defer terminalExited(st, t) // once the list and the turn say it exited
		if runExited(st, t, onItsOwn) {
			return // a run of a kind's tool call (a service: supervisor/service)
		}
		fg := st.turns.fg
		if !st.turns.foreground(t) {
			if t.call.state == callRunning {
				// A tool call that stays in_progress while its command runs
				// without holding a turn (a scenario's command) ends with it:
				// after the exitStatus, before the terminal leaves the list.
				commandOutcome(st, t, st.life == sessionClosing)
			}
			listed := st.list.index(listItem{term: t}) >= 0 // background work, not a scenario's foreground command
			st.list.drop(listItem{term: t})
			if onItsOwn && listed {
				st.out.noticeExit(t, st.notifyIn())
			}
			return
		}
		cancelled := fg.state == turnCancelling
		st.turns.release(fg)
		commandOutcome(st, t, cancelled)
		stop := acp.StopEndTurn
		if cancelled {
			stop = acp.StopCancelled
		}
		st.endTurn(stop)
	})
}

// commandOutcome gives the tool call of exited terminal t its final
// status (cancelled: it was stopped by a cancel or a close) and sends it,
// with the exit status as its rawOutput.
func commandOutcome(st *state, t *terminal, cancelled bool) {
	st.work.finish(t.call, callOutcome(cancelled, t.exit))
	t.call.output = exitStatusRaw(t.exit)
	st.out.send(&acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: t.call.id,
		Status: t.call.status(), RawOutput: t.call.output,
	})
}

// leftText names the processes left by a terminal reported ended without
// them: pid, state as /proc shows it, and command.
func leftText(left []ptyio.Leftover) string {
	var b strings.Builder
	for i, l := range left {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d (state %s) %s", l.Pid, cmp.Or(l.State, "unknown"), l.Command)
	}
	return b.String()
}
