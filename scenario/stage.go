package scenario

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/supervisor/kit"
)

// Kit is the client developers' kit as a session serves it (a kit.Kit:
// supervisor.Config.Kit): /scenario alone lists the scenarios, and
// /scenario NAME [HOLD] plays one in the session.
type Kit struct {
	// Invalid lets /scenario play the scenarios that send a message the
	// schema forbids (--scenarios-invalid).
	Invalid bool
	// Log is where a play logs what goes wrong on its side (a gate it
	// cannot open); nil is slog.Default().
	Log *slog.Logger
}

var _ kit.Kit = Kit{}

// Listing implements kit.Kit.
func (k Kit) Listing(v1 bool) string { return Listing(v1, k.Invalid) }

// parse reads /scenario's arguments: a scenario's name and an optional
// hold. It returns the problem, and whether to add how to write it, if
// they are written wrong.
func parse(args string) (sc *Scenario, hold time.Duration, problem string, usage bool) {
	fields := strings.Fields(args)
	if len(fields) > 2 {
		return nil, 0, "/scenario takes a name and at most a hold", true
	}
	sc = Lookup(fields[0])
	if sc == nil {
		return nil, 0, fmt.Sprintf("No scenario %q: /scenario alone lists them.", fields[0]), false
	}
	hold = DefaultHold
	if len(fields) == 2 {
		d, err := time.ParseDuration(fields[1])
		if err != nil || d < 0 || d > MaxHold {
			return nil, 0, fmt.Sprintf("/scenario: %q is not a hold from 0 to %s", fields[1], MaxHold), true
		}
		hold = d
	}
	return sc, hold, "", false
}

// Play implements kit.Kit: it plays the scenario that args name,
// holding the turn of /scenario, says what comes, and plays on a
// goroutine of its own. A scenario it cannot play here ends the turn at
// once, saying why.
func (k Kit) Play(stage *kit.Scene, args string) {
	sc, hold, problem, usage := parse(args)
	if problem != "" {
		stage.Refuse(problem, usage)
		return
	}
	refuse := ""
	switch {
	case stage.Overlay() != nil:
		refuse = fmt.Sprintf("Scenario %s is still playing; /scenario %s can play once it is over.", stage.Overlay().(*playOverlay).sc.Name, sc.Name)
	case sc.Invalid && !k.Invalid:
		refuse = fmt.Sprintf("Scenario %s sends a message that the schema forbids; it plays only when shellagent runs with --scenarios-invalid.", sc.Name)
	case stage.V1() && !sc.V1:
		refuse = fmt.Sprintf("Scenario %s shows a v2 only rule (%s): ACP v1 has nothing that it could show, so it plays nothing here.", sc.Name, sc.Source)
	}
	if refuse != "" {
		stage.Refuse(refuse, false)
		return
	}
	ctx, abort := context.WithCancelCause(context.Background())
	p := &play{s: stage.Session(), sc: sc, hold: hold, ctx: ctx, abort: abort, log: k.Log}
	if p.log == nil {
		p.log = slog.Default()
	}
	stage.Lay((*playOverlay)(p))
	stage.Hold((*playTurn)(p))
	stage.Say(sc.Intro())
	go p.run()
}

// A play is a scenario playing in its session (/scenario NAME): the
// Stage the session gives it. The scenario's script runs on a goroutine
// of its own and enters the session through kit.Session.Do, one
// Stage call at a time, like any other way in.
//
// The session's bookkeeping stays its own: the scenario's commands,
// wakeups and watches are real work, registered as any other; what it
// makes up (tool calls and terminals with no work behind them, items of
// unknown type) is sent as crafted updates and never enters the
// registry. The play keeps what it made up (madeUp) and what it lists
// beside the session's work (probes); it is the session's
// kit.Overlay, through which the session lists the probes, lets
// the play take cancels, sends what it made up to a client that resumes,
// and tells it of the close. When the script returns, finish stops
// whatever it left running, finalizes what it made up, unlists its
// probes, ends its foreground work if it still holds the foreground, and
// reports the list again.
//
// A session/cancel of the scenario's foreground turn stops the scenario
// (its Context ends with ErrCancelled), unless the scenario awaits that
// cancel (SessionCancel). A close stops it too (ErrClosed); the close
// stops its real work as any other, and what it made up is left as it
// is, unfinished, as a close may leave listed work.
type play struct {
	s     kit.Session
	sc    *Scenario
	hold  time.Duration
	ctx   context.Context
	abort context.CancelCauseFunc
	log   *slog.Logger
	dir   gateDir // owned by the play's goroutine

	// Owned by the session's actor.
	began      chan struct{} // closed when the turn that Begin asked for holds the foreground
	runs       []*run        // its commands
	calls      []kit.Call    // its wakeups and watches
	made       madeUp
	probes     []acp.BackgroundItem // what it lists beside the session's work (List)
	asks       []func()             // withdraw its permission requests
	sessCancel chan struct{}        // while it awaits a session/cancel
}

