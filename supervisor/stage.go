package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// registry. The play keeps what it made up (madeUp), so that the session
// can send it to a client that resumes, take cancels of it, and finish
// it. When the script returns, finish stops whatever it left running,
// finalizes what it made up, unlists its probes, ends its foreground work
// if it still holds the foreground, and reports the list again.
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

	// Guarded by the session's mutex.
	turn       *turn         // the foreground turn it holds, if it holds one
	began      chan struct{} // closed when the turn that Begin asked for holds the foreground
	runs       []*run        // its commands
	calls      []*toolCall   // its wakeups and watches
	made       madeUp
	asks       []func()      // withdraw its permission requests
	sessCancel chan struct{} // while it awaits a session/cancel
}

var _ scenario.Stage = (*play)(nil)

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
	case st.play != nil:
		refuse = fmt.Sprintf("Scenario %s is still playing; /scenario %s can play once it is over.", st.play.sc.Name, sc.Name)
	case sc.Invalid && !st.s.sv.cfg.ScenariosInvalid:
		refuse = fmt.Sprintf("Scenario %s sends a message that the schema forbids; it plays only when shellagent runs with --scenarios-invalid.", sc.Name)
	case protocol.Version(st.out.client) == protocol.ProtocolV1 && !sc.V1:
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
	st.play, t.origin, t.fore, p.turn = p, p, p, t
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

// enter runs f under the session's mutex, unless the play is over or the
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
		reportCrafted(st, s.State, s.StopReason, s.Unreported, s.Raw, meta)
	})
}

// List implements scenario.Stage.
func (p *play) List(items ...acp.BackgroundItem) {
	p.enter(func(st *state) { st.list.setProbes(items) })
}

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
	r := &run{p: p, ended: make(chan struct{}), snapped: make(chan struct{}, 1)}
	opts := launchOptions{snapped: r.snapped}
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
		launchWith(st, call, line, opts, func(t *terminal) {
			if t == nil {
				started <- false
				return
			}
			r.term, r.id, r.call, r.ring = t, t.id, call.id, t.ring
			t.ended = r.ended
			p.runs = append(p.runs, r)
			switch {
			case how.Background && how.Codex:
				st.list.addTerminal(t) // its tool call said so with its terminal (opts.note)
			case how.Background:
				st.handOff(t, "Started in the background by /scenario "+p.sc.Name+".")
			}
			started <- true
		})
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
	t.fore = p
	st.turns.take(t, turnScenario)
	p.turn = t
	st.mark = scenarioMark(p.sc.Name)
	st.transition(acp.StateRunning, "")
	st.mark = nil // sent, or not to be sent: the session is closing
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
	return pollUntil(p.ctx, "the end of foreground work", func() bool {
		idle := false
		p.s.peek(func(st *state) { idle = !st.turns.busy() && !st.turns.waiting() && st.fgState == acp.StateIdle })
		return idle
	})
}

// owns implements source: t is the play's /scenario turn, or foreground
// work it began.
func (p *play) owns(t *turn) bool { return t.origin == p }

// toBackground implements foreground: a scenario's turn stays.
func (p *play) toBackground(st *state, _ *turn) {
	st.out.agentMessage("A scenario holds the foreground; it ends by itself, or with session/cancel.")
}

// cancelTurn implements foreground: session/cancel of the scenario's
// turn is the cancel it awaits, or the end of the scenario.
func (p *play) cancelTurn(*state, *turn) {
	if p.sessCancel != nil {
		close(p.sessCancel)
		p.sessCancel = nil
		return
	}
	p.abort(scenario.ErrCancelled)
}

