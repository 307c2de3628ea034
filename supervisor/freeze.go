package supervisor

import (
	"context"
	"fmt"
	"os"
	"time"

	"shellagent/acp"
	"shellagent/ptyio"
	"shellagent/supervisor/handover"
	"shellagent/supervisor/work"
)

// An upgrade in place (daemon.Host): the Supervisor hands its sessions,
// their terminals' processes, PTYs and rings to the next image of the
// daemon, the same process after an exec, in the format of package
// handover (whose doc says what is handed over, and what ends). Freeze
// (this file) ends the tries of ready probes in flight (probes.go), stops
// every session's actor inside an entry that holds it until thaw, ends
// what is not handed over (endForUpgrade), and writes what its state
// holds; Restore (thaw.go) builds the sessions again in
// the new image, detached.

// Precheck implements daemon.Prechecker: it refuses, naming the work and
// its session, while a session holds work that cannot be handed over.
// Work that ends by itself within a kill grace (a session closing, a
// service that /down or /restart is stopping) is waited for, at most the
// longest kill grace and five seconds, before it refuses.
func (sv *Supervisor) Precheck() error {
	return handover.Await(func() (blocked *handover.Blocked, grace time.Duration) {
		for _, s := range sv.live.list() {
			s.doWait(func(st *state) {
				if st.life != sessionClosed {
					blocked = st.blocked()
					grace = max(grace, st.settings.KillGrace)
				}
			})
			if blocked != nil {
				break
			}
		}
		return blocked, grace
	})
}

// blocked names the work of the session that an upgrade cannot hand
// over, or is nil.
func (st *state) blocked() *handover.Blocked {
	var refuse, wait []string
	if st.life != sessionOpen {
		wait = append(wait, "it is closing")
	}
	if st.kit.overlay != nil || st.turns.fg != nil && st.turns.fg.state == turnScenario {
		refuse = append(refuse, "a scenario plays (the kit's scenarios are not handed over; let it end, or cancel it)")
	}
	if st.stack != nil {
		for _, name := range st.stack.Names() {
			if svc := st.stack.Service(name); svc.Info().Draining {
				wait = append(wait, "service "+name+", being stopped by /down or /restart")
			}
		}
	}
	for _, t := range st.work.liveTerminals() {
		if _, ok := t.proc.(ptyio.Freezer); !ok {
			refuse = append(refuse, "terminal "+t.id+", whose launcher cannot hand it over")
		}
	}
	if len(refuse)+len(wait) == 0 {
		return nil
	}
	return &handover.Blocked{Session: st.s.id, Cwd: st.s.cwd, Refuse: refuse, Wait: wait}
}

// endForUpgrade ends the session's work that is not handed over, as the
// end of its connection would (package handover says what): what is left
// is background work. A firing of a job or a watch that waited for the
// foreground starts once it is free, and moves to the background too.
func (st *state) endForUpgrade() {
	st.turns.dropHeld(func(t *turn) bool { return t.reply != nil }, "the daemon was upgraded in place before it was inserted")
	askers(st, func(a work.Asker) { a.Unanswered(handover.ErrUpgraded) })
	for range maxMoves {
		fg := st.turns.fg
		switch {
		case fg == nil:
			return
		case fg.state == turnAsking:
			taskOf(fg.call).(work.Asker).Unanswered(handover.ErrUpgraded) // Safe: the turn asks for permission.
		case fg.term != nil && fg.term.state == termRunning && fg.state == turnRunning: // a command that runs
			st.detach("Moved to the background by the daemon's upgrade in place.")
		case fg.term != nil && fg.term.state < termExited: // a command being stopped: the new image goes on stopping it
			stop := acp.StopEndTurn
			if fg.state == turnCancelling {
				stop = acp.StopCancelled
			}
			st.turns.release(fg)
			st.handOff(fg.term, "The daemon was upgraded in place while it was being stopped.")
			st.endTurn(stop)
		default:
			fg.fore.toBackground(st, fg)
		}
	}
}

// maxMoves bounds how many foreground turns endForUpgrade moves to the
// background: the one that runs and the firings held behind it.
const maxMoves = 64

// Freeze implements daemon.Host: see the top of this file. The tries of
// ready probes in flight are ended first, and their groups released
// (probes.hold): none is handed over. The files are the terminals'
// output, then each live terminal's PTY master and process handle, which
// stay the terminal's; thaw lets every session act again, and the probes
// try again.
func (sv *Supervisor) Freeze(ctx context.Context) (data []byte, files []*os.File, thaw func(), err error) {
	// The history on disk is made complete twice: here, fsynced, before
	// anything stops; in the hold, written but not fsynced (the new image
	// fsyncs what it reopens), so that the hold waits for little.
	store := sv.cfg.History
	if store != nil {
		if err := store.Flush(); err != nil {
			return nil, nil, nil, fmt.Errorf("freeze the sessions: write their history: %w", err)
		}
	}
	// A try of a ready probe in flight is no terminal: it is not handed
	// over, and is ended before anything else stops (probes.go).
	if err := sv.probes.hold(ctx); err != nil {
		sv.probes.release()
		return nil, nil, nil, fmt.Errorf("freeze the sessions: %w", err)
	}
	w, err := handover.NewWriter(sv.live.marks())
	if err != nil {
		sv.probes.release()
		return nil, nil, nil, fmt.Errorf("freeze the sessions: %w", err)
	}
	thaw = func() {
		w.Thaw()
		sv.probes.release()
	}
	for _, s := range sv.live.list() {
		freeze := func(st *state) (*handover.Session, error) { return st.freeze(ctx, w) }
		if err := handover.Hold(ctx, w, s.id, s.do, freeze); err != nil {
			thaw()
			return nil, nil, nil, err
		}
	}
	if data, files, err = w.Encode(store); err != nil {
		thaw()
		return nil, nil, nil, fmt.Errorf("freeze the sessions: %w", err)
	}
	return data, files, thaw, nil
}