var (
	_ Stage          = (*play)(nil)
	_ kit.Overlay    = (*playOverlay)(nil)
	_ kit.Foreground = (*playTurn)(nil)
)

// How long the Stage waits for what it waits on before it gives up, and
// how often it looks.
const (
	stageWait = 30 * time.Second
	stagePoll = 20 * time.Millisecond
	// stageGrace is the longest kill grace a scenario's stop uses.
	stageGrace = time.Second
)

// run plays the script, then finishes.
func (p *play) run() {
	err := p.sc.Play(p)
	p.finish(err)
}

// mark is the _meta of the state_updates with which the scenario bends a
// rule on purpose.
func (p *play) mark() map[string]any {
	return map[string]any{"shellagent": map[string]any{"scenario": p.sc.Name}}
}

// fg is the play as the foreground work of its turns.
func (p *play) fg() *playTurn { return (*playTurn)(p) }

// enter runs f on the session's actor and waits for it, unless the play
// is over or the session no longer open; it reports whether f ran.
func (p *play) enter(f func(sc *kit.Scene)) bool {
	if p.ctx.Err() != nil {
		return false
	}
	ran := false
	p.s.Do(func(sc *kit.Scene) {
		if p.ctx.Err() != nil || !sc.Open() {
			return
		}
		ran = true
		f(sc)
	})
	return ran
}

