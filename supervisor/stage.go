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
// The session's bookkeeping stays its own: the scenario's commands and
// wakeups are real work, registered as any other; what it makes up (tool
// calls and terminals with no work behind them, items of unknown type) is
// sent as crafted updates and never enters the registry. The play keeps
// what it made up, so that the session can send it to a client that
// resumes, take cancels of it, and finish it. When the script returns,
// finish stops whatever it left running, finalizes what it made up,
// unlists its probes, ends its foreground work if it still holds the
// foreground, and reports the list again.
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

	// Owned by the play's goroutine.
	mine  map[string]*run // its commands, by terminal id
	dir   string          // its gate files, once it has one
	gates int

	// Guarded by the session's mutex.
	turn       *turn                    // the foreground turn it holds, if it holds one
	began      chan struct{}            // closed when the turn that Begin asked for holds the foreground
	runs       []*run                   // its commands
	jobs       []*toolCall              // its wakeups
	fakes      map[string]*fake         // what it made up, by id
	fakeOrder  []string                 // the ids of fakes, in order
	asks       []func()                 // withdraw its permission requests
	intercepts map[string]chan struct{} // the ids whose cancels it takes
	sessCancel chan struct{}            // while it awaits a session/cancel
}

// run is a command a play started.
type run struct {
	term    *terminal       // guarded by the session's mutex
	id      string          // its terminal
	call    string          // its tool call
	ring    *outputbuf.Ring // its output
	ended   chan struct{}   // closed once its exitStatus is sent
	snapped chan struct{}   // told of each copy of its output a replacement takes
	gate    string          // the file Open creates, if it is gated
}

// fake is a tool call or terminal a scenario made up: the sum of the
// updates it sent for it.
type fake struct {
	terminal bool
	call     acp.ToolCallUpdate
	term     acp.TerminalUpdate
	final    bool // its final status, or its exitStatus, was sent
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
func (st *state) startScenario(t *turn) {
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
	p := &play{
		s: st.s, sc: sc, hold: t.in.delay, ctx: ctx, abort: abort,
		mine: make(map[string]*run), fakes: make(map[string]*fake), intercepts: make(map[string]chan struct{}),
	}
	st.play, t.play, p.turn = p, p, t
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

// mark is the _meta of the state_updates a scenario bends a rule with.
func (p *play) mark() map[string]any {
	return map[string]any{"shellagent": map[string]any{"scenario": p.sc.Name}}
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
func (p *play) over() error {
	if err := context.Cause(p.ctx); err != nil {
		return err
	}
	return scenario.ErrClosed
}

// wait waits for ch for at most stageWait, or until the play ends.
func (p *play) wait(ch <-chan struct{}, what string) error {
	t := time.NewTimer(stageWait)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-p.ctx.Done():
		return p.over()
	case <-t.C:
		return fmt.Errorf("scenario %s: %s: not within %s", p.sc.Name, what, stageWait)
	}
}

// poll calls cond every stagePoll until it holds, for at most stageWait.
func (p *play) poll(what string, cond func() bool) error {
	deadline := time.Now().Add(stageWait)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("scenario %s: %s: not within %s", p.sc.Name, what, stageWait)
		}
		t := time.NewTimer(stagePoll)
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return p.over()
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
	p.enter(func(st *state) { p.send(st, u) })
}

func (p *play) send(st *state, u acp.Update) {
	switch u := u.(type) {
	case *acp.TerminalUpdate:
		if t := st.work.terminals[u.TerminalID]; t != nil {
			st.out.sendTerminal(t, u, protocol.StreamOutput)
			return
		}
		if f := p.fakes[u.TerminalID]; f != nil {
			f.add(u)
		}
	case *acp.ToolCallUpdate:
		if c := st.work.calls[u.ToolCallID]; c != nil && u.Capabilities != nil {
			c.caps = u.Capabilities
		}
		if f := p.fakes[u.ToolCallID]; f != nil {
			f.add(u)
			if f.final {
				delete(p.intercepts, u.ToolCallID)
			}
		}
	}
	st.out.send(u)
}

// add merges an update into what the fake is.
func (f *fake) add(u acp.Update) {
	switch u := u.(type) {
	case *acp.ToolCallUpdate:
		c := &f.call
		c.SessionUpdate, c.ToolCallID = u.SessionUpdate, u.ToolCallID
		c.Title, c.Kind, c.Status = cmp.Or(u.Title, c.Title), cmp.Or(u.Kind, c.Kind), cmp.Or(u.Status, c.Status)
		if u.Content != nil {
			c.Content = u.Content
		}
		if u.Capabilities != nil {
			c.Capabilities = u.Capabilities
		}
		f.final = c.Status == acp.StatusCompleted || c.Status == acp.StatusFailed || c.Status == acp.StatusCancelled
	case *acp.TerminalUpdate:
		t := &f.term
		t.SessionUpdate, t.TerminalID = u.SessionUpdate, u.TerminalID
		t.Command, t.Cwd = cmp.Or(u.Command, t.Command), cmp.Or(u.Cwd, t.Cwd)
		if u.ExitStatus != nil {
			t.ExitStatus = u.ExitStatus
		}
		if u.Capabilities != nil {
			t.Capabilities = u.Capabilities
		}
		f.final = t.ExitStatus != nil
	}
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
			meta = p.mark()
		}
		if s.Unreported || s.Raw != nil {
			meta = p.mark()
		}
		st.reportCrafted(s.State, s.StopReason, s.Unreported, s.Raw, meta)
	})
}

