package supervisor

import (
	"cmp"
	"context"
	"slices"
	"time"

	"shellagent/acp"
	"shellagent/protocol"
	"shellagent/supervisor/kit"
	"shellagent/supervisor/work"
)

// The client developers' kit (package scenario) plays outside the core,
// through the contract of package supervisor/kit. The session knows of it
// only through Config.Kit (the /scenario command), through the
// kit.Overlay a playing scenario lays over it, which it consults where it
// reports its list (overlaySlot.listed) and where it dispatches a cancel
// (overlaySlot.takes), and through the kit.Foreground that holds a turn
// for it. The scenario drives the session through Session.Do and the
// kit.Scene it is given, whose Host is scene.

// overlaySlot is the session's slot for an overlay: empty (nil) unless a
// scenario plays; and what the scenarios made up that ended, the most
// recent maxFinished, oldest first (kit.Scene.Ended), whose cancels the
// session answers as those of its own ended work, overlay or not.
type overlaySlot struct {
	overlay kit.Overlay
	ended   []madeUpEnd
}

// madeUpEnd is a terminal (terminal) or tool call that a scenario made
// up and that ended, a tool call with status. As a work.Liveness it is a
// terminal that has exited.
type madeUpEnd struct {
	terminal   bool
	id, status string
}

func (madeUpEnd) Exited() bool   { return true }
func (madeUpEnd) Launched() bool { return true }

// refusal is the error a cancel of it gets: that of a cancel of ended
// work of the session's own.
func (e madeUpEnd) refusal() error {
	if e.terminal {
		return work.Live(e.id, e)
	}
	return errCallOver(e.id, e.status)
}

// items returns the items the overlay lists after the session's own
// work, if there is an overlay.
func (k overlaySlot) items() []acp.BackgroundItem {
	if k.overlay == nil {
		return nil
	}
	return k.overlay.Listed()
}

// takes asks the overlay, if there is one, whether it takes a cancel of
// id (kit.Overlay.Cancel); a cancel of what a scenario made up that ended
// is taken, and refused as one of the session's own ended work.
func (k overlaySlot) takes(terminal bool, id string, running bool) (taken bool, err error) {
	if k.overlay != nil {
		if taken, err := k.overlay.Cancel(terminal, id, running); taken {
			return true, err
		}
	}
	for _, e := range k.ended {
		if e.terminal == terminal && e.id == id {
			return true, e.refusal()
		}
	}
	return false, nil
}

// end records that what a scenario made up ended (e); it returns the
// oldest record it drops beyond maxFinished, if any.
func (k *overlaySlot) end(e madeUpEnd) (dropped *madeUpEnd) {
	k.ended = append(k.ended, e)
	if len(k.ended) <= maxFinished {
		return nil
	}
	old := k.ended[0]
	k.ended = slices.Delete(k.ended, 0, 1)
	return &old
}

// listed is the list as a state_update carries it: the session's work
// (l), then what the overlay lists.
func (k overlaySlot) listed(l *backgroundList) acp.Background {
	return append(l.wire(), k.items()...)
}

// kitOrigin is the source of the turns a kit.Foreground begins.
type kitOrigin struct{ fg kit.Foreground }

// dropped implements dropper.
func (o kitOrigin) dropped(*turn) { o.fg.Dropped() }

// kitTurn is a kit.Foreground as the foreground work of its turn.
type kitTurn struct{ fg kit.Foreground }

// toBackground implements foreground: a scenario's turn stays.
func (kitTurn) toBackground(st *state, _ *turn) {
	st.out.agentMessage("A scenario holds the foreground; it ends by itself, or with session/cancel.")
}

// cancelTurn implements foreground.
func (k kitTurn) cancelTurn(st *state, _ *turn) { k.fg.CancelTurn(kit.NewScene(scene{st: st})) }

