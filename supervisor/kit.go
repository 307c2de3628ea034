package supervisor

import (
	"cmp"
	"context"
	"slices"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/supervisor/jobs"
	"shellagent/supervisor/watch"
)

// The client developers' kit (package scenario) plays outside the core.
// The session knows of it only through Config.Kit (the /scenario
// command), through the Overlay a playing scenario lays over it, which it
// consults where it reports its list and where it dispatches a cancel, and
// through the Foreground that holds a turn for it. The scenario drives the
// session through Session.Do, with the ways in that real events use
// (Scene): its commands, wakeups and watches are the session's own work.

// Kit serves /scenario (Config.Kit).
type Kit interface {
	// Listing is what /scenario alone says; v1 says the client speaks
	// ACP v1.
	Listing(v1 bool) string
	// Play reads /scenario's arguments (a name, and a hold) and plays
	// that scenario in the session of sc: it takes the turn of /scenario
	// (Scene.Hold), or ends it saying why not (Scene.Refuse). On the
	// actor.
	Play(sc *Scene, args string)
}

// An Overlay is what a playing scenario lays over its session
// (Scene.Lay): items it lists beside the session's own work, and cancels
// it takes. Its methods run on the session's actor.
type Overlay interface {
	// Listed returns what it lists after the session's own work.
	Listed() []acp.BackgroundItem
	// Cancel is asked first of each cancel of id: terminal/cancel (or
	// /stop) of a terminal if terminal, tool_call/cancel (or /stop) of a
	// tool call the session does not know otherwise. running says
	// whether id is a terminal of the session that has not exited. If it
	// takes the cancel, the session answers with err (nil: accepted) and
	// does nothing more.
	Cancel(terminal bool, id string, running bool) (taken bool, err error)
	// Resumed brings a client that resumes up to date on what the overlay
	// runs and made up (Scene.Current, Scene.Send).
	Resumed(sc *Scene)
	// Closing says the session closes: the overlay lets go of it.
	Closing()
}

// A Foreground is the kit's work in a turn that holds the foreground
// (Scene.Hold, Scene.Begin). Its methods run on the session's actor.
type Foreground interface {
	// Began says the turn that Scene.Begin asked for holds the
	// foreground.
	Began(sc *Scene)
	// CancelTurn serves session/cancel of the turn it holds.
	CancelTurn(sc *Scene)
	// Dropped says the turn that Scene.Begin asked for was dropped while
	// held: it will not come.
	Dropped()
}

// kit is the session's slot for an overlay: empty (nil) unless a
// scenario plays.
type kit struct{ overlay Overlay }

// items returns the items the overlay lists after the session's own
// work, if there is an overlay.
func (k kit) items() []acp.BackgroundItem {
	if k.overlay == nil {
		return nil
	}
	return k.overlay.Listed()
}

// takes asks the overlay, if there is one, whether it takes a cancel of
// id (Overlay.Cancel).
func (k kit) takes(terminal bool, id string, running bool) (taken bool, err error) {
	if k.overlay == nil {
		return false, nil
	}
	return k.overlay.Cancel(terminal, id, running)
}

// listed is the list as a state_update carries it: the session's work
// (l), then what the overlay lists.
func (k kit) listed(l *backgroundList) acp.Background {
	return append(l.wire(), k.items()...)
}

// kitOrigin is the source of the turns a Foreground begins.
type kitOrigin struct{ fg Foreground }

func (o kitOrigin) owns(t *turn) bool { return t.origin == o }

// dropped implements dropper.
func (o kitOrigin) dropped(*turn) { o.fg.Dropped() }

// kitTurn is a Foreground as the foreground work of its turn.
type kitTurn struct{ fg Foreground }

// toBackground implements foreground: a scenario's turn stays.
func (kitTurn) toBackground(st *state, _ *turn) {
	st.out.agentMessage("A scenario holds the foreground; it ends by itself, or with session/cancel.")
}

// cancelTurn implements foreground.
func (k kitTurn) cancelTurn(st *state, _ *turn) { k.fg.CancelTurn(&Scene{st: st}) }

// playScenario is /scenario NAME's work: the kit plays it.
func playScenario(st *state, t *turn) {
	sc := &Scene{st: st, t: t}
	if k := st.s.sv.cfg.Kit; k != nil {
		k.Play(sc, t.in.id)
		return
	}
	sc.Refuse(noKit, false)
}

// beginKitWork gives the turn a Foreground began (kitWork) the
// foreground.
func beginKitWork(st *state, t *turn) {
	fg := t.origin.(kitOrigin).fg
	t.fore = kitTurn{fg}
	st.turns.take(t, turnScenario)
	fg.Began(&Scene{st: st})
}

// Session.Do and Idle are the kit's ways into a session.

// Do runs f on the session's actor, in turn with its other ways in, and
// returns once f has run and settled. Never call it from the actor.
func (s *Session) Do(f func(sc *Scene)) { s.doWait(func(st *state) { f(&Scene{st: st}) }) }

// Idle reports whether no foreground work runs or waits in the session,
// without waiting for slow work.
func (s *Session) Idle() bool { return s.peek().idle }