// List implements scenario.Stage.
func (p *play) List(items ...acp.BackgroundItem) {
	p.enter(func(st *state) { st.list.setProbes(items) })
}

// ToolCallID implements scenario.Stage.
func (p *play) ToolCallID() string { return p.newFake(false) }

// TerminalID implements scenario.Stage.
func (p *play) TerminalID() string { return p.newFake(true) }

func (p *play) newFake(terminal bool) (id string) {
	p.enter(func(st *state) {
		prefix := "call"
		if terminal {
			prefix = "term"
		}
		id = st.work.newID(prefix)
		p.fakes[id] = &fake{terminal: terminal}
		p.fakeOrder = append(p.fakeOrder, id)
	})
	return id
}

// Intercept implements scenario.Stage.
func (p *play) Intercept(id string) <-chan struct{} {
	ch := make(chan struct{})
	p.enter(func(st *state) { p.intercepts[id] = ch })
	return ch
}

// SessionCancel implements scenario.Stage.
func (p *play) SessionCancel() <-chan struct{} {
	ch := make(chan struct{})
	p.enter(func(*state) { p.sessCancel = ch })
	return ch
}

// Run implements scenario.Stage.
func (p *play) Run(line string, how scenario.How) (scenario.Work, error) {
	r := &run{ended: make(chan struct{}), snapped: make(chan struct{}, 1)}
	opts := launchOptions{snapped: r.snapped}
	if how.Gated {
		gate, err := p.gate()
		if err != nil {
			return scenario.Work{}, err
		}
		r.gate = gate
		opts.env = []string{"SHELLAGENT_GATE=" + gate}
	}
	started := make(chan bool, 1)
	if !p.enter(func(st *state) {
		call := st.newCall(callRunning, "execute", line)
		st.launchWith(call, line, opts, func(t *terminal) {
			if t == nil {
				started <- false
				return
			}
			r.term, r.id, r.call, r.ring = t, t.id, call.id, t.ring
			t.ended = r.ended
			p.runs = append(p.runs, r)
			switch {
			case how.Background && how.Codex:
				call.content = append(call.content, acp.TextContent("It stays in_progress until the command ends, as Codex's command items do; its terminal, "+t.id+", is what runs in the background."))
				st.out.send(&acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: call.id, Content: call.content})
				st.list.addTerminal(t)
			case how.Background:
				st.handOff(t, "Started in the background by /scenario "+p.sc.Name+".")
			}
			started <- true
		})
	}) {
		return scenario.Work{}, p.over()
	}
	if !<-started {
		return scenario.Work{}, fmt.Errorf("scenario %s: %s could not start", p.sc.Name, line)
	}
	p.mine[r.id] = r
	return scenario.Work{Terminal: r.id, ToolCall: r.call}, nil
}

// gate returns the path of a new gate file, in the play's directory.
func (p *play) gate() (string, error) {
	if p.dir == "" {
		dir, err := os.MkdirTemp("", "shellagent-scenario-")
		if err != nil {
			return "", fmt.Errorf("scenario %s: %w", p.sc.Name, err)
		}
		p.dir = dir
	}
	p.gates++
	return filepath.Join(p.dir, fmt.Sprintf("gate-%d", p.gates)), nil
}

// Open implements scenario.Stage.
func (p *play) Open(w scenario.Work) {
	if r := p.mine[w.Terminal]; r != nil && r.gate != "" {
		if err := os.WriteFile(r.gate, nil, 0o600); err != nil {
			p.s.sv.cfg.Log.Warn("scenario gate", "scenario", p.sc.Name, "err", err)
		}
	}
}

