package supervisor

import (
	"fmt"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/ptyio"
)

// A command's life, top to bottom. A prompt's command runs in the
// foreground (runForeground) or, with /bg, in the background
// (runBackground); in permission mode "ask" it first waits for the user
// (permission.go). launch starts it in a PTY and announces its tool call
// and terminal. A foreground command leaves the foreground while it runs
// on the foreground timeout, /bg, or its shell returning (detach), which
// completes its tool call and lists its terminal. It is stopped (stop) or
// ends on its own (exited): its exitStatus goes out first, then its tool
// call's outcome and the end of its turn, or its removal from the list.

// runForeground runs the turn's command as foreground work: at once, or
// after the user allows it in permission mode "ask".
func (st *state) runForeground(t *turn) {
	if st.settings.ask {
		t.call = st.newCall(callAsking, "execute", t.in.line)
		st.turns.take(t, turnAsking)
		st.ask(t.call, t.in.line, t)
		return
	}
	t.call = st.newCall(callRunning, "execute", t.in.line)
	st.turns.take(t, turnRunning)
	st.transition(acp.StateRunning, "")
	st.startForeground(t)
}

// runBackground starts line directly as background work.
func (st *state) runBackground(line string) {
	if st.settings.ask {
		st.ask(st.newCall(callAsking, "execute", line), line, nil)
		return
	}
	call := st.newCall(callRunning, "execute", line)
	if t := st.launch(call, line); t != nil {
		st.detach(t, "Started in the background.")
	}
}

// startForeground launches the command of the turn that holds the
// foreground and arms its foreground timeout. If it cannot start, the turn
// ends.
func (st *state) startForeground(t *turn) {
	term := st.launch(t.call, t.in.line)
	if term == nil {
		st.turns.release(t)
		st.endTurn(acp.StopEndTurn)
		return
	}
	t.term = term
	if d := st.settings.foregroundTimeout; d > 0 {
		t.timer = time.AfterFunc(d, func() { st.s.timeout(t, d) })
	}
}

// launch starts line in a new terminal for call and announces the tool
// call and the terminal. It returns nil if the command could not start;
// its tool call has then failed.
func (st *state) launch(call *toolCall, line string) *terminal {
	s, cfg := st.s, st.s.sv.cfg
	call.state = callRunning
	call.input = map[string]string{"command": line, "cwd": s.cwd}
	t := &terminal{
		id: st.work.newID("term"), line: line, cwd: s.cwd, size: cfg.Size, call: call,
		ring: outputbuf.New(cfg.Scrollback), started: time.Now(),
	}
	proc, err := cfg.Launcher.Launch(ptyio.Command{
		Shell: cfg.Shell, Line: line, Dir: s.cwd, Env: s.sv.env, Size: cfg.Size,
	}, t.ring, events{s, t})
	if err != nil {
		call.content = []acp.ToolCallContent{acp.TextContent("Could not start the command: " + err.Error())}
		st.work.finish(call, acp.StatusFailed)
		st.out.send(call.update())
		return nil
	}
	t.proc, call.term = proc, t
	st.work.addTerminal(t)
	call.content = []acp.ToolCallContent{acp.TerminalContent(t.id)}
	st.out.send(call.update())
	st.out.announceTerminal(t)
	return t
}

// events forwards a process's lifecycle into its session.
type events struct {
	s *Session
	t *terminal
}

func (e events) ShellReturned(st ptyio.Status) { e.s.shellReturned(e.t, st) }
func (e events) Exited(x ptyio.Exit)           { e.s.exited(e.t, x) }

// timeout serves the foreground timeout of turn t.
func (s *Session) timeout(t *turn, d time.Duration) {
	s.do(func(st *state) {
		if st.turns.fg == t && t.term.state == termRunning {
			st.detach(t.term, fmt.Sprintf("Still running after the %s foreground timeout: moved to the background.", d))
		}
	})
}

// shellReturned: the shell exited but other processes of its session run
// on ("npm run dev &"). A foreground command detaches.
func (s *Session) shellReturned(t *terminal, status ptyio.Status) {
	s.do(func(st *state) {
		t.returned = &status
		if st.turns.foreground(t) && t.state == termRunning {
			st.detach(t, "The shell returned; processes it started keep running in the background.")
		}
	})
}

