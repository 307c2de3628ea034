package kit

import (
	"context"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/supervisor/jobs"
	"shellagent/supervisor/watch"
	"shellagent/supervisor/work"
)

// A Scene is a session's state as the kit sees it, for the length of one
// entry on its actor (Session.Do, or a call of an Overlay, Foreground or
// Kit): never keep one.
type Scene struct{ h Host }

// NewScene returns the Scene of h: for the session, which makes one for
// each entry.
func NewScene(h Host) *Scene { return &Scene{h} }

// Session returns the session, to enter it later (Session.Do).
func (sc *Scene) Session() Session { return sc.h.Session() }

// Open reports whether the session is open.
func (sc *Scene) Open() bool { return sc.h.Work().Open() }

// V1 reports whether the attached client speaks ACP v1.
func (sc *Scene) V1() bool { return sc.h.V1() }

// Overlay returns the overlay laid over the session, if any.
func (sc *Scene) Overlay() Overlay { return sc.h.Overlay() }

// Lay lays o over the session; nil takes the overlay off.
func (sc *Scene) Lay(o Overlay) { sc.h.Lay(o) }

// Refuse ends the turn of /scenario NAME (in Kit.Play), saying why, and,
// if usage, how to write /scenario.
func (sc *Scene) Refuse(why string, usage bool) { sc.h.Refuse(why, usage) }

// Hold makes fg the work of the turn of /scenario NAME (in Kit.Play),
// which holds the foreground: the session is running.
func (sc *Scene) Hold(fg Foreground) { sc.h.Hold(fg) }

// Begin asks for a turn of fg's that no prompt brought: fg.Began is told
// once it holds the foreground.
func (sc *Scene) Begin(fg Foreground) { sc.h.Begin(fg) }

// Running reports running, as a turn that starts does, with meta.
func (sc *Scene) Running(meta map[string]any) { sc.h.Running(meta) }

// Holds reports whether a turn of fg holds the foreground.
func (sc *Scene) Holds(fg Foreground) bool { return sc.h.Holds(fg) }

// End ends the turn of fg that holds the foreground, if one does, with
// stopReason (and failure, for the error stop reason).
func (sc *Scene) End(fg Foreground, stopReason string, failure *acp.Error) {
	sc.h.End(fg, stopReason, failure)
}

// Say sends an agent_message.
func (sc *Scene) Say(text string) { sc.h.Work().Say(text) }

// Send sends an update as it is: one of a real terminal goes with its
// output stream; one of a real tool call's capabilities is what the
// session last reported of them from now on.
func (sc *Scene) Send(u acp.Update) { sc.h.Send(u) }

// Snapshot returns the state_update of state (the foreground's state if
// empty; a standard one becomes it) with the list, and meta.
func (sc *Scene) Snapshot(state, stopReason string, meta map[string]any) *acp.StateUpdate {
	return sc.h.Snapshot(state, stopReason, meta)
}

// Report sends a state_update: a Snapshot, or an update that stands for
// one (acp.StateOf) and is not reported as the list.
func (sc *Scene) Report(u acp.Update) { sc.h.Report(u) }

// ReportState reports the state and the list.
func (sc *Scene) ReportState() { sc.h.ReportState() }

// Relist says what the overlay lists changed: it is re-sent as any change
// of the list is.
func (sc *Scene) Relist() { sc.h.Relist() }

// NewID reserves the id of a terminal (terminal) or tool call that no
// other work of the session takes.
func (sc *Scene) NewID(terminal bool) string { return sc.h.NewID(terminal) }

// Ended says that a terminal (terminal) or tool call that the kit made up
// has ended, as the update just sent told the client: its exitStatus, or
// its final status. From then on, overlay or not, the session answers a
// cancel of it as it answers one of its own ended work (-32602: the
// terminal has already exited, the tool call is already status), and
// keeps what it told the client about cancelling it, for as long as it
// keeps its own finished tool calls.
func (sc *Scene) Ended(terminal bool, id, status string) { sc.h.Ended(terminal, id, status) }

