package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/scenario"
)

// A play is a scenario playing in its session (/scenario NAME): the
// scenario.Stage the session gives it. The scenario's script runs on a
// goroutine of its own and enters the session through doWait, one Stage
// call at a time, like any other way in.
//
// The session's bookkeeping stays its own: the scenario's commands,
// wakeups and watches are real work, registered as any other; what it
// makes up (tool calls and terminals with no work behind them, items of
// unknown type) is sent as crafted updates and never enters the
// registry. The play keeps what it made up (madeUp) and what it lists
// beside the session's work (probes); it is the session's overlay
// (overlay.go), through which the session lists the probes, lets the play
// take cancels, sends what it made up to a client that resumes, and tells
// it of the close. When the script returns, finish stops whatever it
// left running, finalizes what it made up, unlists its probes, ends its
// foreground work if it still holds the foreground, and reports the list
// again.
//
// A session/cancel of the scenario's foreground turn stops the scenario
// (its Context ends with scenario.ErrCancelled), unless the scenario
// awaits that cancel (SessionCancel). A close stops it too
// (scenario.ErrClosed); the close stops its real work as any other, and
// what it made up is left as it is, unfinished, as a close may leave
// listed work.
type play struct {
	s     *Session
	sc    *scenario.Scenario
	hold  time.Duration
	ctx   context.Context
	abort context.CancelCauseFunc
	dir   gateDir // owned by the play's goroutine

	// Owned by the session's actor.
	turn       *turn         // the foreground turn it holds, if it holds one
	began      chan struct{} // closed when the turn that Begin asked for holds the foreground
	runs       []*run        // its commands
	calls      []*toolCall   // its wakeups and watches
	made       madeUp
	probes     []acp.BackgroundItem // what it lists beside the session's work (List)
	asks       []func()             // withdraw its permission requests
	sessCancel chan struct{}        // while it awaits a session/cancel
}

var (
	_ scenario.Stage = (*play)(nil)
	_ overlay        = (*playOverlay)(nil)
	_ foreground     = (*playTurn)(nil)
)

// How long the Stage waits for what it waits on before it gives up, and
// how often it looks.
const (
	stageWait = 30 * time.Second
	stagePoll = 20 * time.Millisecond
	// stageGrace is the longest kill grace a scenario's stop uses.
	stageGrace = time.Second
)

// startScenario plays the scenario of a /scenario NAME prompt, inserted
// already: it holds the foreground, says what comes, and plays on a
// goroutine of its own. A scenario it cannot play here ends the turn at
// once, saying why.
func startScenario(st *state, t *turn) {
	sc := scenario.Lookup(t.in.id)
	refuse := ""
	switch {
	case st.kit.overlay != nil:
		refuse = fmt.Sprintf("Scenario %s is still playing; /scenario %s can play once it is over.", st.kit.overlay.(*playOverlay).sc.Name, sc.Name)
	case sc.Invalid && !st.s.sv.cfg.ScenariosInvalid:
		refuse = fmt.Sprintf("Scenario %s sends a message that the schema forbids; it plays only when shellagent runs with --scenarios-invalid.", sc.Name)
	case protocol.Version(st.out.client) != acp.ProtocolVersion && !sc.V1:
		refuse = fmt.Sprintf("Scenario %s shows a v2 only rule (%s): ACP v1 has nothing that it could show, so it plays nothing here.", sc.Name, sc.Source)
	}
	if refuse != "" {
		st.transition(acp.StateRunning, "")
		st.out.agentMessage(refuse)
		t.state = turnOver
		st.endTurn(acp.StopEndTurn)
		return
	}
	ctx, abort := context.WithCancelCause(context.Background())
	p := &play{s: st.s, sc: sc, hold: t.in.delay, ctx: ctx, abort: abort}
	st.kit.overlay, t.origin, t.fore, p.turn = (*playOverlay)(p), p, (*playTurn)(p), t
	st.turns.take(t, turnScenario)
	st.transition(acp.StateRunning, "")
	st.out.agentMessage(sc.Intro())
	go p.run()
}

// run plays the script, then finishes.
func (p *play) run() {
	err := p.sc.Play(p)
	p.finish(err)
}

// scenarioMark is the _meta of the state_updates with which scenario name
// bends a rule on purpose.
func scenarioMark(name string) map[string]any {
	return map[string]any{"shellagent": map[string]any{"scenario": name}}
}

// enter runs f on the session's actor and waits for it, unless the play is over or the
// session no longer open; it reports whether f ran.
func (p *play) enter(f func(st *state)) bool {
	if p.ctx.Err() != nil {
		return false
	}
	ran := false
	p.s.doWait(func(st *state) {
		if p.ctx.Err() != nil || st.life != sessionOpen {
			return
		}
		ran = true
		f(st)
	})
	return ran
}

