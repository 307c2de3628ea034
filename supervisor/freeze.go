package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"shellagent/acp"
	"shellagent/internal/stack"
	"shellagent/ptyio"
	"shellagent/supervisor/terminput"
)

// An upgrade in place (daemon.Host): the Supervisor hands its sessions,
// their terminals' processes, PTYs and rings to the next image of the
// daemon, the same process after an exec. Freeze (this file) stops every
// session's actor inside an entry that holds it until thaw, so nothing
// acts: no PTY is read (each terminal's reader parks, and its ring holds
// what was read), no process event, timer or answer is served (they
// queue), nothing launches. It writes the sessions as frozenSupervisor.
// Restore (thaw.go) builds them again in the new image, detached.
//
// The work of a session that is not a terminal is handed over too, or
// ended as the end of its connection ends it (the upgrade closes every
// connection first): prompts held for the foreground are answered -32800;
// a request for permission gets no answer, and its command is not run;
// the foreground turn ends, its work moved to the background as /bg
// moves it (a command, a wait, the wait of /up); scheduled jobs, waits,
// watches and the services of a stack go on in the new image from what
// frozenTask holds (each kind's frozen and thaw, in its own file). A
// playing scenario (the kit's) and a session that is closing are not
// handed over: Precheck refuses to upgrade a daemon that has one, naming
// it, before anything stops.

// frozenSupervisor is the state an upgrade hands over.
type frozenSupervisor struct {
	FrozenAt time.Time // when the first session stopped: output is held back from then on
	Frozen   time.Time // when the last session stopped and was written
	Flushed  time.Time // when the history on disk was complete
	Output   int       // the index of the file that holds the rings' bytes (frozenTerminal.Output)
	Created  int
	Closed   []string
	Sessions []frozenSession
}

// frozenSession is one session: what its state holds, by id.
type frozenSession struct {
	ID, Cwd, Title, FgState string
	Settings                frozenSettings
	UpdatedAt               time.Time
	Messages                int            // the last message id issued
	Seq                     map[string]int // the registry's last ids
	History                 []frozenEntry  // the outbox's history, forgotten items as {}
	Calls                   []frozenCall   // the registry's tool calls
	Terminals               []frozenTerminal
	Exited, Finished        []string       // the registry's retention order
	List                    []frozenEntry  // the background list
	Stack                   *frozenStack   `json:",omitempty"`
	Durable                 *frozenDurable `json:",omitempty"` // its history's record of each item (durable.go)
}

// frozenStack is the session's stack (stackcmds.go): its file as last
// read, and its services by name, each the task of a tool call.
type frozenStack struct {
	File     *stack.Stack
	Names    []string
	Services map[string]string // name: the id of its tool call
}

type frozenSettings struct {
	ForegroundTimeout, KillGrace time.Duration
	Ask, ClientChecks            bool
	Notify                       terminput.Notify
}

// frozenEntry is a history entry or a list item: a message, or a tool
// call or terminal by id.
type frozenEntry struct {
	Msg  *acp.Message `json:",omitempty"`
	Call string       `json:",omitempty"`
	Term string       `json:",omitempty"`
}

type frozenCall struct {
	ID, Title, Kind, Outcome string
	State                    callState
	Input, Output            any                   `json:",omitempty"`
	Content                  []acp.ToolCallContent `json:",omitempty"`
	Caps                     acp.Capabilities      `json:",omitempty"`
	Term                     string                `json:",omitempty"`
	Hist                     int
	Task                     frozenTask `json:",omitempty"`
}

// frozenTask is the work of a tool call that is not a command (task):
// what the new image needs to go on with it, under the one name of its
// kind (task.handOver), the kinds in packages of their own (workKinds,
// kinds.go): "Job" (supervisor/jobs), "Wait" (supervisor/wait), "Watch"
// (supervisor/watch), "Service" (supervisor/service).
type frozenTask map[string]json.RawMessage