// Launch is how Scene.Run runs a command.
type Launch struct {
	Env []string // added to the environment
	// Source, if set, returns the terminal's output as the connection
	// reads it, given its ring.
	Source func(*outputbuf.Ring) protocol.OutputSource
	// Note, if set, is a text the tool call's content carries after its
	// terminal from its first update on, given the terminal's id.
	Note func(terminalID string) string
	// Listed lists the terminal at once, its tool call running.
	Listed bool
	// HandOff, if not empty, hands the terminal off to the background at
	// once, saying so: its tool call completes.
	HandOff string
}

// A Command is a command that Scene.Run started. Its methods run on the
// session's actor (in Session.Do).
type Command struct {
	Terminal, ToolCall string
	Output             *outputbuf.Ring
	Process            // its terminal, as the session runs it
}

// A Process is the terminal of a Command, as the session runs it. Its
// methods run on the session's actor.
type Process interface {
	// Exited reports whether its exitStatus was sent.
	Exited() bool
	// Stop stops it if it runs, with a kill grace of at most grace.
	Stop(grace time.Duration)
	// Replace sends a replacement snapshot of its output, if it has not
	// exited and a client is attached; it reports whether it did.
	Replace() bool
}

// Run runs line in a new terminal, as l says, unlisted foreground work
// unless l lists it or hands it off. ok is false if it could not start.
func (sc *Scene) Run(line string, l Launch) (c Command, ok bool) { return sc.h.Run(line, l) }

// Current sends a client that resumes (Overlay.Resumed) c as it is, if it
// runs unlisted outside the foreground, unless the replay sent it.
func (sc *Scene) Current(c Command) { sc.h.Current(c) }

// Ask sends req to the attached client (its session and, if its subject
// has none, working directory filled in) and calls answer on the session's
// actor, in an entry of its own, with its answer, or with an error once
// ctx ends (the request is then withdrawn) or the connection closes;
// false if no client is attached (answer is never called). The session
// checks the answer as it checks that of any of its permission requests
// (client checks).
func (sc *Scene) Ask(ctx context.Context, req *acp.PermissionRequest, answer func(*acp.PermissionResponse, error)) bool {
	return sc.h.Ask(ctx, req, answer)
}

// A Call is a tool call that Scene.Schedule or Scene.Watch started: a
// job or a watch, the session's work as any other. Its methods run on the
// session's actor (in Session.Do).
type Call struct {
	ID string
	h  work.Host
}

// Schedule schedules a one-off job of line, due after d.
func (sc *Scene) Schedule(line string, d time.Duration) Call {
	h := sc.h.Work()
	return Call{jobs.Schedule(h, line, d, false).Call().ID(), h}
}

// Watch starts a watch of path that runs line on a change; ok is false if
// it cannot watch it (it says why).
func (sc *Scene) Watch(path, line string) (c Call, ok bool) {
	h := sc.h.Work()
	w := watch.Start(h, &watch.Spec{Path: path, Line: line})
	if w == nil {
		return Call{}, false
	}
	return Call{w.Call().ID(), h}, true
}

// Fire fires c's job now, if it is scheduled.
func (c Call) Fire() {
	if _, t, _ := c.h.Find(c.ID); t != nil {
		if j, ok := t.(*jobs.Job); ok {
			j.Fire()
		}
	}
}

// Pause pauses c's watch (paused), or resumes it, as /pause and /resume
// do.
func (c Call) Pause(paused bool) {
	if paused {
		watch.Pause(c.h, c.ID)
	} else {
		watch.Resume(c.h, c.ID)
	}
}

// Cancel cancels c if it has not ended, as tool_call/cancel does.
func (c Call) Cancel() {
	if call, t, _ := c.h.Find(c.ID); call != nil && !call.Final() && t != nil && t.Cancellable() {
		t.Cancel()
	}
}