// over is the error of a Stage call that the end of the play cut short.
func over(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return ErrClosed
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

// Context implements Stage.
func (p *play) Context() context.Context { return p.ctx }

// Say implements Stage.
func (p *play) Say(text string) {
	p.enter(func(sc *kit.Scene) { sc.Say(text) })
}

// Hold implements Stage.
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

// HoldTime implements Stage.
func (p *play) HoldTime() time.Duration { return p.hold }

// Send implements Stage. An update of a made-up item is added to what the
// play keeps of it (madeUp.send); one of a real terminal goes with its
// output stream; one of a real tool call's capabilities is what the
// session last reported of them from now on.
func (p *play) Send(u acp.Update) {
	p.enter(func(sc *kit.Scene) { p.made.send(sc, u) })
}

// Report implements Stage.
func (p *play) Report(s Snapshot) {
	p.enter(func(sc *kit.Scene) {
		var meta map[string]any
		switch s.State {
		case acp.StateRunning, acp.StateIdle, acp.StateRequiresAction, "":
		default:
			meta = p.mark()
		}
		if s.Unreported || s.Raw != nil {
			meta = p.mark()
		}
		sc.Report(s.Update(sc.Snapshot(s.State, s.StopReason, meta)))
	})
}

// List implements Stage.
func (p *play) List(items ...acp.BackgroundItem) {
	p.enter(func(sc *kit.Scene) { p.list(sc, items) })
}

// list replaces what the play lists; a change is re-sent as any change
// of the list is.
func (p *play) list(sc *kit.Scene, items []acp.BackgroundItem) {
	if len(items) == 0 && len(p.probes) == 0 {
		return
	}
	p.probes = items
	sc.Relist()
}

// playOverlay is the play as its session's overlay.
type playOverlay play

// Listed implements kit.Overlay.
func (o *playOverlay) Listed() []acp.BackgroundItem { return o.probes }

// Cancel implements kit.Overlay: the play takes the cancels it
// intercepts of its running commands, and answers those of what it made
// up and has not ended (the session answers those of what ended).
func (o *playOverlay) Cancel(terminal bool, id string, running bool) (bool, error) {
	m := &o.made
	f := m.items[id]
	switch {
	case running:
		return m.takes(id), nil
	case f == nil || f.terminal != terminal || f.final():
		return false, nil
	case terminal:
		return true, acp.InvalidParams("terminalId: %s is not cancellable (a scenario made it up)", id)
	}
	return true, m.cancel(id)
}

// Closing implements kit.Overlay: a close stops the script; what
// it made up stays as it is.
func (o *playOverlay) Closing() { (*play)(o).abort(ErrClosed) }

// Resumed implements kit.Overlay: it brings a client that resumes
// up to date on what the play runs in the foreground and what it made up.
func (o *playOverlay) Resumed(sc *kit.Scene) {
	for _, r := range o.runs {
		sc.Current(r.cmd)
	}
	for _, u := range o.made.current() {
		sc.Send(u)
	}
}

// ToolCallID implements Stage.
func (p *play) ToolCallID() (id string) {
	p.enter(func(sc *kit.Scene) { id = p.made.reserve(sc, false) })
	return id
}

// TerminalID implements Stage.
func (p *play) TerminalID() (id string) {
	p.enter(func(sc *kit.Scene) { id = p.made.reserve(sc, true) })
	return id
}

// Intercept implements Stage.
func (p *play) Intercept(id string) <-chan struct{} {
	ch := make(chan struct{})
	p.enter(func(*kit.Scene) { p.made.intercept(id, ch) })
	return ch
}

// SessionCancel implements Stage.
func (p *play) SessionCancel() <-chan struct{} {
	ch := make(chan struct{})
	p.enter(func(*kit.Scene) { p.sessCancel = ch })
	return ch
}

// Run implements Stage.
func (p *play) Run(line string, how How) (Command, error) {
	r := &run{p: p, snapped: make(chan struct{}, 1)}
	l := kit.Launch{Source: func(ring *outputbuf.Ring) protocol.OutputSource { return snapOutput{ring, r.snapped} }}
	switch {
	case how.Background && how.Codex:
		l.Listed = true // its tool call says so with its terminal (Note)
		l.Note = func(term string) string {
			return "It stays in_progress until the command ends, as Codex's command items do; its terminal, " + term + ", is what runs in the background."
		}
	case how.Background:
		l.HandOff = "Started in the background by /scenario " + p.sc.Name + "."
	}
	if how.Gated {
		gate, err := p.dir.file()
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", p.sc.Name, err)
		}
		r.gate = gate
		l.Env = []string{"SHELLAGENT_GATE=" + gate}
	}
	started := false
	if !p.enter(func(sc *kit.Scene) {
		r.cmd, started = sc.Run(line, l)
		if started {
			p.runs = append(p.runs, r)
		}
	}) {
		return nil, over(p.ctx)
	}
	if !started {
		return nil, fmt.Errorf("scenario %s: %s could not start", p.sc.Name, line)
	}
	return r, nil
}

// Schedule implements Stage.
func (p *play) Schedule(line string) (ToolCall, error) {
	var c kit.Call
	if !p.enter(func(sc *kit.Scene) {
		c = sc.Schedule(line, time.Hour)
		p.calls = append(p.calls, c)
	}) {
		return nil, over(p.ctx)
	}
	return realCall{p, c}, nil
}

// Watch implements Stage: a watch of the play's own directory, in which
// nothing changes.
func (p *play) Watch(line string) (ToolCall, error) {
	dir, err := p.dir.path()
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", p.sc.Name, err)
	}
	var c kit.Call
	started := false
	if !p.enter(func(sc *kit.Scene) {
		if c, started = sc.Watch(dir, line); started {
			p.calls = append(p.calls, c)
		}
	}) {
		return nil, over(p.ctx)
	}
	if !started {
		return nil, fmt.Errorf("scenario %s: the watch of %s did not start", p.sc.Name, dir)
	}
	return realCall{p, c}, nil
}

