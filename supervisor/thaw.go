package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"shellagent/outputbuf"
	"shellagent/ptyio"
)

// Restore builds, in the new image of an upgrade in place, the sessions
// that the old one froze (freeze.go): state and files are what Freeze
// returned, the files as new descriptors in the same order; ended holds
// the indexes of the process handles whose process is gone. Call it on a
// new Supervisor, before it serves. Every session is detached. A live
// terminal is adopted by the Launcher (ptyio.Adopter): its output goes on
// into its ring at the offset it had, its exit is watched again. One whose
// process is gone, or that cannot be adopted, gets the exitStatus {} and
// a message that says why. Restore takes the files: it closes the ones it
// does not keep.
func (sv *Supervisor) Restore(state []byte, files []*os.File, ended []int) error {
	begun := time.Now()
	kept := make([]bool, len(files))
	defer func() {
		for i, f := range files {
			if !kept[i] {
				f.Close() // Best effort: not used.
			}
		}
	}()
	if len(state) == 0 {
		return nil
	}
	var fz frozenSupervisor
	if err := json.Unmarshal(state, &fz); err != nil {
		return fmt.Errorf("restore the sessions: %w", err)
	}
	gone := make(map[int]bool)
	for _, i := range ended {
		gone[i] = true
	}
	sv.mu.Lock()
	sv.created, sv.closed = fz.Created, fz.Closed
	sv.mu.Unlock()
	var errs []error
	terminals := 0
	if fz.Output < 0 || fz.Output >= len(files) {
		return fmt.Errorf("restore the sessions: no file %d with their output", fz.Output)
	}
	th := &thawing{sv: sv, files: files, blob: files[fz.Output], gone: gone, kept: kept}
	for _, fs := range fz.Sessions {
		if err := th.session(fs); err != nil {
			errs = append(errs, fmt.Errorf("restore session %s: %w", fs.ID, err))
		}
		for _, ft := range fs.Terminals {
			if ft.Live != nil {
				terminals++
			}
		}
	}
	// held: how long no PTY was read, from the freeze to the readers
	// started again (bench's BenchmarkUpgrade reads it).
	// Where the hold went, before the new image's start (logged by the
	// daemon): freezing the sessions, completing their history on disk.
	sv.cfg.Log.Info("restored the sessions of the upgrade", "sessions", len(fz.Sessions), "terminals", terminals, "held", time.Since(fz.FrozenAt),
		"freeze", fz.Frozen.Sub(fz.FrozenAt), "flush", fz.Flushed.Sub(fz.Frozen), "restore", time.Since(begun))
	return errors.Join(errs...)
}

// thawing is one Restore: the files the old image handed over, in order,
// and which of them it keeps.
type thawing struct {
	sv    *Supervisor
	files []*os.File
	blob  *os.File     // the terminals' output
	gone  map[int]bool // the indexes of the process handles whose process is gone
	kept  []bool       // by index: the files Restore keeps
}