// frozenTerminal is a terminal, its ring, and, while it runs, its
// process: Master and Shell index the files handed over.
type frozenTerminal struct {
	ID, Line, Cwd, Call string
	Size                ptyio.Size
	Started             time.Time
	State               termState
	Returned            *ptyio.Status   `json:",omitempty"`
	Exit                *acp.ExitStatus `json:",omitempty"`
	Hist                int
	Cap                 int   // the ring's capacity
	Output              int64 // where what the ring holds starts in the output file
	Len                 int   // how many bytes it holds, ending at End
	End                 int64
	Live                *frozenProcess `json:",omitempty"`
}

type frozenProcess struct {
	Pid, Master, Shell int
	Group              int64
	Tty                string
}

// Precheck implements daemon.Prechecker: it refuses, naming the work and
// its session, while a session holds work that cannot be handed over.
// Work that ends by itself within a kill grace (a session closing, a
// service that /down or /restart is stopping) is waited for, at most the
// longest kill grace and a second, before it refuses.
func (sv *Supervisor) Precheck() error {
	var deadline time.Time
	for {
		var (
			blocked *Session
			refuse  []string
			wait    []string
			grace   time.Duration
		)
		for _, s := range sv.list() {
			s.doWait(func(st *state) {
				if st.life != sessionClosed {
					refuse, wait = st.cannotHandOver()
					grace = max(grace, st.settings.killGrace)
				}
			})
			if len(refuse)+len(wait) > 0 {
				blocked = s
				break
			}
		}
		switch {
		case blocked == nil:
			return nil
		case len(refuse) > 0:
			return handOverRefusal(blocked, append(refuse, wait...))
		case deadline.IsZero():
			deadline = time.Now().Add(grace + time.Second)
		case time.Now().After(deadline):
			return handOverRefusal(blocked, wait)
		}
		time.Sleep(precheckEvery)
	}
}

// precheckEvery is how often Precheck looks again at work it waits for.
const precheckEvery = 50 * time.Millisecond

func handOverRefusal(s *Session, why []string) error {
	return fmt.Errorf("cannot be upgraded in place: session %s (%s) holds work that cannot be handed over yet: %s; end it (or wait for it), then upgrade again",
		s.id, s.cwd, strings.Join(why, ", "))
}

// cannotHandOver names the work of the session that an upgrade cannot
// hand over: refuse, work that stays so; wait, work that ends by itself
// within a kill grace.
func (st *state) cannotHandOver() (refuse, wait []string) {
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
	return refuse, wait
}

// errUpgraded is the answer an open request for permission gets at an
// upgrade in place: none, as when its connection closes.
var errUpgraded = errors.New("its connection closed for the daemon's upgrade in place")