// over is the error of a Stage call that the end of the play cut short.
func over(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return scenario.ErrClosed
}

// waitFor waits for ch for at most stageWait, or until ctx ends.
func waitFor(ctx context.Context, ch <-chan struct{}, what string) error {
	t := time.NewTimer(stageWait)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return over(ctx)
	case <-t.C:
		return fmt.Errorf("%s: not within %s", what, stageWait)
	}
}

// pollUntil calls cond every stagePoll until it holds, for at most
// stageWait, or until ctx ends.
func pollUntil(ctx context.Context, what string, cond func() bool) error {
	deadline := time.Now().Add(stageWait)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, stageWait)
		}
		t := time.NewTimer(stagePoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return over(ctx)
		}
	}
	return nil
}

// Context implements scenario.Stage.
func (p *play) Context() context.Context { return p.ctx }

// Say implements scenario.Stage.
func (p *play) Say(text string) {
	p.enter(func(st *state) { st.out.agentMessage(text) })
}

// Hold implements scenario.Stage.
func (p *play) Hold() {
	if p.hold <= 0 {
		return
	}
	t := time.NewTimer(p.hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.ctx.Done():
	}
}

// Send implements scenario.Stage. An update of a made-up item is added to
// what the play keeps of it; one of a real terminal goes with its output
// stream; one of a real tool call's capabilities is what the session last
// reported of them from now on.
func (p *play) Send(u acp.Update) {
	p.enter(func(st *state) { sendCrafted(st, &p.made, u) })
}

// sendCrafted sends an update a scenario made.
func sendCrafted(st *state, m *madeUp, u acp.Update) {
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
	m.add(u)
	st.out.send(u)
}

// Report implements scenario.Stage.
func (p *play) Report(s scenario.Snapshot) {
	p.enter(func(st *state) {
		var meta map[string]any
		switch s.State {
		case acp.StateRunning, acp.StateIdle, acp.StateRequiresAction:
			st.fgState = s.State
		case "":
		default:
			meta = scenarioMark(p.sc.Name)
		}
		if s.Unreported || s.Raw != nil {
			meta = scenarioMark(p.sc.Name)
		}
		u := s.Update(&acp.StateUpdate{
			SessionUpdate: acp.KindState, State: cmp.Or(s.State, st.fgState), StopReason: s.StopReason, Background: st.listed(), Meta: meta,
		})
		if _, listed := u.(*acp.StateUpdate); listed {
			st.list.dirty = false // a list left out or replaced is not reported
		}
		st.out.send(u)
	})
}

// List implements scenario.Stage.
func (p *play) List(items ...acp.BackgroundItem) {
	p.enter(func(st *state) { p.list(st, items) })
}

// list replaces what the play lists; a change is re-sent as any change
// of the list is.
func (p *play) list(st *state, items []acp.BackgroundItem) {
	if len(items) == 0 && len(p.probes) == 0 {
		return
	}
	p.probes, st.list.dirty = items, true
}

// playOverlay is the play as its session's overlay (overlay.go).
type playOverlay play

// listed implements overlay.
func (o *playOverlay) listed() []acp.BackgroundItem { return o.probes }

// cancel implements overlay: the play takes the cancels it intercepts of
// its running commands, and answers those of what it made up.
func (o *playOverlay) cancel(terminal bool, id string, running bool) (bool, error) {
	m := &o.made
	switch {
	case running:
		return m.takes(id), nil
	case terminal && m.items[id] != nil:
		return true, acp.InvalidParams("terminalId: %s is not cancellable (a scenario made it up)", id)
	case !terminal && m.items[id] != nil && !m.items[id].terminal:
		return true, m.cancel(id)
	}
	return false, nil
}

// closing implements overlay: a close stops the script; what it made up
// stays as it is.
func (o *playOverlay) closing() { (*play)(o).abort(scenario.ErrClosed) }

// ToolCallID implements scenario.Stage.
func (p *play) ToolCallID() (id string) {
	p.enter(func(st *state) { id = p.made.reserve(st, false) })
	return id
}

// TerminalID implements scenario.Stage.
func (p *play) TerminalID() (id string) {
	p.enter(func(st *state) { id = p.made.reserve(st, true) })
	return id
}

// Intercept implements scenario.Stage.
func (p *play) Intercept(id string) <-chan struct{} {
	ch := make(chan struct{})
	p.enter(func(*state) { p.made.intercept(id, ch) })
	return ch
}