// WaitOutput implements scenario.Stage: it waits until the ring holds
// text and every follower that holds it (the writer of a connection that
// keeps up) has taken it, so that what the scenario sends next goes out
// after it.
func (p *play) WaitOutput(w scenario.Work, text string) error {
	r := p.mine[w.Terminal]
	if r == nil {
		return fmt.Errorf("scenario %s: no command of it runs in %s", p.sc.Name, w.Terminal)
	}
	return p.poll("output "+text+" of "+r.id, func() bool {
		data, end := r.ring.Snapshot()
		i := strings.Index(string(data), text)
		if i < 0 {
			return false
		}
		taken, followed := r.ring.Taken()
		return !followed || taken >= end-int64(len(data))+int64(i+len(text))
	})
}

// WaitExit implements scenario.Stage.
func (p *play) WaitExit(w scenario.Work) error {
	r := p.mine[w.Terminal]
	if r == nil {
		return fmt.Errorf("scenario %s: no command of it runs in %s", p.sc.Name, w.Terminal)
	}
	return p.wait(r.ended, "the exit of "+r.id)
}

// Replace implements scenario.Stage.
func (p *play) Replace(w scenario.Work) error {
	r := p.mine[w.Terminal]
	if r == nil {
		return fmt.Errorf("scenario %s: no command of it runs in %s", p.sc.Name, w.Terminal)
	}
	select {
	case <-r.snapped: // an earlier copy
	default:
	}
	attached := false
	if !p.enter(func(st *state) {
		if r.term.state < termExited && st.out.client != nil {
			attached = true
			st.out.sendTerminal(r.term, r.term.announcement(), protocol.ReplaceOutput)
		}
	}) {
		return p.over()
	}
	if !attached {
		return nil
	}
	return p.wait(r.snapped, "the replacement of "+r.id)
}

// Stop implements scenario.Stage.
func (p *play) Stop(w scenario.Work) {
	p.enter(func(st *state) {
		if r := p.mine[w.Terminal]; r != nil && r.term.state == termRunning {
			r.term.stop(min(st.settings.killGrace, stageGrace))
		}
	})
}

// Schedule implements scenario.Stage.
func (p *play) Schedule(line string) (id string) {
	p.enter(func(st *state) {
		c := st.schedule(input{kind: afterWork, delay: time.Hour, line: line})
		p.jobs = append(p.jobs, c)
		id = c.id
	})
	return id
}

// Fire implements scenario.Stage.
func (p *play) Fire(id string) {
	p.enter(func(st *state) {
		if c := st.work.calls[id]; c != nil && c.job != nil {
			c.job.timer.Stop()
			st.fire(c.job)
		}
	})
}

// Unschedule implements scenario.Stage.
func (p *play) Unschedule(id string) {
	p.enter(func(st *state) {
		if c := st.work.calls[id]; c != nil && c.job != nil {
			st.cancelJob(c.job)
		}
	})
}

// Ask implements scenario.Stage. The request's subject names the
// session's working directory. Withdrawing it returns once the
// $/cancel_request is queued (or the request was answered), so that what
// the scenario sends next goes out after it.
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
		reply(scenario.Answer{Err: p.over()})
	}
	return answer, withdraw
}

// Begin implements scenario.Stage.
func (p *play) Begin() error {
	var began chan struct{}
	if !p.enter(func(st *state) {
		began = make(chan struct{})
		p.began = began
		t := &turn{in: input{kind: scenarioTurn}, play: p}
		if st.turns.busy() || st.turns.waiting() {
			st.turns.hold(t)
			return
		}
		st.start(t)
	}) {
		return p.over()
	}
	return p.wait(began, "the foreground")
}

// begin gives the turn that Begin asked for the foreground: it reports
// running, with the scenario's mark.
func (p *play) begin(st *state, t *turn) {
	st.turns.take(t, turnScenario)
	p.turn = t
	st.mark = p.mark()
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
	return p.poll("the end of foreground work", func() bool {
		idle := false
		p.s.peek(func(st *state) { idle = !st.turns.busy() && !st.turns.waiting() && st.fgState == acp.StateIdle })
		return idle
	})
}

// cancelTurn serves a session/cancel of the scenario's turn: the cancel it
// awaits, or the end of the scenario.
func (p *play) cancelTurn() {
	if p.sessCancel != nil {
		close(p.sessCancel)
		p.sessCancel = nil
		return
	}
	p.abort(scenario.ErrCancelled)
}

// owns reports whether id is something the play made up. p may be nil.
func (p *play) owns(id string) bool { return p != nil && p.fakes[id] != nil }