// A Scene is a session's state as the kit sees it, for the length of one
// entry on its actor (Session.Do, or a call of an Overlay, Foreground or
// Kit): never keep one.
type Scene struct {
	st        *state
	t         *turn        // the turn of /scenario NAME, in Kit.Play
	delivered map[any]bool // in Overlay.Resumed: what the replay sent
}

// Session returns the session, to enter it later (Session.Do).
func (sc *Scene) Session() *Session { return sc.st.s }

// Open reports whether the session is open.
func (sc *Scene) Open() bool { return sc.st.life == sessionOpen }

// V1 reports whether the attached client speaks ACP v1.
func (sc *Scene) V1() bool { return protocol.Version(sc.st.out.client) != acp.ProtocolVersion }

// Overlay returns the overlay laid over the session, if any.
func (sc *Scene) Overlay() Overlay { return sc.st.kit.overlay }

// Lay lays o over the session; nil takes the overlay off.
func (sc *Scene) Lay(o Overlay) { sc.st.kit.overlay = o }

// Refuse ends the turn of /scenario NAME (in Kit.Play), saying why, and,
// if usage, how to write /scenario.
func (sc *Scene) Refuse(why string, usage bool) {
	st, t := sc.st, sc.t
	if usage {
		why = bad(why, "scenario").problem
	}
	st.transition(acp.StateRunning, "")
	st.out.agentMessage(why)
	t.state = turnOver
	st.endTurn(acp.StopEndTurn)
}

// Hold makes fg the work of the turn of /scenario NAME (in Kit.Play),
// which holds the foreground: the session is running.
func (sc *Scene) Hold(fg Foreground) {
	st := sc.st
	sc.t.origin, sc.t.fore = kitOrigin{fg}, kitTurn{fg}
	st.turns.take(sc.t, turnScenario)
	st.transition(acp.StateRunning, "")
}

// Begin asks for a turn of fg's that no prompt brought: fg.Began is told
// once it holds the foreground.
func (sc *Scene) Begin(fg Foreground) {
	sc.st.startOrHold(&turn{in: input{cmd: kitWork}, origin: kitOrigin{fg}})
}

// Running reports running, as a turn that starts does, with meta.
func (sc *Scene) Running(meta map[string]any) {
	st := sc.st
	st.fgState = acp.StateRunning
	if st.life == sessionOpen {
		st.reportWith("", meta)
	}
}

// Holds reports whether a turn of fg holds the foreground.
func (sc *Scene) Holds(fg Foreground) bool {
	t := sc.st.turns.fg
	return t != nil && t.fore == kitTurn{fg}
}

// End ends the turn of fg that holds the foreground, if one does, with
// stopReason (and failure, for the error stop reason).
func (sc *Scene) End(fg Foreground, stopReason string, failure *acp.Error) {
	st := sc.st
	if !sc.Holds(fg) {
		return
	}
	st.turns.release(st.turns.fg)
	st.failure = failure
	st.endTurn(stopReason)
}

// Say sends an agent_message.
func (sc *Scene) Say(text string) { sc.st.out.agentMessage(text) }

// Send sends an update as it is: one of a real terminal goes with its
// output stream; one of a real tool call's capabilities is what the
// session last reported of them from now on.
func (sc *Scene) Send(u acp.Update) {
	st := sc.st
	switch u := u.(type) {
	case *acp.TerminalUpdate:
		if t := st.work.terminals[u.TerminalID]; t != nil {
			st.out.sendTerminal(t, u, protocol.StreamOutput)
			return
		}
	case *acp.ToolCallUpdate:
		if c := st.work.calls[u.ToolCallID]; c != nil && u.Capabilities != nil {
			c.caps = u.Capabilities
		}
	}
	st.out.send(u)
}

// Snapshot returns the state_update of state (the foreground's state if
// empty; a standard one becomes it) with the list, and meta.
func (sc *Scene) Snapshot(state, stopReason string, meta map[string]any) *acp.StateUpdate {
	st := sc.st
	switch state {
	case acp.StateRunning, acp.StateIdle, acp.StateRequiresAction:
		st.fgState = state
	}
	return &acp.StateUpdate{
		SessionUpdate: acp.KindState, State: cmp.Or(state, st.fgState), StopReason: stopReason, Background: st.kit.listed(&st.list), Meta: meta,
	}
}

// Report sends a state_update: a Snapshot, or an update that stands for
// one (acp.StateOf) and is not reported as the list.
func (sc *Scene) Report(u acp.Update) {
	if _, listed := u.(*acp.StateUpdate); listed {
		sc.st.list.dirty = false
	}
	sc.st.out.send(u)
}

// ReportState reports the state and the list.
func (sc *Scene) ReportState() { sc.st.reportState("") }

// Relist says what the overlay lists changed: it is re-sent as any change
// of the list is.
func (sc *Scene) Relist() { sc.st.list.dirty = true }

// NewID reserves the id of a terminal (terminal) or tool call that no
// other work of the session takes.
func (sc *Scene) NewID(terminal bool) string {
	if terminal {
		return sc.st.work.newID("term")
	}
	return sc.st.work.newID("call")
}