// freeze freezes the session's live terminals and writes the session,
// or nothing if it has closed.
func (st *state) freeze(ctx context.Context, w *handover.Writer) (*handover.Session, error) {
	if st.life == sessionClosed {
		return nil, nil
	}
	if b := st.blocked(); b != nil {
		return nil, b.Err()
	}
	st.endForUpgrade()
	if st.turns.busy() || st.turns.waiting() {
		return nil, (&handover.Blocked{Session: st.s.id, Cwd: st.s.cwd, Refuse: []string{"its foreground work did not move to the background"}}).Err()
	}
	for _, t := range st.work.liveTerminals() {
		if err := w.Freeze(ctx, t.id, t.proc.(ptyio.Freezer)); err != nil { // Safe: blocked checked.
			return nil, fmt.Errorf("freeze session %s: %w", st.s.id, err)
		}
	}
	fs, err := st.frozen(w)
	if err != nil {
		return nil, fmt.Errorf("freeze session %s: %w", st.s.id, err)
	}
	return fs, nil
}

// frozen writes the session, its live terminals as w froze them.
func (st *state) frozen(w *handover.Writer) (*handover.Session, error) {
	fs := &handover.Session{
		ID: st.s.id, Cwd: st.s.cwd, Title: st.title, FgState: st.fgState,
		Settings:  handover.Settings(st.settings),
		UpdatedAt: st.out.updatedAt, Messages: st.out.messages, Seq: st.work.seq,
	}
	if st.out.client == nil {
		fs.Detached = st.out.since
	}
	if st.expiry != nil {
		fs.Expires = st.expiry.at
	}
	var err error
	if fs.Durable, err = st.s.disk.Frozen(); err != nil {
		return nil, err
	}
	for _, e := range st.out.history.All() {
		fs.History = append(fs.History, entryOf(e.msg, e.call, e.term))
	}
	for _, it := range st.list.items {
		fs.List = append(fs.List, entryOf(nil, it.call, it.term))
	}
	for _, t := range st.work.exited {
		fs.Exited = append(fs.Exited, t.id)
	}
	for _, c := range st.work.finished {
		fs.Finished = append(fs.Finished, c.id)
	}
	for _, c := range oldestFirst(st.work.calls, func(*toolCall) bool { return true }) {
		fc := handover.Call{
			ID: c.id, Title: c.title, Kind: c.kind, Outcome: c.outcome, State: int(c.state),
			Input: c.input, Output: c.output, Content: c.content, Caps: c.caps, Hist: st.out.hist(entry{call: c}),
		}
		if c.term != nil {
			fc.Term = c.term.id
		}
		if c.task != nil {
			if fc.Task, err = handover.TaskOf(c.task.handOver()); err != nil {
				return nil, fmt.Errorf("tool call %s: %w", c.id, err)
			}
		}
		fs.Calls = append(fs.Calls, fc)
	}
	if ss := st.stack; ss != nil && ss.File() != nil {
		fs.Stack = &handover.Stack{File: ss.File(), Names: ss.Names(), Services: make(map[string]string)}
		for _, name := range ss.Names() {
			fs.Stack.Services[name] = ss.Service(name).Info().Call.ID()
		}
	}
	for _, t := range oldestFirst(st.work.terminals, func(*terminal) bool { return true }) {
		ft := handover.Terminal{
			ID: t.id, Line: t.line, Cwd: t.cwd, Call: t.call.id, Size: t.size, Started: t.started,
			State: int(t.state), Returned: t.returned, Exit: t.exit, Hist: st.out.hist(entry{term: t}), Cap: t.ring.Cap(),
		}
		if err := w.Terminal(&ft, t.ring); err != nil {
			return nil, err
		}
		fs.Terminals = append(fs.Terminals, ft)
	}
	return fs, nil
}

// hist is where the history holds work e, 0 if nowhere: the Hist of the
// format, which thaw need not read (the History's order says it).
func (o *outbox) hist(e entry) int {
	i, _ := o.history.Pos(e)
	return i
}

func entryOf(m *acp.Message, c *toolCall, t *terminal) handover.Entry {
	var e handover.Entry
	switch {
	case m != nil:
		e.Msg = m
	case c != nil:
		e.Call = c.id
	case t != nil:
		e.Term = t.id
	}
	return e
}