// endForUpgrade ends the session's work that is not handed over, as the
// end of its connection would (see the top of this file): what is left
// is background work. A firing of a job or a watch that waited for the
// foreground starts once it is free, and moves to the background too.
func (st *state) endForUpgrade() {
	st.turns.dropHeld(func(t *turn) bool { return t.reply != nil }, "the daemon was upgraded in place before it was inserted")
	for _, c := range st.work.unfinished() {
		if a, ok := c.task.(*approval); ok {
			a.answered(st, nil, errUpgraded)
		}
	}
	for range maxMoves {
		fg := st.turns.fg
		switch {
		case fg == nil:
			return
		case fg.state == turnAsking:
			fg.call.task.(*approval).answered(st, nil, errUpgraded) // Safe: the turn asks for permission.
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

// Freeze implements daemon.Host: see the top of this file. The files are
// each live terminal's PTY master and process handle, which stay the
// terminal's; thaw lets every session act again.
func (sv *Supervisor) Freeze(ctx context.Context) (state []byte, files []*os.File, thaw func(), err error) {
	// The history on disk is made complete twice: here, fsynced, before
	// anything stops; in the hold, written but not fsynced (the new image
	// fsyncs what it reopens), so that the hold waits for little.
	if store := sv.cfg.History; store != nil {
		if err := store.Flush(); err != nil {
			return nil, nil, nil, fmt.Errorf("freeze the sessions: write their history: %w", err)
		}
	}
	sv.mu.Lock()
	out := frozenSupervisor{FrozenAt: time.Now(), Created: sv.created, Closed: slices.Clone(sv.closed)}
	sv.mu.Unlock()
	// The rings' bytes go to a file of their own, not into the JSON: an
	// unlinked temporary file, which the new image reads and closes.
	blob, err := os.CreateTemp("", "shellagent-upgrade-*")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("freeze the sessions: %w", err)
	}
	os.Remove(blob.Name()) // Best effort: it goes with the last descriptor anyway.
	files = append(files, blob)
	var thaws []func()
	thaw = func() {
		for _, f := range thaws {
			f()
		}
		blob.Close() // Best effort: an unlinked file no one reads.
	}
	for _, s := range sv.list() {
		fs, fl, th, err := s.freeze(ctx, len(files), blob)
		if err != nil {
			thaw()
			return nil, nil, nil, err
		}
		thaws = append(thaws, th)
		if fs != nil {
			out.Sessions = append(out.Sessions, *fs)
			files = append(files, fl...)
		}
	}
	out.Frozen = time.Now()
	// The new image writes on each session's history on disk: all of it
	// must be written before the exec, and what the writer knows of each
	// file goes with the session, so that the new image need not read it.
	if store := sv.cfg.History; store != nil {
		handed, err := store.Handover()
		if err != nil {
			thaw()
			return nil, nil, nil, fmt.Errorf("freeze the sessions: write their history: %w", err)
		}
		for i := range out.Sessions {
			if d := out.Sessions[i].Durable; d != nil {
				d.File = handed[out.Sessions[i].ID]
			}
		}
	}
	out.Flushed = time.Now()
	if state, err = json.Marshal(out); err != nil {
		thaw()
		return nil, nil, nil, fmt.Errorf("freeze the sessions: %w", err)
	}
	return state, files, thaw, nil
}

// freeze stops the session's actor in an entry that holds it until thaw,
// and returns the session as it then is (nil if it has closed) and its
// files, whose indexes start at base.
func (s *Session) freeze(ctx context.Context, base int, blob *os.File) (fs *frozenSession, files []*os.File, thaw func(), err error) {
	type frozen struct {
		fs    *frozenSession
		files []*os.File
		err   error
	}
	got := make(chan frozen, 1)
	hold := make(chan struct{})
	thaw = sync.OnceFunc(func() { close(hold) })
	s.do(func(st *state) {
		if st.life == sessionClosed {
			got <- frozen{}
			return
		}
		fs, files, procs, err := st.freeze(ctx, base, blob)
		got <- frozen{fs, files, err}
		if err != nil {
			return
		}
		<-hold // the session does nothing until thaw
		for _, p := range procs {
			p.Thaw()
		}
	})
	select {
	case f := <-got:
		if f.err != nil {
			return nil, nil, nil, f.err
		}
		return f.fs, f.files, thaw, nil
	case <-ctx.Done():
		thaw()
		return nil, nil, nil, fmt.Errorf("freeze session %s: %w", s.id, ctx.Err())
	}
}

// freeze freezes the session's live terminals and writes the session.
func (st *state) freeze(ctx context.Context, base int, blob *os.File) (*frozenSession, []*os.File, []ptyio.Freezer, error) {
	if refuse, wait := st.cannotHandOver(); len(refuse)+len(wait) > 0 {
		return nil, nil, nil, handOverRefusal(st.s, append(refuse, wait...))
	}
	st.endForUpgrade()
	if st.turns.busy() || st.turns.waiting() {
		return nil, nil, nil, handOverRefusal(st.s, []string{"its foreground work did not move to the background"})
	}
	var procs []ptyio.Freezer
	handed := make(map[*terminal]ptyio.Handed)
	for _, t := range st.work.liveTerminals() {
		p := t.proc.(ptyio.Freezer) // Safe: cannotHandOver checked.
		h, err := p.Freeze(ctx)
		if err != nil {
			for _, p := range procs {
				p.Thaw()
			}
			if errors.Is(err, ptyio.ErrEnding) {
				err = fmt.Errorf("terminal %s ended during the upgrade; upgrade again: %w", t.id, err)
			}
			return nil, nil, nil, fmt.Errorf("freeze session %s: %w", st.s.id, err)
		}
		procs, handed[t] = append(procs, p), h
	}
	fs, files, err := st.frozen(handed, base, blob)
	if err != nil {
		for _, p := range procs {
			p.Thaw()
		}
		return nil, nil, nil, fmt.Errorf("freeze session %s: %w", st.s.id, err)
	}
	return fs, files, procs, nil
}

// frozen writes the session, its live terminals as handed.
func (st *state) frozen(handed map[*terminal]ptyio.Handed, base int, blob *os.File) (*frozenSession, []*os.File, error) {
	fs := &frozenSession{
		ID: st.s.id, Cwd: st.s.cwd, Title: st.title, FgState: st.fgState,
		Settings: frozenSettings{
			ForegroundTimeout: st.settings.foregroundTimeout, KillGrace: st.settings.killGrace,
			Ask: st.settings.ask, ClientChecks: st.settings.clientChecks, Notify: st.settings.notify,
		},
		UpdatedAt: st.out.updatedAt, Messages: st.out.messages, Seq: st.work.seq,
	}
	var err error
	if fs.Durable, err = st.s.disk.Frozen(); err != nil {
		return nil, nil, err
	}
	for _, e := range st.out.history {
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
		fc := frozenCall{
			ID: c.id, Title: c.title, Kind: c.kind, Outcome: c.outcome, State: c.state,
			Input: c.input, Output: c.output, Content: c.content, Caps: c.caps, Hist: c.hist,
		}
		if c.term != nil {
			fc.Term = c.term.id
		}
		if c.task != nil {
			if kind, f := c.task.handOver(); f != nil {
				data, err := json.Marshal(f)
				if err != nil {
					return nil, nil, fmt.Errorf("tool call %s: %w", c.id, err)
				}
				fc.Task = frozenTask{kind: data}
			}
		}
		fs.Calls = append(fs.Calls, fc)
	}
	if ss := st.stack; ss != nil && ss.File() != nil {
		fs.Stack = &frozenStack{File: ss.File(), Names: ss.Names(), Services: make(map[string]string)}
		for _, name := range ss.Names() {
			fs.Stack.Services[name] = ss.Service(name).Info().Call.ID()
		}
	}
	var files []*os.File
	for _, t := range oldestFirst(st.work.terminals, func(*terminal) bool { return true }) {
		ft := frozenTerminal{
			ID: t.id, Line: t.line, Cwd: t.cwd, Call: t.call.id, Size: t.size, Started: t.started,
			State: t.state, Returned: t.returned, Exit: t.exit, Hist: t.hist, Cap: t.ring.Cap(),
		}
		data, end := t.ring.Snapshot()
		at, err := blob.Seek(0, io.SeekCurrent)
		if err == nil {
			_, err = blob.Write(data)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("terminal %s: write its output: %w", t.id, err)
		}
		ft.Output, ft.Len, ft.End = at, len(data), end
		if h, ok := handed[t]; ok {
			ft.Live = &frozenProcess{Pid: h.Pid, Master: base + len(files), Shell: base + len(files) + 1, Group: h.Group, Tty: h.Tty}
			files = append(files, h.Master, h.Shell)
		}
		fs.Terminals = append(fs.Terminals, ft)
	}
	return fs, files, nil
}

func entryOf(m *acp.Message, c *toolCall, t *terminal) frozenEntry {
	var e frozenEntry
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