// Forget forgets what the session told its client about cancelling a
// terminal or tool call that the kit made up: it is over.
func (sc *Scene) Forget(terminal bool, id string) { sc.st.out.ads.Drop(terminal, id) }

// Launch is how Scene.Run runs a command.
type Launch struct {
	Env []string // added to the environment
	// Source, if set, returns the terminal's output as the connection
	// reads it, given its ring.
	Source func(*outputbuf.Ring) protocol.OutputSource
	// Note, if set, is a text the tool call's content carries after its
	// terminal from its first update on, given the terminal's id.
	Note func(terminalID string) string
	// Listed lists the terminal at once, its tool call running.
	Listed bool
	// HandOff, if not empty, hands the terminal off to the background at
	// once, saying so: its tool call completes.
	HandOff string
}

// A Command is a command that Scene.Run started. Its methods run on the
// session's actor (in Session.Do).
type Command struct {
	Terminal, ToolCall string
	Output             *outputbuf.Ring
	t                  *terminal
	st                 *state
}

// Run runs line in a new terminal, as l says, unlisted foreground work
// unless l lists it or hands it off. ok is false if it could not start.
func (sc *Scene) Run(line string, l Launch) (c Command, ok bool) {
	st := sc.st
	call := st.newCall(callRunning, "execute", line)
	t := launchWith(st, call, line, launchOptions{env: l.Env, source: l.Source, note: l.Note})
	if t == nil {
		return Command{}, false
	}
	switch {
	case l.Listed:
		st.list.addTerminal(t)
	case l.HandOff != "":
		st.handOff(t, l.HandOff)
	}
	return Command{Terminal: t.id, ToolCall: call.id, Output: t.ring, t: t, st: st}, true
}

// Exited reports whether c's exitStatus was sent.
func (c Command) Exited() bool { return c.t.state >= termExited }

// Stop stops c if it runs, with a kill grace of at most grace.
func (c Command) Stop(grace time.Duration) {
	if c.t.state == termRunning {
		c.t.stop(min(c.st.settings.killGrace, grace))
	}
}

// Replace sends a replacement snapshot of c's output, if it has not
// exited and a client is attached; it reports whether it did.
func (c Command) Replace() bool {
	if c.t.state >= termExited || c.st.out.client == nil {
		return false
	}
	c.st.out.sendTerminal(c.t, c.t.announcement(), protocol.ReplaceOutput)
	return true
}

// Current sends a client that resumes (Overlay.Resumed) c as it is, if it
// runs unlisted outside the foreground, unless the replay sent it.
func (sc *Scene) Current(c Command) {
	st := sc.st
	t := c.t
	if t.state < termExited && !st.turns.foreground(t) && !slices.Contains(st.list.items, listItem{term: t}) {
		st.out.sendCurrent(sc.delivered, t.call, t)
	}
}

// A Call is a tool call that Scene.Schedule or Scene.Watch started. Its
// methods run on the session's actor (in Session.Do).
type Call struct {
	ID string
	st *state
}

// Schedule schedules a one-off job of line, due after d.
func (sc *Scene) Schedule(line string, d time.Duration) Call {
	return Call{jobs.Schedule(host{sc.st}, line, d, false).Call().ID(), sc.st}
}

// Watch starts a watch of path that runs line on a change; ok is false if
// it cannot watch it (it says why).
func (sc *Scene) Watch(path, line string) (c Call, ok bool) {
	w := watch.Start(host{sc.st}, &watch.Spec{Path: path, Line: line})
	if w == nil {
		return Call{}, false
	}
	return Call{w.Call().ID(), sc.st}, true
}

// Fire fires c's job now, if it is scheduled.
func (c Call) Fire() {
	call := c.st.work.calls[c.ID]
	if call == nil {
		return
	}
	if j, ok := taskOf(call).(*jobs.Job); ok {
		j.Fire()
	}
}

// Pause pauses c's watch (paused), or resumes it, as /pause and /resume
// do.
func (c Call) Pause(paused bool) {
	if paused {
		watch.Pause(host{c.st}, c.ID)
	} else {
		watch.Resume(host{c.st}, c.ID)
	}
}

// Cancel cancels c if it has not ended, as tool_call/cancel does.
func (c Call) Cancel() {
	call := c.st.work.calls[c.ID]
	if call == nil || call.state >= callDone {
		return
	}
	if stop, err := c.st.acceptCancel(c.ID); err == nil {
		stop()
	}
}

// Ask sends req to the attached client (its session and, if its subject
// has none, working directory filled in) and calls answer with its answer;
// false if no client is attached.
func (sc *Scene) Ask(ctx context.Context, req *acp.PermissionRequest, answer func(*acp.PermissionResponse, error)) bool {
	st := sc.st
	req.SessionID = st.s.id
	if req.Subject != nil && req.Subject.Cwd == "" {
		req.Subject.Cwd = st.s.cwd
	}
	if st.out.client == nil {
		return false
	}
	st.out.client.RequestPermission(ctx, req, answer)
	return true
}