// SessionCancel implements scenario.Stage.
func (p *play) SessionCancel() <-chan struct{} {
	ch := make(chan struct{})
	p.enter(func(*state) { p.sessCancel = ch })
	return ch
}

// Run implements scenario.Stage.
func (p *play) Run(line string, how scenario.How) (scenario.Command, error) {
	r := &run{p: p, snapped: make(chan struct{}, 1)}
	opts := launchOptions{source: func(ring *outputbuf.Ring) protocol.OutputSource { return snapOutput{ring, r.snapped} }}
	if how.Background && how.Codex {
		opts.note = func(term string) string {
			return "It stays in_progress until the command ends, as Codex's command items do; its terminal, " + term + ", is what runs in the background."
		}
	}
	if how.Gated {
		gate, err := p.dir.file()
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", p.sc.Name, err)
		}
		r.gate = gate
		opts.env = []string{"SHELLAGENT_GATE=" + gate}
	}
	started := make(chan bool, 1)
	if !p.enter(func(st *state) {
		call := st.newCall(callRunning, "execute", line)
		t := launchWith(st, call, line, opts)
		if t == nil {
			started <- false
			return
		}
		r.term, r.id, r.call, r.ring = t, t.id, call.id, t.ring
		p.runs = append(p.runs, r)
		switch {
		case how.Background && how.Codex:
			st.list.addTerminal(t) // its tool call said so with its terminal (opts.note)
		case how.Background:
			st.handOff(t, "Started in the background by /scenario "+p.sc.Name+".")
		}
		started <- true
	}) {
		return nil, over(p.ctx)
	}
	if !<-started {
		return nil, fmt.Errorf("scenario %s: %s could not start", p.sc.Name, line)
	}
	return r, nil
}

// Schedule implements scenario.Stage.
func (p *play) Schedule(line string) (scenario.ToolCall, error) {
	var c *toolCall
	if !p.enter(func(st *state) {
		c = st.schedule(line, time.Hour, false)
		p.calls = append(p.calls, c)
	}) {
		return nil, over(p.ctx)
	}
	return realCall{p, c}, nil
}

// Watch implements scenario.Stage: a watch of the play's own directory,
// in which nothing changes.
func (p *play) Watch(line string) (scenario.ToolCall, error) {
	dir, err := p.dir.path()
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", p.sc.Name, err)
	}
	spec := &watchSpec{path: dir, line: line}
	if !p.enter(func(st *state) { startWatch(st, spec) }) {
		return nil, over(p.ctx)
	}
	var c *toolCall
	err = pollUntil(p.ctx, "the watch", func() bool {
		p.s.doWait(func(st *state) {
			for _, call := range st.work.calls {
				if w, ok := call.task.(*watcher); ok && w.spec == spec {
					c = call
					p.calls = append(p.calls, c)
				}
			}
		})
		return c != nil
	})
	if err != nil {
		return nil, err
	}
	return realCall{p, c}, nil
}

