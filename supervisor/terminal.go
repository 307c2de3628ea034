package supervisor

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/ptyio"
)

// A command's life, top to bottom. A prompt's command runs in the
// foreground (runForeground, turns.go) or, with /bg, in the background
// (actBg, commands.go); in permission mode "ask" it first waits for the user
// (permission.go, supervisor/approval). launch starts it in a PTY, as slow work on the
// session's actor (actor.go), and then announces its tool call and terminal. A
// command leaves the foreground while it runs on the foreground timeout,
// /bg, or its shell returning (detach, turns.go), and handOff completes its
// tool call and lists its terminal. It is stopped (terminal.stop, work.go)
// or ends on its own (Session.exited): its exitStatus goes out first, then
// its tool call's outcome and the end of its turn, or its removal from the
// list.

// launch starts line in a new terminal for call, with opts: the Launcher
// runs on the actor, as slow work (actor.slow). Then it announces the
// tool call and the terminal, and returns the terminal; or, if the
// command could not start, fails its tool call (unlisted, if it asked
// for permission in the background) and returns nil. Events of the
// terminal's process that come before that wait their turn in the inbox.
func (st *state) launch(call *toolCall, line string, opts launchOptions) *terminal {
	t, err := launchWith(st, call, line, opts)
	if err != nil {
		call.content = []acp.ToolCallContent{acp.TextContent("Could not start the command: " + err.Error())}
		endCall(st, call, acp.StatusFailed)
	}
	return t
}

// launchOptions are what a scenario's command adds (kit.Scene.Run, kit.go).
type launchOptions struct {
	dir string   // the working directory, if not the session's (a service's)
	env []string // added to the environment
	// source, if set, returns the terminal's output as the connection
	// reads it, given its ring (terminal.source).
	source func(*outputbuf.Ring) protocol.OutputSource
	// note, if set, is a text the tool call's content carries after its
	// terminal from its first update on, given the terminal's id: sent
	// with the announcement, it cannot fall behind the terminal's output.
	note func(terminalID string) string
}

// launchWith is launch, but a command that could not start leaves call
// as it is, its status in_progress: its kind decides what follows (a
// service may restart).
func launchWith(st *state, call *toolCall, line string, opts launchOptions) (*terminal, error) {
	s, cfg := st.s, st.s.sv.cfg
	dir := cmp.Or(opts.dir, s.cwd)
	call.state = callRunning
	call.input = map[string]string{"command": line, "cwd": dir}
	t := &terminal{
		id: st.work.newID("term"), line: line, cwd: dir, size: cfg.Size, call: call,
		ring: outputbuf.New(cfg.Scrollback), started: time.Now(),
	}
	if opts.source != nil {
		t.source = opts.source(t.ring)
	}
	env := append(slices.Clip(s.sv.env), opts.env...) // no copy without opts.env
	// The ring waits for its first reader (announceTerminal) from the
	// first byte: a flood would overwrite it before then.
	first := t.ring.Follow(nil)
	first.Hold(true)
	defer first.Stop()
	st.s.slow()
	proc, err := cfg.Launcher.Launch(ptyio.Command{Shell: cfg.Shell, Line: line, Dir: dir, Env: env, Size: cfg.Size}, s.disk.Tee(t.id, t.ring), events{s, t})
	if err != nil {
		s.disk.Forget(t.id) // Tee's tap: no exit or retirement of it will drop it
		return nil, err
	}
	t.proc, call.term = proc, t
	st.work.addTerminal(t)
	t.watchInput(st.s)
	call.content = []acp.ToolCallContent{acp.TerminalContent(t.id)}
	if opts.note != nil {
		call.content = append(call.content, acp.TextContent(opts.note(t.id)))
	}
	st.out.send(call.update())
	st.out.announceTerminal(t)
	return t, nil
}

// commandRun is the foreground work of a turn that runs a command in the
// turn's terminal (in permission mode "ask", once allowed: until then the
// turn's foreground is its approval, permission.go).
type commandRun struct{}

// cancelTurn implements foreground: the command is stopped (its exit ends
// the turn).
func (commandRun) cancelTurn(st *state, fg *turn) {
	fg.state = turnCancelling
	fg.term.stop(st.settings.KillGrace)
}

// toBackground implements foreground.
func (commandRun) toBackground(st *state, fg *turn) {
	switch {
	case fg.term.state == termStopping:
		st.out.agentMessage("The foreground command is being stopped; it stays in the foreground until it exits.")
	default:
		st.detach("Moved to the background by /bg.")
	}
}

// handOff hands a running command over to the background: its tool call
// completes and its terminal is listed. A foreground command's turn has
// released it first (detach).
func (st *state) handOff(t *terminal, why string) {
	st.work.finish(t.call, acp.StatusCompleted)
	st.list.add(listItem{term: t})
	t.call.content = []acp.ToolCallContent{acp.TerminalContent(t.id), acp.TextContent(why + " " + detachNote(t))}
	u := &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: t.call.id, Status: t.call.status(), Content: t.call.content,
	}
	if t.returned != nil {
		t.call.output = exitStatusRaw(exitStatus(ptyio.Exit{Shell: *t.returned}))
		u.RawOutput = t.call.output
	}
	st.out.send(u)
}

func detachNote(t *terminal) string {
	return fmt.Sprintf("It runs on in terminal %s; stop it with terminal/cancel or /stop %s.", t.id, t.id)
}

// exitUpdate records how the terminal's command ended, and returns the
// terminal_update that reports it: its exitStatus, which ends its stream.
func (t *terminal) exitUpdate(x ptyio.Exit) *acp.TerminalUpdate {
	t.exit = exitStatus(x)
	return &acp.TerminalUpdate{
		SessionUpdate: acp.KindTerminal, TerminalID: t.id,
		ExitStatus: t.exit, Capabilities: acp.CapsNone,
	}
}

// callOutcome is the final status of a foreground command's tool call:
// cancelled when session/cancel or close stopped it, completed when it
// exited with 0, failed otherwise.
func callOutcome(cancelled bool, es *acp.ExitStatus) string {
	switch {
	case cancelled:
		return acp.StatusCancelled
	case es.Signal == "" && es.ExitCode != nil && *es.ExitCode == 0:
		return acp.StatusCompleted
	}
	return acp.StatusFailed
}

// exitStatus follows docs/terminals.md, "The life of a command": the shell's wait
// status when nothing stopped it; the last signal the agent had to send
// when it did, with the shell's exit code if it exited with one.
func exitStatus(x ptyio.Exit) *acp.ExitStatus {
	es := &acp.ExitStatus{Signal: x.Shell.Signal}
	if x.Stopped != "" {
		es.Signal = x.Stopped
	}
	if x.Shell.Exited {
		code := x.Shell.Code
		es.ExitCode = &code
	}
	if len(x.Left) > 0 {
		pids := make([]int, len(x.Left))
		for i, l := range x.Left {
			pids[i] = l.Pid
		}
		es.Meta = map[string]any{"shellagent": map[string]any{"left": pids}}
	}
	return es
}

func exitStatusRaw(es *acp.ExitStatus) map[string]any {
	out := map[string]any{}
	if es.ExitCode != nil {
		out["exitCode"] = *es.ExitCode
	}
	if es.Signal != "" {
		out["signal"] = es.Signal
	}
	return out
}