// ownsCall reports whether id is a tool call the play made up. p may be
// nil.
func (p *play) ownsCall(id string) bool { return p.owns(id) && !p.fakes[id].terminal }

// takes reports whether the play takes a cancel of id, and then tells the
// scenario (the first time). p may be nil.
func (p *play) takes(id string) bool {
	if p == nil {
		return false
	}
	ch, ok := p.intercepts[id]
	if !ok {
		return false
	}
	if ch != nil {
		close(ch)
		p.intercepts[id] = nil // later cancels are taken, and nothing more said
	}
	return true
}

// cancelMadeUp serves tool_call/cancel of a tool call the play made up:
// accepted if it takes it, else -32602 as for any tool call that cannot
// be cancelled.
func (p *play) cancelMadeUp(id string) (func(), error) {
	f := p.fakes[id]
	switch {
	case f.final:
		return nil, acp.InvalidParams("toolCallId: %s is already %s", id, f.call.Status)
	case p.takes(id):
		return func() {}, nil
	}
	return nil, acp.InvalidParams("toolCallId: %s is not cancellable (a scenario made it up)", id)
}

// sendCurrent brings a client that resumes up to date on what the play
// runs in the foreground and what it made up. p may be nil.
func (p *play) sendCurrent(st *state, delivered map[any]bool) {
	if p == nil {
		return
	}
	for _, r := range p.runs {
		if r.term.state < termExited && !st.turns.foreground(r.term) && !slices.Contains(st.list.items, listItem{term: r.term}) {
			st.out.sendCurrent(delivered, r.term.call, r.term)
		}
	}
	for _, id := range p.fakeOrder {
		switch f := p.fakes[id]; {
		case f.terminal && f.term.TerminalID != "":
			u := f.term
			st.out.send(&u)
		case !f.terminal && f.call.ToolCallID != "":
			u := f.call
			st.out.send(&u)
		}
	}
}

// finish ends the play once its script has returned: it stops the
// commands the script left running and waits for their exit, withdraws
// its permission requests, cancels its wakeups, finalizes what it made
// up, unlists its probes, says it is over, and ends its foreground work
// or reports the list again. After a close it only lets go.
func (p *play) finish(err error) {
	defer func() {
		if p.dir != "" {
			_ = os.RemoveAll(p.dir) // Best effort: a temporary directory of gate files.
		}
	}()
	closed := errors.Is(context.Cause(p.ctx), scenario.ErrClosed)
	cancelled := errors.Is(context.Cause(p.ctx), scenario.ErrCancelled)
	if !closed {
		p.stopAll()
		// A close leaves open requests for listed work to the client to
		// answer (RFD): only a play that ends otherwise withdraws them.
		var asks []func()
		p.s.doWait(func(*state) { asks = p.asks })
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
		for _, c := range p.jobs {
			if c.job != nil {
				st.turns.drop(func(t *turn) bool { return t.job == c.job })
				st.cancelJob(c.job)
			}
		}
		p.finishFakes(st)
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

// stopAll stops the play's commands that still run and waits for them
// to exit.
func (p *play) stopAll() {
	var ended []chan struct{}
	p.s.doWait(func(st *state) {
		for _, r := range p.runs {
			if r.term.state == termRunning {
				r.term.stop(min(st.settings.killGrace, stageGrace))
			}
			if r.term.state < termExited {
				ended = append(ended, r.ended)
			}
		}
	})
	t := time.NewTimer(stageWait)
	defer t.Stop()
	for _, ch := range ended {
		select {
		case <-ch:
		case <-t.C:
			return // reported by the final snapshot, which still lists it
		}
	}
}

// finishFakes sends the final update of each item the play made up and
// did not finish: cancelled for a tool call, exitStatus {} for a terminal.
func (p *play) finishFakes(st *state) {
	for _, id := range p.fakeOrder {
		f := p.fakes[id]
		switch {
		case f.final:
		case f.terminal && f.term.TerminalID != "":
			p.send(st, &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: id, ExitStatus: &acp.ExitStatus{}, Capabilities: acp.CapsNone})
		case !f.terminal && f.call.ToolCallID != "":
			p.send(st, &acp.ToolCallUpdate{
				SessionUpdate: acp.KindToolCall, ToolCallID: id, Status: acp.StatusCancelled, Capabilities: acp.CapsNone,
				Content: []acp.ToolCallContent{acp.TextContent("Cancelled: the scenario is over.")},
			})
		}
		st.out.ads.drop(adKey{f.terminal, id})
	}
}