// Ask implements Stage. The request's subject names the session's
// working directory.
func (p *play) Ask(req *acp.PermissionRequest) (<-chan Answer, func()) {
	answer := make(chan Answer, 1)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	reply := func(a Answer) {
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
	if !p.enter(func(sc *kit.Scene) {
		p.asks = append(p.asks, withdraw)
		asked := sc.Ask(ctx, req, func(resp *acp.PermissionResponse, err error) {
			if err != nil {
				reply(Answer{Err: err})
				return
			}
			reply(Answer{Outcome: resp.Outcome.Outcome, OptionID: resp.Outcome.OptionID})
		})
		if !asked {
			reply(Answer{Err: errors.New("no client is attached")})
		}
	}) {
		cancel()
		reply(Answer{Err: over(p.ctx)})
	}
	return answer, withdraw
}

// Begin implements Stage.
func (p *play) Begin() error {
	var began chan struct{}
	if !p.enter(func(sc *kit.Scene) {
		began = make(chan struct{})
		p.began = began
		sc.Begin(p.fg())
	}) {
		return over(p.ctx)
	}
	return waitFor(p.ctx, began, "the foreground")
}

// End implements Stage.
func (p *play) End(stopReason string, failure *acp.Error) {
	p.enter(func(sc *kit.Scene) { sc.End(p.fg(), stopReason, failure) })
}

// Idle implements Stage.
func (p *play) Idle() error {
	return pollUntil(p.ctx, "the end of foreground work", p.s.Idle)
}

// playTurn is the play as the foreground work of its turns.
type playTurn play

// Began implements kit.Foreground: the foreground work that Begin
// asked for reports running, with the scenario's mark.
func (pt *playTurn) Began(sc *kit.Scene) {
	sc.Running((*play)(pt).mark())
	if pt.began != nil {
		close(pt.began)
		pt.began = nil
	}
}

// Dropped implements kit.Foreground: its foreground work will not
// come.
func (pt *playTurn) Dropped() { pt.abort(ErrCancelled) }

// CancelTurn implements kit.Foreground: session/cancel of the
// scenario's turn is the cancel it awaits, or the end of the scenario.
func (pt *playTurn) CancelTurn(*kit.Scene) {
	if pt.sessCancel != nil {
		close(pt.sessCancel)
		pt.sessCancel = nil
		return
	}
	pt.abort(ErrCancelled)
}

// finish ends the play once its script has returned: it stops the
// commands the script left running and waits for their exit, withdraws
// its permission requests, cancels its wakeups and watches, finalizes
// what it made up, unlists its probes, says it is over, and ends its
// foreground work or reports the list again. After a close it only lets
// go.
func (p *play) finish(err error) {
	defer p.dir.remove()
	closed := errors.Is(context.Cause(p.ctx), ErrClosed)
	cancelled := errors.Is(context.Cause(p.ctx), ErrCancelled)
	if !closed {
		var left []*run
		var asks []func()
		p.s.Do(func(sc *kit.Scene) {
			for _, r := range p.runs {
				r.cmd.Stop(stageGrace)
				if !r.cmd.Exited() {
					left = append(left, r)
				}
			}
			asks = p.asks
		})
		// One that does not exit in time is still listed in the final
		// snapshot.
		_ = pollUntil(context.Background(), "the exits", func() bool {
			for _, r := range left {
				if !r.exited() {
					return false
				}
			}
			return true
		})
		// A close leaves open requests for listed work to the client to
		// answer (RFD): only a play that ends otherwise withdraws them.
		for _, withdraw := range asks {
			withdraw()
		}
	}
	p.s.Do(func(sc *kit.Scene) {
		p.abort(ErrClosed) // nothing of the script enters any more
		if closed || !sc.Open() {
			return // the overlay stays: what it lists stays listed, as a close leaves listed work
		}
		defer sc.Lay(nil)
		for _, c := range p.calls {
			c.Cancel()
		}
		for _, u := range p.made.finals() {
			p.made.send(sc, u)
		}
		p.list(sc, nil)
		if err != nil && !cancelled && !errors.Is(err, ErrClosed) {
			sc.Say(fmt.Sprintf("Scenario %s stopped early: %v.", p.sc.Name, err))
		}
		sc.Say(p.sc.Outro())
		if sc.Holds(p.fg()) {
			stop := acp.StopEndTurn
			if cancelled {
				stop = acp.StopCancelled
			}
			sc.End(p.fg(), stop, nil)
			return
		}
		sc.ReportState()
	})
}
