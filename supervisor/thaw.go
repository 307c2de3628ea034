package supervisor

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"shellagent/ptyio"
	"shellagent/supervisor/handover"
	"shellagent/supervisor/settings"
)

// Restore builds, in the new image of an upgrade in place, the sessions
// that the old one froze (freeze.go): state, files and ended are as
// handover.Open reads them. Call it on a new Supervisor, before it
// serves. Every session is detached. A live terminal is adopted by the
// Launcher (ptyio.Adopter): its output goes on into its ring at the
// offset it had, its exit is watched again. One whose process is gone,
// or that cannot be adopted, gets the exitStatus {} and a message that
// says why. Restore takes the files: it closes the ones it does not keep.
func (sv *Supervisor) Restore(state []byte, files []*os.File, ended []int) error {
	r, err := handover.Open(state, files, ended)
	if err != nil {
		return fmt.Errorf("restore the sessions: %w", err)
	}
	defer r.Close()
	if len(state) == 0 {
		return nil
	}
	sv.live.setMarks(r.State.Created, r.State.Closed)
	var errs []error
	for _, fs := range r.State.Sessions {
		if err := thawSession(sv, r, fs); err != nil {
			errs = append(errs, fmt.Errorf("restore session %s: %w", fs.ID, err))
		}
	}
	r.Log(sv.cfg.Log)
	return errors.Join(errs...)
}

// thawSession builds one session of sv and adopts its live terminals.
func thawSession(sv *Supervisor, r *handover.Reader, fs handover.Session) error {
	work, live, err := thawWork(r, fs)
	if err != nil {
		return err
	}
	s := &Session{sv: sv, id: fs.ID, cwd: fs.Cwd, disk: sv.histories.Thaw(fs.ID, fs.Durable)}
	st := &s.st
	*st = state{
		s: s, title: fs.Title, fgState: fs.FgState, work: work,
		settings: settings.Settings(fs.Settings),
		// Attached at the freeze (no Detached): detached now.
		out: outbox{session: fs.ID, updatedAt: fs.UpdatedAt, since: cmp.Or(fs.Detached, time.Now()), messages: fs.Messages, disk: s.disk},
	}
	for _, e := range fs.History { // work it does not find is a gap
		st.out.history.Record(entry{msg: e.Msg, call: work.calls[e.Call], term: work.terminals[e.Term]})
	}
	for _, e := range fs.List {
		st.list.items = append(st.list.items, listItem{call: work.calls[e.Call], term: work.terminals[e.Term]})
	}

	sv.live.add(s) // an image holds each session once
	s.actor = newActor(st)

	// Adopted on the actor: the events of a process come after.
	var lost []*terminal
	var errs []error
	s.doWait(func(st *state) {
		lost, errs = adoptTerminals(st, r, live)
		for _, t := range st.work.liveTerminals() {
			if t.state == termStopping && t.proc != nil {
				t.proc.Stop(st.settings.KillGrace) // the old image's escalation went with it: again, from TERM
			}
		}
		if err := thawTasks(st, fs); err != nil {
			errs = append(errs, err)
		}
		if !fs.Expires.IsZero() {
			st.armExpiry(fs.Expires) // the settle after this entry disarms it if the session is not idle
		}
	})
	for _, t := range lost {
		s.exited(t, ptyio.Exit{})
	}
	return errors.Join(errs...)
}

// thawWork returns the registry of the frozen session fs: its tool calls
// and its terminals, each with its ring read from r, and the frozen
// terminals whose process was live at the freeze. The ring of a terminal
// that had exited is compacted.
func thawWork(r *handover.Reader, fs handover.Session) (registry, []handover.Terminal, error) {
	reg := newRegistry()
	if fs.Seq != nil {
		reg.seq = fs.Seq
	}
	for _, fc := range fs.Calls {
		reg.calls[fc.ID] = &toolCall{
			id: fc.ID, title: fc.Title, kind: fc.Kind, outcome: fc.Outcome, state: callState(fc.State),
			input: fc.Input, output: fc.Output, content: fc.Content, caps: fc.Caps,
		}
	}
	var live []handover.Terminal
	for _, ft := range fs.Terminals {
		ring, err := r.Ring(&ft)
		if err != nil {
			return registry{}, nil, err
		}
		c := reg.calls[ft.Call]
		if c == nil {
			return registry{}, nil, fmt.Errorf("terminal %s: no tool call %s", ft.ID, ft.Call)
		}
		t := &terminal{
			id: ft.ID, line: ft.Line, cwd: ft.Cwd, size: ft.Size, call: c, started: ft.Started,
			state: termState(ft.State), ring: ring, returned: ft.Returned, exit: ft.Exit,
		}
		c.term = t
		if t.state >= termExited {
			ring.Compact()
		} else {
			live = append(live, ft)
		}
		reg.terminals[t.id] = t
	}
	for _, id := range fs.Exited {
		if t := reg.terminals[id]; t != nil {
			reg.exited = append(reg.exited, t)
		}
	}
	for _, id := range fs.Finished {
		if c := reg.calls[id]; c != nil {
			reg.finished = append(reg.finished, c)
		}
	}
	return reg, live, nil
}

// adoptTerminals adopts, on st's actor, the process of each terminal of
// live through the Launcher: its output goes on into its ring (and its
// history), its exit and its input are watched again. It returns the
// terminals it could not adopt, each with a message to the session that
// says so, for the caller to end once the actor is free.
func adoptTerminals(st *state, r *handover.Reader, live []handover.Terminal) (lost []*terminal, errs []error) {
	s := st.s
	for _, ft := range live {
		t := st.work.terminals[ft.ID]
		tee := func() io.Writer { return s.disk.Tee(t.id, t.ring) }
		p, err := r.Adopt(s.sv.cfg.Launcher, ft.Live, tee, events{s, t})
		if err != nil {
			errs = append(errs, fmt.Errorf("terminal %s: %w", t.id, err))
			lost = append(lost, t)
			continue
		}
		t.proc = p
		t.watchInput(s)
	}
	for _, t := range lost {
		t.proc = handover.Gone{}
		st.out.agentMessage(fmt.Sprintf("Terminal %s (%s) did not outlive the daemon's upgrade in place at %s: its exit status is unknown.",
			t.id, shortLine(t.line), time.Now().Format("15:04")))
	}
	return lost, errs
}

// thawTasks makes the work of the session's tool calls that is not a
// command (handover.Task) go on, each through its kind (workKinds), and
// its stack with it. A task that cannot be read is left out, and named
// in the error.
func thawTasks(st *state, fs handover.Session) error {
	var errs []error
	for _, fc := range fs.Calls {
		c := st.work.calls[fc.ID]
		if c == nil {
			continue
		}
		for name, data := range fc.Task {
			if err := thawTask(st, c, name, data); err != nil {
				errs = append(errs, fmt.Errorf("tool call %s: %w", c.id, err))
			}
		}
	}
	if fs.Stack != nil { // its services thawed into it (host.Stack)
		host{st}.Stack().Restore(fs.Stack.File, fs.Stack.Names, fs.Stack.Services)
		st.stack.Progress()
	}
	return errors.Join(errs...)
}

// thawTask makes the task that frozen kind name is the task of tool call
// c again.
func thawTask(st *state, c *toolCall, name string, data []byte) error {
	k, ok := workKinds[name]
	if !ok {
		return fmt.Errorf("no kind of work %q", name)
	}
	t, err := k.Thaw(host{st}, callHandle{st, c}, data)
	if err != nil {
		return err
	}
	c.task = nil
	if t != nil {
		c.task = kindTask{t}
	}
	return nil
}