// Ask implements scenario.Stage. The request's subject names the
// session's working directory.
func (p *play) Ask(req *acp.PermissionRequest) (<-chan scenario.Answer, func()) {
	answer := make(chan scenario.Answer, 1)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	reply := func(a scenario.Answer) {
		answer <- a
		close(done)
	}
	withdraw := func() {
		cancel()
		t := time.NewTimer(stageWait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	}
	if !p.enter(func(st *state) {
		p.asks = append(p.asks, withdraw)
		req.SessionID = st.s.id
		if req.Subject != nil && req.Subject.Cwd == "" {
			req.Subject.Cwd = st.s.cwd
		}
		client := st.out.client
		if client == nil {
			reply(scenario.Answer{Err: errors.New("no client is attached")})
			return
		}
		client.RequestPermission(ctx, req, func(resp *acp.PermissionResponse, err error) {
			if err != nil {
				reply(scenario.Answer{Err: err})
				return
			}
			reply(scenario.Answer{Outcome: resp.Outcome.Outcome, OptionID: resp.Outcome.OptionID})
		})
	}) {
		cancel()
		reply(scenario.Answer{Err: over(p.ctx)})
	}
	return answer, withdraw
}

// Begin implements scenario.Stage.
func (p *play) Begin() error {
	var began chan struct{}
	if !p.enter(func(st *state) {
		began = make(chan struct{})
		p.began = began
		st.startOrHold(&turn{in: input{cmd: scenarioWork}, origin: p})
	}) {
		return over(p.ctx)
	}
	return waitFor(p.ctx, began, "the foreground")
}

// begin gives the turn that Begin asked for the foreground: it reports
// running, with the scenario's mark.
func (p *play) begin(st *state, t *turn) {
	t.fore = (*playTurn)(p)
	st.turns.take(t, turnScenario)
	p.turn = t
	st.fgState = acp.StateRunning
	if st.life == sessionOpen { // as transition, with the mark
		st.reportWith("", scenarioMark(p.sc.Name))
	}
	if p.began != nil {
		close(p.began)
		p.began = nil
	}
}

// End implements scenario.Stage.
func (p *play) End(stopReason string, failure *acp.Error) {
	p.enter(func(st *state) { p.end(st, stopReason, failure) })
}

func (p *play) end(st *state, stopReason string, failure *acp.Error) {
	t := p.turn
	if t == nil || st.turns.fg != t {
		return
	}
	p.turn = nil
	st.turns.release(t)
	st.failure = failure
	st.endTurn(stopReason)
}

// Idle implements scenario.Stage.
func (p *play) Idle() error {
	return pollUntil(p.ctx, "the end of foreground work", func() bool { return p.s.peek().idle })
}

// owns implements source: t is the play's /scenario turn, or foreground
// work it began.
func (p *play) owns(t *turn) bool { return t.origin == p }

// dropped implements dropper: its foreground work will not come.
func (p *play) dropped(*turn) { p.abort(scenario.ErrCancelled) }

// playTurn is the play as the foreground work of its turn.
type playTurn play

// toBackground implements foreground: a scenario's turn stays.
func (*playTurn) toBackground(st *state, _ *turn) {
	st.out.agentMessage("A scenario holds the foreground; it ends by itself, or with session/cancel.")
}

// cancelTurn implements foreground: session/cancel of the scenario's
// turn is the cancel it awaits, or the end of the scenario.
func (pt *playTurn) cancelTurn(*state, *turn) {
	if pt.sessCancel != nil {
		close(pt.sessCancel)
		pt.sessCancel = nil
		return
	}
	(*play)(pt).abort(scenario.ErrCancelled)
}

// resumed implements overlay: it brings a client that resumes up to date
// on what the play runs in the foreground and what it made up.
func (o *playOverlay) resumed(st *state, delivered map[any]bool) {
	for _, r := range o.runs {
		if r.term.state < termExited && !st.turns.foreground(r.term) && !slices.Contains(st.list.items, listItem{term: r.term}) {
			st.out.sendCurrent(delivered, r.term.call, r.term)
		}
	}
	for _, u := range o.made.current() {
		st.out.send(u)
	}
}

// finish ends the play once its script has returned: it stops the
// commands the script left running and waits for their exit, withdraws
// its permission requests, cancels its wakeups and watches, finalizes
// what it made up, unlists its probes, says it is over, and ends its
// foreground work or reports the list again. After a close it only lets
// go.
func (p *play) finish(err error) {
	defer p.dir.remove()
	closed := errors.Is(context.Cause(p.ctx), scenario.ErrClosed)
	cancelled := errors.Is(context.Cause(p.ctx), scenario.ErrCancelled)
	if !closed {
		var left []*run
		var asks []func()
		p.s.doWait(func(st *state) {
			for _, r := range p.runs {
				if r.term.state == termRunning {
					r.term.stop(min(st.settings.killGrace, stageGrace))
				}
				if r.term.state < termExited {
					left = append(left, r)
				}
			}
			asks = p.asks
		})
		// One that does not exit in time is still listed in the final
		// snapshot.
		_ = pollUntil(context.Background(), "the exits", func() bool {
			return !slices.ContainsFunc(left, func(r *run) bool { return !r.exited() })
		})
		// A close leaves open requests for listed work to the client to
		// answer (RFD): only a play that ends otherwise withdraws them.
		for _, withdraw := range asks {
			withdraw()
		}
	}
	p.s.doWait(func(st *state) {
		p.abort(scenario.ErrClosed) // nothing of the script enters any more
		if closed || st.life != sessionOpen {
			return // the overlay stays: what it lists stays listed, as a close leaves listed work
		}
		defer func() { st.kit.overlay = nil }()
		for _, c := range p.calls {
			cancelRealCall(st, c)
		}
		for _, u := range p.made.finals() {
			sendCrafted(st, &p.made, u)
		}
		p.made.forget(&st.out.ads)
		p.list(st, nil)
		if err != nil && !cancelled && !errors.Is(err, scenario.ErrClosed) {
			st.out.agentMessage(fmt.Sprintf("Scenario %s stopped early: %v.", p.sc.Name, err))
		}
		st.out.agentMessage(p.sc.Outro())
		if t := p.turn; t != nil && st.turns.fg == t {
			stop := acp.StopEndTurn
			if cancelled {
				stop = acp.StopCancelled
			}
			p.end(st, stop, nil)
			return
		}
		st.reportState("")
	})
}
