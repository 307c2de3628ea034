package scenario

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/supervisor/kit"
)

// What a playing scenario (stage.go) works with: the commands it runs
// (run, a Command), its wakeups and watches (realCall, a ToolCall), the directory of its gate files (gateDir), and what
// it makes up (madeUp): tool calls and terminals with no work behind
// them, which the session sends, lets a client cancel, and finishes; once
// one has ended, the session answers its cancels (kit.Scene.Ended).

// run is a command a play started: the Command it works with.
type run struct {
	p       *play
	cmd     kit.Command   // its terminal, tool call and output; used on the session's actor
	snapped chan struct{} // told of each copy of its output a replacement takes (snapOutput)
	gate    string        // the file Open creates, if it is gated
}

// snapOutput is the output of a play's command as the connection reads
// it: its ring, which tells snapped (without blocking) of each copy a
// replacement takes.
type snapOutput struct {
	*outputbuf.Ring
	snapped chan struct{}
}

func (o snapOutput) Follow(notify func()) protocol.OutputFollower { return o.Ring.Follow(notify) }

func (o snapOutput) AppendSnapshot(dst []byte) ([]byte, int64) {
	dst, end := o.Ring.AppendSnapshot(dst)
	select {
	case o.snapped <- struct{}{}:
	default: // told already
	}
	return dst, end
}

// Terminal implements Command.
func (r *run) Terminal() string { return r.cmd.Terminal }

// ToolCall implements Command.
func (r *run) ToolCall() string { return r.cmd.ToolCall }

// Open implements Command.
func (r *run) Open() {
	if r.gate == "" {
		return
	}
	if err := os.WriteFile(r.gate, nil, 0o600); err != nil {
		r.p.log.Warn("scenario gate", "scenario", r.p.sc.Name, "err", err)
	}
}

// WaitOutput implements Command: it waits until the ring holds
// text and every follower that holds it (the writer of a connection that
// keeps up) has taken it, so that what the scenario sends next goes out
// after it.
func (r *run) WaitOutput(text string) error {
	ring := r.cmd.Output
	return pollUntil(r.p.ctx, "output "+text+" of "+r.cmd.Terminal, func() bool {
		data, end := ring.Snapshot()
		i := strings.Index(string(data), text)
		if i < 0 {
			return false
		}
		taken, held := ring.Taken()
		return !held || taken >= end-int64(len(data))+int64(i+len(text))
	})
}

// WaitExit implements Command: it looks, as any way in does, until the
// session has sent its exitStatus.
func (r *run) WaitExit() error {
	return pollUntil(r.p.ctx, "the exit of "+r.cmd.Terminal, r.exited)
}

// exited reports whether the command's exitStatus was sent.
func (r *run) exited() (done bool) {
	r.p.s.Do(func(*kit.Scene) { done = r.cmd.Exited() })
	return done
}

// Replace implements Command.
func (r *run) Replace() error {
	select {
	case <-r.snapped: // an earlier copy
	default:
	}
	attached := false
	if !r.p.enter(func(*kit.Scene) { attached = r.cmd.Replace() }) {
		return over(r.p.ctx)
	}
	if !attached {
		return nil
	}
	return waitFor(r.p.ctx, r.snapped, "the replacement of "+r.cmd.Terminal)
}

// Stop implements Command.
func (r *run) Stop() {
	r.p.enter(func(*kit.Scene) { r.cmd.Stop(stageGrace) })
}

// realCall is a wakeup or a watch a play started: the ToolCall it works
// with.
type realCall struct {
	p *play
	c kit.Call // used on the session's actor
}

// ID implements ToolCall.
func (r realCall) ID() string { return r.c.ID }

// Fire implements ToolCall.
func (r realCall) Fire() {
	r.p.enter(func(*kit.Scene) { r.c.Fire() })
}

// Pause implements ToolCall.
func (r realCall) Pause(paused bool) {
	r.p.enter(func(*kit.Scene) { r.c.Pause(paused) })
}

// Cancel implements ToolCall.
func (r realCall) Cancel() {
	r.p.enter(func(*kit.Scene) { r.c.Cancel() })
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
// cancels it takes. It is owned by the session's actor.
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
	reported bool // the session was told it ended (kit.Scene.Ended)
}

// final reports whether its final status, or its exitStatus, was sent.
func (f *fake) final() bool {
	if f.terminal {
		return f.term.ExitStatus != nil
	}
	return acp.FinalStatus(f.call.Status)
}

// reserve reserves an id that no other work of the session takes.
func (m *madeUp) reserve(sc *kit.Scene, terminal bool) string {
	id := sc.NewID(terminal)
	if m.items == nil {
		m.items = make(map[string]*fake)
	}
	m.items[id] = &fake{terminal: terminal}
	m.order = append(m.order, id)
	return id
}

// send sends u, first merged into the made-up item it is about, if any;
// if that item ends with it (exitStatus, a final status), the session is
// told (kit.Scene.Ended), and answers its cancels from then on.
func (m *madeUp) send(sc *kit.Scene, u acp.Update) {
	f := m.add(u)
	sc.Send(u)
	if f == nil || f.reported || !f.final() {
		return
	}
	f.reported = true
	if f.terminal {
		sc.Ended(true, f.term.TerminalID, "")
	} else {
		sc.Ended(false, f.call.ToolCallID, f.call.Status)
	}
}

// add merges an update into the made-up item it is about, if any, and
// returns that item.
func (m *madeUp) add(u acp.Update) *fake {
	switch u := u.(type) {
	case *acp.ToolCallUpdate:
		f := m.items[u.ToolCallID]
		if f == nil || f.terminal {
			return nil
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
		return f
	case *acp.TerminalUpdate:
		f := m.items[u.TerminalID]
		if f == nil || !f.terminal {
			return nil
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
		return f
	}
	return nil
}

// intercept makes the play take the cancels of id, telling ch of the
// first.
func (m *madeUp) intercept(id string, ch chan struct{}) {
	if m.intercepts == nil {
		m.intercepts = make(map[string]chan struct{})
	}
	m.intercepts[id] = ch
}

// takes reports whether the play takes a cancel of id (of real work it
// started, or of what it made up), and tells the scenario the first time.
// Later cancels are taken and nothing more is said, until the work ends.
func (m *madeUp) takes(id string) bool {
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

// cancel serves tool_call/cancel of a tool call the play made up, which
// has not ended: accepted (nil) if the play takes it, else -32602 as for
// any tool call that cannot be cancelled.
func (m *madeUp) cancel(id string) error {
	if m.takes(id) {
		return nil
	}
	return acp.InvalidParams("toolCallId: %s is not cancellable (a scenario made it up)", id)
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