// sendCurrent brings a client that resumes up to date on what the play
// runs in the foreground and what it made up.
func (p *play) sendCurrent(st *state, delivered map[any]bool) {
	for _, r := range p.runs {
		if r.term.state < termExited && !st.turns.foreground(r.term) && !slices.Contains(st.list.items, listItem{term: r.term}) {
			st.out.sendCurrent(delivered, r.term.call, r.term)
		}
	}
	for _, u := range p.made.current() {
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
		var ended []chan struct{}
		var asks []func()
		p.s.doWait(func(st *state) {
			for _, r := range p.runs {
				if r.term.state == termRunning {
					r.term.stop(min(st.settings.killGrace, stageGrace))
				}
				if r.term.state < termExited {
					ended = append(ended, r.ended)
				}
			}
			asks = p.asks
		})
		for _, ch := range ended {
			if waitFor(context.Background(), ch, "an exit") != nil {
				break // the final snapshot still lists it
			}
		}
		// A close leaves open requests for listed work to the client to
		// answer (RFD): only a play that ends otherwise withdraws them.
		for _, withdraw := range asks {
			withdraw()
		}
	}
	p.s.doWait(func(st *state) {
		defer func() { st.play = nil }()
		p.abort(scenario.ErrClosed) // nothing of the script enters any more
		if closed || st.life != sessionOpen {
			return
		}
		for _, c := range p.calls {
			cancelRealCall(st, c)
		}
		for _, u := range p.made.finals() {
			sendCrafted(st, &p.made, u)
		}
		p.made.forget(&st.out.ads)
		st.list.setProbes(nil)
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

// run is a command a play started: the scenario.Command it works with.
type run struct {
	p       *play
	term    *terminal       // guarded by the session's mutex
	id      string          // its terminal
	call    string          // its tool call
	ring    *outputbuf.Ring // its output
	ended   chan struct{}   // closed once its exitStatus is sent
	snapped chan struct{}   // told of each copy of its output a replacement takes
	gate    string          // the file Open creates, if it is gated
}

// Terminal implements scenario.Command.
func (r *run) Terminal() string { return r.id }

// ToolCall implements scenario.Command.
func (r *run) ToolCall() string { return r.call }

// Open implements scenario.Command.
func (r *run) Open() {
	if r.gate == "" {
		return
	}
	if err := os.WriteFile(r.gate, nil, 0o600); err != nil {
		r.p.s.sv.cfg.Log.Warn("scenario gate", "scenario", r.p.sc.Name, "err", err)
	}
}

// WaitOutput implements scenario.Command: it waits until the ring holds
// text and every follower that holds it (the writer of a connection that
// keeps up) has taken it, so that what the scenario sends next goes out
// after it.
func (r *run) WaitOutput(text string) error {
	return pollUntil(r.p.ctx, "output "+text+" of "+r.id, func() bool {
		data, end := r.ring.Snapshot()
		i := strings.Index(string(data), text)
		if i < 0 {
			return false
		}
		taken, held := r.ring.Taken()
		return !held || taken >= end-int64(len(data))+int64(i+len(text))
	})
}

// WaitExit implements scenario.Command.
func (r *run) WaitExit() error { return waitFor(r.p.ctx, r.ended, "the exit of "+r.id) }

// Replace implements scenario.Command.
func (r *run) Replace() error {
	select {
	case <-r.snapped: // an earlier copy
	default:
	}
	attached := false
	if !r.p.enter(func(st *state) {
		if r.term.state < termExited && st.out.client != nil {
			attached = true
			st.out.sendTerminal(r.term, r.term.announcement(), protocol.ReplaceOutput)
		}
	}) {
		return over(r.p.ctx)
	}
	if !attached {
		return nil
	}
	return waitFor(r.p.ctx, r.snapped, "the replacement of "+r.id)
}

// Stop implements scenario.Command.
func (r *run) Stop() {
	r.p.enter(func(st *state) {
		if r.term.state == termRunning {
			r.term.stop(min(st.settings.killGrace, stageGrace))
		}
	})
}

// realCall is a wakeup or a watch a play started: the scenario.ToolCall
// it works with.
type realCall struct {
	p *play
	c *toolCall // guarded by the session's mutex
}

// ID implements scenario.ToolCall.
func (r realCall) ID() string { return r.c.id }

// Fire implements scenario.ToolCall.
func (r realCall) Fire() {
	r.p.enter(func(st *state) {
		if j, ok := r.c.task.(*job); ok && r.c.state == callScheduled {
			j.timer.Stop()
			fireJob(st, j)
		}
	})
}

// Pause implements scenario.ToolCall.
func (r realCall) Pause(paused bool) {
	r.p.enter(func(st *state) {
		if paused {
			pauseWatch(st, r.c.id)
		} else {
			resumeWatch(st, r.c.id)
		}
	})
}

// Cancel implements scenario.ToolCall.
func (r realCall) Cancel() {
	r.p.enter(func(st *state) { cancelRealCall(st, r.c) })
}

// cancelRealCall cancels a wakeup or a watch that has not ended, as
// tool_call/cancel does.
func cancelRealCall(st *state, c *toolCall) {
	if c.state >= callDone {
		return
	}
	if stop, err := st.acceptCancel(c.id); err == nil {
		stop()
	}
}

// gateDir is a play's temporary directory, made when first needed: its
// gate files, and what its watch watches. It is owned by the play's
// goroutine.
type gateDir struct {
	dir   string
	gates int
}

// path returns the directory, making it.
func (g *gateDir) path() (string, error) {
	if g.dir == "" {
		dir, err := os.MkdirTemp("", "shellagent-scenario-")
		if err != nil {
			return "", err
		}
		g.dir = dir
	}
	return g.dir, nil
}

// file returns the path of a new gate file in the directory.
func (g *gateDir) file() (string, error) {
	dir, err := g.path()
	if err != nil {
		return "", err
	}
	g.gates++
	return filepath.Join(dir, fmt.Sprintf("gate-%d", g.gates)), nil
}

// remove removes the directory, if there is one.
func (g *gateDir) remove() {
	if g.dir != "" {
		_ = os.RemoveAll(g.dir) // Best effort: a temporary directory of gate files.
	}
}

// madeUp is what a play made up: tool calls and terminals with no work
// behind them, as the sum of the updates sent for each, and the ids whose
// cancels it takes. It is guarded by the session's mutex. Its methods
// that the session calls take a nil madeUp for a session with no play.
type madeUp struct {
	items      map[string]*fake
	order      []string                 // the ids of items, in order
	intercepts map[string]chan struct{} // nil once told
}

// fake is a made-up tool call or terminal.
type fake struct {
	terminal bool
	call     acp.ToolCallUpdate
	term     acp.TerminalUpdate
}

// final reports whether its final status, or its exitStatus, was sent.
func (f *fake) final() bool {
	if f.terminal {
		return f.term.ExitStatus != nil
	}
	return acp.FinalStatus(f.call.Status)
}

// madeUpBy returns what the session's playing scenario made up, or nil.
func madeUpBy(st *state) *madeUp {
	if st.play == nil {
		return nil
	}
	return &st.play.made
}

// reserve reserves an id that no other work of the session takes.
func (m *madeUp) reserve(st *state, terminal bool) string {
	prefix := "call"
	if terminal {
		prefix = "term"
	}
	id := st.work.newID(prefix)
	if m.items == nil {
		m.items = make(map[string]*fake)
	}
	m.items[id] = &fake{terminal: terminal}
	m.order = append(m.order, id)
	return id
}

// add merges an update into the made-up item it is about, if any.
func (m *madeUp) add(u acp.Update) {
	switch u := u.(type) {
	case *acp.ToolCallUpdate:
		f := m.items[u.ToolCallID]
		if f == nil || f.terminal {
			return
		}
		c := &f.call
		c.SessionUpdate, c.ToolCallID = u.SessionUpdate, u.ToolCallID
		c.Title, c.Kind, c.Status = cmp.Or(u.Title, c.Title), cmp.Or(u.Kind, c.Kind), cmp.Or(u.Status, c.Status)
		if u.Content != nil {
			c.Content = u.Content
		}
		if u.Capabilities != nil {
			c.Capabilities = u.Capabilities
		}
	case *acp.TerminalUpdate:
		f := m.items[u.TerminalID]
		if f == nil || !f.terminal {
			return
		}
		t := &f.term
		t.SessionUpdate, t.TerminalID = u.SessionUpdate, u.TerminalID
		t.Command, t.Cwd = cmp.Or(u.Command, t.Command), cmp.Or(u.Cwd, t.Cwd)
		if u.ExitStatus != nil {
			t.ExitStatus = u.ExitStatus
		}
		if u.Capabilities != nil {
			t.Capabilities = u.Capabilities
		}
	}
}

// intercept makes the play take the cancels of id, telling ch of the
// first.
func (m *madeUp) intercept(id string, ch chan struct{}) {
	if m.intercepts == nil {
		m.intercepts = make(map[string]chan struct{})
	}
	m.intercepts[id] = ch
}

// owns reports whether id is something the play made up.
func (m *madeUp) owns(id string) bool { return m != nil && m.items[id] != nil }

// ownsCall reports whether id is a tool call the play made up.
func (m *madeUp) ownsCall(id string) bool { return m.owns(id) && !m.items[id].terminal }

// takes reports whether the play takes a cancel of id (of real work it
// started, or of what it made up), and tells the scenario the first time.
// Later cancels are taken and nothing more is said, until the work ends.
func (m *madeUp) takes(id string) bool {
	if m == nil {
		return false
	}
	ch, ok := m.intercepts[id]
	if !ok || m.items[id] != nil && m.items[id].final() {
		return false
	}
	if ch != nil {
		close(ch)
		m.intercepts[id] = nil
	}
	return true
}

// cancel serves tool_call/cancel of a tool call the play made up:
// accepted if the play takes it, else -32602 as for any tool call that
// cannot be cancelled.
func (m *madeUp) cancel(id string) (func(), error) {
	f := m.items[id]
	switch {
	case f.final():
		return nil, acp.InvalidParams("toolCallId: %s is already %s", id, f.call.Status)
	case m.takes(id):
		return func() {}, nil
	}
	return nil, acp.InvalidParams("toolCallId: %s is not cancellable (a scenario made it up)", id)
}

// current returns each made-up item as it is now, in order: for a client
// that resumes.
func (m *madeUp) current() []acp.Update {
	var out []acp.Update
	for _, id := range m.order {
		switch f := m.items[id]; {
		case f.terminal && f.term.TerminalID != "":
			u := f.term
			out = append(out, &u)
		case !f.terminal && f.call.ToolCallID != "":
			u := f.call
			out = append(out, &u)
		}
	}
	return out
}

// finals returns the final update of each made-up item that the client
// knows and that has not ended: cancelled for a tool call, exitStatus {}
// for a terminal.
func (m *madeUp) finals() []acp.Update {
	var out []acp.Update
	for _, id := range m.order {
		switch f := m.items[id]; {
		case f.final():
		case f.terminal && f.term.TerminalID != "":
			out = append(out, &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: id, ExitStatus: &acp.ExitStatus{}, Capabilities: acp.CapsNone})
		case !f.terminal && f.call.ToolCallID != "":
			out = append(out, &acp.ToolCallUpdate{
				SessionUpdate: acp.KindToolCall, ToolCallID: id, Status: acp.StatusCancelled, Capabilities: acp.CapsNone,
				Content: []acp.ToolCallContent{acp.TextContent("Cancelled: the scenario is over.")},
			})
		}
	}
	return out
}

// forget drops what the session told its client about cancelling the
// made-up items: they are over.
func (m *madeUp) forget(ads *cancelAds) {
	for _, id := range m.order {
		ads.drop(adKey{m.items[id].terminal, id})
	}
}