// playScenario is /scenario NAME's work: the kit plays it.
func playScenario(st *state, t *turn) {
	sc := scene{st: st, t: t}
	if k := st.s.sv.cfg.Kit; k != nil {
		k.Play(kit.NewScene(sc), t.in.args.(string)) // Safe: parseScenario's.
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
	fg.Began(kit.NewScene(scene{st: st}))
}

// Session.Do and Idle are the kit's ways into a session (kit.Session).

// Do runs f on the session's actor, in turn with its other ways in, and
// returns once f has run and settled. Never call it from the actor.
func (s *Session) Do(f func(sc *kit.Scene)) {
	s.doWait(func(st *state) { f(kit.NewScene(scene{st: st})) })
}

// Idle reports whether no foreground work runs or waits in the session,
// without waiting for slow work.
func (s *Session) Idle() bool { return s.peek().idle }

// scene is the session of st as a kit.Scene drives it (kit.Host), for one
// entry on the actor: t is the turn of /scenario NAME, in Kit.Play;
// delivered, in Overlay.Resumed, is what the replay sent. Each method is
// the kit.Scene's of the same name.
type scene struct {
	st        *state
	t         *turn
	delivered map[any]bool
}

var _ kit.Host = scene{}

func (sc scene) Work() work.Host      { return host{sc.st} }
func (sc scene) Session() kit.Session { return sc.st.s }
func (sc scene) V1() bool             { return protocol.Version(sc.st.out.client) != acp.ProtocolVersion }
func (sc scene) Overlay() kit.Overlay { return sc.st.kit.overlay }
func (sc scene) Lay(o kit.Overlay)    { sc.st.kit.overlay = o }
func (sc scene) ReportState()         { sc.st.reportState("") }
func (sc scene) Relist()              { sc.st.list.dirty = true }

func (sc scene) Ended(terminal bool, id, status string) {
	if old := sc.st.kit.end(madeUpEnd{terminal, id, status}); old != nil {
		sc.st.out.ads.Drop(old.terminal, old.id)
	}
}

func (sc scene) Refuse(why string, usage bool) {
	if usage {
		why = bad(why, "scenario").problem
	}
	kindTurn{sc.st, sc.t}.Refuse(why)
}

func (sc scene) Hold(fg kit.Foreground) {
	sc.t.origin, sc.t.fore = kitOrigin{fg}, kitTurn{fg}
	sc.st.turns.take(sc.t, turnScenario)
	sc.st.transition(acp.StateRunning, "")
}

func (sc scene) Begin(fg kit.Foreground) {
	sc.st.startOrHold(&turn{in: input{cmd: kitWork}, origin: kitOrigin{fg}})
}

func (sc scene) Running(meta map[string]any) {
	sc.st.fgState = acp.StateRunning
	if sc.st.life == sessionOpen {
		sc.st.reportWith("", meta)
	}
}

func (sc scene) Holds(fg kit.Foreground) bool {
	t := sc.st.turns.fg
	return t != nil && t.fore == kitTurn{fg}
}

func (sc scene) End(fg kit.Foreground, stopReason string, failure *acp.Error) {
	if st := sc.st; sc.Holds(fg) {
		st.turns.release(st.turns.fg)
		st.failure = failure
		st.endTurn(stopReason)
	}
}

func (sc scene) Send(u acp.Update) {
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

func (sc scene) Snapshot(state, stopReason string, meta map[string]any) *acp.StateUpdate {
	st := sc.st
	switch state {
	case acp.StateRunning, acp.StateIdle, acp.StateRequiresAction:
		st.fgState = state
	}
	return &acp.StateUpdate{
		SessionUpdate: acp.KindState, State: cmp.Or(state, st.fgState), StopReason: stopReason, Background: st.kit.listed(&st.list), Meta: meta,
	}
}

func (sc scene) Report(u acp.Update) {
	if _, listed := u.(*acp.StateUpdate); listed {
		sc.st.list.dirty = false
	}
	sc.st.out.send(u)
}

func (sc scene) NewID(terminal bool) string {
	if terminal {
		return sc.st.work.newID("term")
	}
	return sc.st.work.newID("call")
}

func (sc scene) Run(line string, l kit.Launch) (c kit.Command, ok bool) {
	st := sc.st
	call := st.newCall(callRunning, "execute", line)
	t := st.launch(call, line, launchOptions{env: l.Env, source: l.Source, note: l.Note})
	if t == nil {
		return kit.Command{}, false
	}
	switch {
	case l.Listed:
		st.list.add(listItem{term: t})
	case l.HandOff != "":
		st.handOff(t, l.HandOff)
	}
	return kit.Command{Terminal: t.id, ToolCall: call.id, Output: t.ring, Process: kitRun{terminalHandle{st, t}}}, true
}

func (sc scene) Current(c kit.Command) {
	st, t := sc.st, c.Process.(kitRun).t // Safe: every kit.Command's Process is a kitRun.
	if t.state < termExited && !st.turns.foreground(t) && !slices.Contains(st.list.items, listItem{term: t}) {
		st.out.sendCurrent(sc.delivered, t.call, t)
	}
}

func (sc scene) Ask(ctx context.Context, req *acp.PermissionRequest, answer func(*acp.PermissionResponse, error)) bool {
	if req.Subject != nil && req.Subject.Cwd == "" {
		req.Subject.Cwd = sc.st.s.cwd
	}
	return askClient(ctx, sc.st, req, answer)
}

// kitRun is the terminal of a command a scenario runs (kit.Process);
// Exited is its terminalHandle's.
type kitRun struct{ terminalHandle }

func (r kitRun) Stop(grace time.Duration) {
	if r.t.state == termRunning {
		r.t.stop(min(r.st.settings.KillGrace, grace))
	}
}

func (r kitRun) Replace() bool {
	if r.t.state >= termExited || r.st.out.client == nil {
		return false
	}
	r.st.out.sendTerminal(r.t, r.t.announcement(), protocol.ReplaceOutput)
	return true
}