// session builds one session and adopts its live terminals.
func (th *thawing) session(fs frozenSession) error {
	sv := th.sv
	s := &Session{sv: sv, id: fs.ID, cwd: fs.Cwd, disk: sv.histories.Thaw(fs.ID, fs.Durable)}
	st := &s.st
	*st = state{
		s: s, title: fs.Title, fgState: fs.FgState, work: newRegistry(),
		settings: settings{
			foregroundTimeout: fs.Settings.ForegroundTimeout, killGrace: fs.Settings.KillGrace,
			ask: fs.Settings.Ask, clientChecks: fs.Settings.ClientChecks, notify: fs.Settings.Notify,
		},
		out: outbox{session: fs.ID, updatedAt: fs.UpdatedAt, since: time.Now(), messages: fs.Messages, disk: s.disk},
	}
	if fs.Seq != nil {
		st.work.seq = fs.Seq
	}
	r := &st.work
	for _, fc := range fs.Calls {
		r.calls[fc.ID] = &toolCall{
			id: fc.ID, title: fc.Title, kind: fc.Kind, outcome: fc.Outcome, state: fc.State,
			input: fc.Input, output: fc.Output, content: fc.Content, caps: fc.Caps, hist: fc.Hist,
		}
	}
	var live []frozenTerminal
	for _, ft := range fs.Terminals {
		data := make([]byte, ft.Len)
		if _, err := th.blob.ReadAt(data, ft.Output); err != nil {
			return fmt.Errorf("terminal %s: read its output: %w", ft.ID, err)
		}
		ring, err := outputbuf.Restore(ft.Cap, data, ft.End)
		if err != nil {
			return fmt.Errorf("terminal %s: %w", ft.ID, err)
		}
		c := r.calls[ft.Call]
		if c == nil {
			return fmt.Errorf("terminal %s: no tool call %s", ft.ID, ft.Call)
		}
		t := &terminal{
			id: ft.ID, line: ft.Line, cwd: ft.Cwd, size: ft.Size, call: c, started: ft.Started,
			state: ft.State, ring: ring, returned: ft.Returned, exit: ft.Exit, hist: ft.Hist,
		}
		c.term = t
		if t.state >= termExited {
			ring.Compact()
		} else {
			live = append(live, ft)
		}
		r.terminals[t.id] = t
	}
	for _, id := range fs.Exited {
		if t := r.terminals[id]; t != nil {
			r.exited = append(r.exited, t)
		}
	}
	for _, id := range fs.Finished {
		if c := r.calls[id]; c != nil {
			r.finished = append(r.finished, c)
		}
	}
	for _, e := range fs.History {
		en := entry{msg: e.Msg, call: r.calls[e.Call], term: r.terminals[e.Term]}
		switch {
		case en.msg != nil:
			st.out.kept++
		case en.call == nil && en.term == nil:
			st.out.forgotten++
		}
		st.out.history = append(st.out.history, en)
	}
	for _, e := range fs.List {
		st.list.items = append(st.list.items, listItem{call: r.calls[e.Call], term: r.terminals[e.Term]})
	}

	sv.mu.Lock()
	sv.sessions[s.id] = s
	sv.order = append(sv.order, s.id)
	sv.mu.Unlock()
	s.actor = newActor(st)

	// Adopted on the actor: the events of a process come after.
	var lost []*terminal
	var errs []error
	s.doWait(func(st *state) {
		for _, ft := range live {
			t := st.work.terminals[ft.ID]
			p, err := th.adopt(ft.Live, t, s)
			if err != nil {
				errs = append(errs, fmt.Errorf("terminal %s: %w", t.id, err))
				lost = append(lost, t)
				continue
			}
			t.proc = p
			t.watchInput(s)
		}
		for _, t := range lost {
			t.proc = goneProcess{}
			st.out.agentMessage(fmt.Sprintf("Terminal %s (%s) did not outlive the daemon's upgrade in place at %s: its exit status is unknown.",
				t.id, shortLine(t.line), time.Now().Format("15:04")))
		}
		for _, t := range st.work.liveTerminals() {
			if t.state == termStopping && t.proc != nil {
				t.proc.Stop(st.settings.killGrace) // the old image's escalation went with it: again, from TERM
			}
		}
		if err := thawTasks(st, fs); err != nil {
			errs = append(errs, err)
		}
	})
	for _, t := range lost {
		s.exited(t, ptyio.Exit{})
	}
	return errors.Join(errs...)
}

// thawTasks makes the work of the session's tool calls that is not a
// command (freeze.go, frozenTask) go on, each through its kind
// (workKinds), and its stack with it. A task that cannot be read is left
// out, and named in the error.
func thawTasks(st *state, fs frozenSession) error {
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
		st.stackOf().Restore(fs.Stack.File, fs.Stack.Names, fs.Stack.Services)
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

// adopt takes over the process of a live terminal t: the files that fp
// names become its process's.
func (th *thawing) adopt(fp *frozenProcess, t *terminal, s *Session) (ptyio.Process, error) {
	files := th.files
	switch {
	case fp == nil || fp.Master < 0 || fp.Shell < 0 || fp.Master >= len(files) || fp.Shell >= len(files):
		return nil, errors.New("its descriptors were not handed over")
	case th.gone[fp.Shell]:
		return nil, fmt.Errorf("its process %d is gone", fp.Pid)
	}
	a, ok := th.sv.cfg.Launcher.(ptyio.Adopter)
	if !ok {
		return nil, errors.New("this launcher cannot adopt a command")
	}
	p, err := a.Adopt(ptyio.Handed{Pid: fp.Pid, Master: files[fp.Master], Shell: files[fp.Shell], Group: fp.Group, Tty: fp.Tty}, s.disk.Tee(t.id, t.ring), events{s, t})
	if err != nil {
		return nil, err
	}
	th.kept[fp.Master], th.kept[fp.Shell] = true, true
	return p, nil
}

// goneProcess is the process of a terminal that did not outlive an
// upgrade, until its exit is reported.
type goneProcess struct{}

func (goneProcess) Pid() int                            { return 0 }
func (goneProcess) Members() ([]ptyio.Member, error)    { return nil, nil }
func (goneProcess) Stop(time.Duration)                  {}
func (goneProcess) Resize(ptyio.Size) error             { return nil }
func (goneProcess) InputWait() (ptyio.InputWait, error) { return ptyio.InputWait{}, nil }
func (goneProcess) Write([]byte) (int, error) {
	return 0, errors.New("the terminal's process is gone")
}