// detach hands a running command over to the background: its tool call
// completes, its terminal is listed, and the foreground turn (if it was
// the foreground) ends.
func (st *state) detach(t *terminal, why string) {
	wasForeground := st.turns.foreground(t)
	if wasForeground {
		st.turns.release(st.turns.fg)
	}
	st.work.finish(t.call, acp.StatusCompleted)
	st.list.addTerminal(t)
	t.call.content = []acp.ToolCallContent{acp.TerminalContent(t.id), acp.TextContent(why + " " + detachNote(t))}
	u := &acp.ToolCallUpdate{
		SessionUpdate: acp.KindToolCall, ToolCallID: t.call.id, Status: t.call.status(), Content: t.call.content,
	}
	if t.returned != nil {
		t.call.output = exitStatusRaw(exitStatus(ptyio.Exit{Shell: *t.returned}))
		u.RawOutput = t.call.output
	}
	st.out.send(u)
	if wasForeground {
		st.endTurn(acp.StopEndTurn)
	}
}

func detachNote(t *terminal) string {
	return fmt.Sprintf("It runs on in terminal %s; stop it with terminal/cancel or /stop %s.", t.id, t.id)
}

// stop starts (or, the second time, hurries) the TERM→KILL escalation of
// the terminal's processes.
func (t *terminal) stop(grace time.Duration) {
	t.state = termStopping
	t.proc.Stop(grace)
}

// exited: no process of the terminal is left. Its exitStatus goes out
// first, then the tool call's outcome and the end of the turn
// (foreground), or the removal from the list (background).
func (s *Session) exited(t *terminal, x ptyio.Exit) {
	s.do(func(st *state) {
		if x.Err != nil {
			s.sv.cfg.Log.Warn("terminal ended with errors", "session", s.id, "terminal", t.id, "err", x.Err)
		}
		t.exit = exitStatus(x)
		st.out.sendTerminal(t, &acp.TerminalUpdate{
			SessionUpdate: acp.KindTerminal, TerminalID: t.id,
			ExitStatus: t.exit, Capabilities: acp.CapsNone,
		}, protocol.StreamOutput)
		st.work.exit(t)
		fg := st.turns.fg
		if !st.turns.foreground(t) {
			st.list.removeTerminal(t)
			return
		}
		cancelled := fg.state == turnCancelling
		st.turns.release(fg)
		st.work.finish(t.call, callOutcome(cancelled, t.exit))
		t.call.output = exitStatusRaw(t.exit)
		st.out.send(&acp.ToolCallUpdate{
			SessionUpdate: acp.KindToolCall, ToolCallID: t.call.id,
			Status: t.call.status(), RawOutput: t.call.output,
		})
		stop := acp.StopEndTurn
		if cancelled {
			stop = acp.StopCancelled
		}
		st.endTurn(stop)
	})
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

// exitStatus follows README.md "The life of a command": the shell's wait
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

// listing is the /ps report: one line per piece of background work.
func (st *state) listing() string {
	if len(st.list.items) == 0 {
		return "No background work."
	}
	var b strings.Builder
	b.WriteString("Background work:")
	now := time.Now()
	for _, it := range st.list.items {
		b.WriteString("\n")
		switch {
		case it.term != nil:
			t := it.term
			state := "running"
			if t.state == termStopping {
				state = "stopping"
			}
			fmt.Fprintf(&b, "%s  terminal  %s  age %s  %s%s", t.id, t.line, age(now.Sub(t.started)), state, members(t.proc))
		case it.call.job != nil:
			j := it.call.job
			fmt.Fprintf(&b, "%s  %s  %s  age %s  %s, next run in %s", j.call.id, j.name(), j.line, age(now.Sub(j.created)), j.call.status(), age(j.next.Sub(now)))
		case it.call.appr != nil:
			a := it.call.appr
			fmt.Fprintf(&b, "%s  command  %s  age %s  %s, waiting for permission", a.call.id, a.line, age(now.Sub(a.asked)), a.call.status())
		}
	}
	return b.String()
}

// members lists a terminal's live processes for /ps: ", pid 123 sleep 30,
// pid 456 node server.js".
func members(p ptyio.Process) string {
	const most = 10 // processes named; the rest are counted
	ms, err := p.Members()
	if err != nil {
		return ", processes unknown: " + err.Error()
	}
	var b strings.Builder
	for i, m := range ms {
		if i == most {
			fmt.Fprintf(&b, ", and %d more", len(ms)-most)
			break
		}
		cmd := m.Command
		if r := []rune(cmd); len(r) > 60 {
			cmd = string(r[:59]) + "…"
		}
		fmt.Fprintf(&b, ", pid %d %s", m.Pid, cmd)
	}
	return b.String()
}

func age(d time.Duration) string {
	return max(d, 0).Round(time.Second).String()
}
