package supervisor

import (
	"fmt"
	"strings"
	"time"

	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/ptyio"
)

// terminal is one command: its PTY process, its output ring, and the tool
// call that started it. Its fields are guarded by the session's mutex.
type terminal struct {
	id      string
	line    string
	call    *toolCall
	ring    *outputbuf.Ring
	proc    ptyio.Process
	started time.Time

	job        *job // the scheduled job whose firing started it
	foreground bool
	listed     bool
	returned   *ptyio.Status // the shell returned while others ran on
	exited     bool
	stopping   bool
	cancelled  bool // stopped by session/cancel or close: its tool call ends cancelled
	timer      *time.Timer
}

// toolCall is a tool call of the session: a command's, or a scheduled
// job (job != nil), or a command waiting for permission (appr != nil).
type toolCall struct {
	id      string
	title   string
	kind    string
	status  string
	cancel  bool // advertises capabilities.cancel
	shown   bool // cancel was advertised once: clearing it must be sent
	listed  bool
	input   any                        // rawInput
	content []protocol.ToolCallContent // the current content
	job     *job
	appr    *approval
}

// update is the tool call's current state as a full tool_call_update.
func (c *toolCall) update() *protocol.ToolCallUpdate {
	u := &protocol.ToolCallUpdate{
		SessionUpdate: protocol.KindToolCall, ToolCallID: c.id, Title: c.title, Kind: c.kind,
		Status: c.status, RawInput: c.input, Content: c.content,
	}
	switch {
	case c.cancel:
		u.Capabilities, c.shown = protocol.CapsCancel, true
	case c.shown:
		u.Capabilities = protocol.CapsNone
	}
	return u
}

func (c *toolCall) final() bool {
	switch c.status {
	case protocol.StatusCompleted, protocol.StatusFailed, protocol.StatusCancelled:
		return true
	}
	return false
}

// events forwards a process's lifecycle into its session.
type events struct {
	s *Session
	t *terminal
}

func (e events) ShellReturned(st ptyio.Status) { e.s.shellReturned(e.t, st) }
func (e events) Exited(x ptyio.Exit)           { e.s.exited(e.t, x) }

// launch starts line in a new terminal for call and announces the tool
// call and the terminal. It returns nil if the command could not start; its
// tool call has then failed.
func (s *Session) launch(call *toolCall, line string) *terminal {
	cfg := s.sv.cfg
	call.status = protocol.StatusInProgress
	call.input = map[string]string{"command": line, "cwd": s.cwd}
	t := &terminal{id: s.newID("term"), line: line, call: call, ring: outputbuf.New(cfg.Scrollback), started: time.Now()}
	proc, err := cfg.Launcher.Launch(ptyio.Command{
		Shell: cfg.Shell, Line: line, Dir: s.cwd, Env: s.sv.env, Size: cfg.Size,
	}, t.ring, events{s, t})
	if err != nil {
		call.status = protocol.StatusFailed
		call.content = []protocol.ToolCallContent{protocol.TextContent("Could not start the command: " + err.Error())}
		s.emit(call.update())
		return nil
	}
	t.proc = proc
	s.terminals[t.id] = t
	call.content = []protocol.ToolCallContent{protocol.TerminalContent(t.id)}
	s.emit(call.update())
	s.emitTerminal(t, s.terminalState(t))
	return t
}

// terminalState is a full terminal_update: what a client needs to show the
// terminal from scratch (without output, which the writer streams).
func (s *Session) terminalState(t *terminal) *protocol.TerminalUpdate {
	size := s.sv.cfg.Size
	return &protocol.TerminalUpdate{
		SessionUpdate: protocol.KindTerminal, TerminalID: t.id,
		Command: t.line, Cwd: s.cwd,
		Size:         &protocol.TerminalSize{Cols: int(size.Cols), Rows: int(size.Rows)},
		Capabilities: protocol.CapsCancel,
	}
}

// emitTerminal records a terminal update in the history and sends it with
// the terminal's output.
func (s *Session) emitTerminal(t *terminal, u *protocol.TerminalUpdate) {
	s.record(u)
	if s.closed || s.client == nil {
		return
	}
	s.updatedAt = time.Now()
	s.client.UpdateTerminal(s.id, u, output{t.ring}, protocol.StreamOutput)
}

// sendCurrent re-sends a live terminal and its tool call for a client that
// attaches (resume), with a replacement of the output.
func (s *Session) sendCurrent(t *terminal) {
	s.send(t.call.update())
	if s.closed || s.client == nil {
		return
	}
	s.client.UpdateTerminal(s.id, s.terminalState(t), output{t.ring}, protocol.ReplaceOutput)
}

// output is a terminal's ring as the connection reads it.
type output struct{ *outputbuf.Ring }

func (o output) Follow(notify func()) protocol.OutputFollower { return o.Ring.Follow(notify) }

// startForeground runs line as the session's foreground command, fired by
// job if not nil. If it cannot start, the turn ends.
func (s *Session) startForeground(call *toolCall, line string, j *job) {
	t := s.launch(call, line)
	if t == nil {
		s.endTurn(protocol.StopEndTurn)
		return
	}
	t.foreground, t.job = true, j
	s.fg = t
	if d := s.settings.foregroundTimeout; d > 0 {
		t.timer = time.AfterFunc(d, func() { s.timeout(t, d) })
	}
}

func (s *Session) timeout(t *terminal, d time.Duration) {
	s.mu.Lock()
	defer s.unlock()
	if t.foreground && !t.stopping {
		s.detach(t, fmt.Sprintf("Still running after the %s foreground timeout: moved to the background.", d))
	}
}

// shellReturned: the shell exited but other processes of its session run
// on ("npm run dev &"). A foreground command detaches.
func (s *Session) shellReturned(t *terminal, st ptyio.Status) {
	s.mu.Lock()
	defer s.unlock()
	t.returned = &st
	if t.foreground && !t.stopping {
		s.detach(t, "The shell returned; processes it started keep running in the background.")
	}
}

// detach hands a live command over to the background: its tool call
// completes, its terminal is listed, and the foreground turn (if it was the
// foreground) ends.
func (s *Session) detach(t *terminal, why string) {
	wasForeground := t.foreground
	if wasForeground {
		t.foreground = false
		s.fg = nil
		if t.timer != nil {
			t.timer.Stop()
		}
	}
	t.call.status = protocol.StatusCompleted
	s.listTerminal(t)
	t.call.content = []protocol.ToolCallContent{protocol.TerminalContent(t.id), protocol.TextContent(why + " " + detachNote(t))}
	u := &protocol.ToolCallUpdate{
		SessionUpdate: protocol.KindToolCall, ToolCallID: t.call.id, Status: t.call.status, Content: t.call.content,
	}
	if t.returned != nil {
		u.RawOutput = exitStatusRaw(exitStatus(ptyio.Exit{Shell: *t.returned}))
	}
	s.emit(u)
	if wasForeground {
		s.endTurn(protocol.StopEndTurn)
	}
}

func detachNote(t *terminal) string {
	return fmt.Sprintf("It runs on in terminal %s; stop it with terminal/cancel or /stop %s.", t.id, t.id)
}

// stop starts (or, the second time, hurries) the TERM→KILL escalation of a
// terminal's processes.
func (s *Session) stop(t *terminal) {
	t.stopping = true
	t.proc.Stop(s.settings.killGrace)
}

// exited: no process of the terminal is left. Its exitStatus goes out
// first, then the tool call's final status (foreground) or the removal from
// the list (background).
func (s *Session) exited(t *terminal, x ptyio.Exit) {
	s.mu.Lock()
	defer s.unlock()
	t.exited = true
	if t.timer != nil {
		t.timer.Stop()
	}
	if x.Err != nil {
		s.sv.cfg.Log.Warn("terminal ended with errors", "session", s.id, "terminal", t.id, "err", x.Err)
	}
	status := exitStatus(x)
	u := &protocol.TerminalUpdate{
		SessionUpdate: protocol.KindTerminal, TerminalID: t.id,
		ExitStatus: status, Capabilities: protocol.CapsNone,
	}
	s.emitTerminal(t, u)
	s.retire(t)
	switch {
	case t.foreground:
		t.foreground = false
		s.fg = nil
		t.call.status = callOutcome(t, status)
		s.emit(&protocol.ToolCallUpdate{
			SessionUpdate: protocol.KindToolCall, ToolCallID: t.call.id,
			Status: t.call.status, RawOutput: exitStatusRaw(status),
		})
		stop := protocol.StopEndTurn
		if t.cancelled {
			stop = protocol.StopCancelled
		}
		s.endTurn(stop)
	case t.listed:
		s.unlistTerminal(t)
	}
	s.finishClose()
}

func callOutcome(t *terminal, es *protocol.ExitStatus) string {
	switch {
	case t.cancelled:
		return protocol.StatusCancelled
	case es.Signal == "" && es.ExitCode != nil && *es.ExitCode == 0:
		return protocol.StatusCompleted
	}
	return protocol.StatusFailed
}

// exitStatus follows SPEC "A command's life" 7: the shell's wait status when
// nothing stopped it; the last signal the agent had to send when it did,
// with the shell's exit code if it exited with one.
func exitStatus(x ptyio.Exit) *protocol.ExitStatus {
	es := &protocol.ExitStatus{Signal: x.Shell.Signal}
	if x.Stopped != "" {
		es.Signal = x.Stopped
	}
	if x.Shell.Exited {
		code := x.Shell.Code
		es.ExitCode = &code
	}
	return es
}

func exitStatusRaw(es *protocol.ExitStatus) map[string]any {
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
func (s *Session) listing() string {
	if len(s.list.items) == 0 {
		return "No background work."
	}
	var b strings.Builder
	b.WriteString("Background work:")
	now := time.Now()
	for _, it := range s.list.items {
		b.WriteString("\n")
		switch {
		case it.term != nil:
			t := it.term
			state := "running"
			if t.stopping {
				state = "stopping"
			}
			fmt.Fprintf(&b, "%s  terminal  %s  age %s  %s%s", t.id, t.line, age(now.Sub(t.started)), state, members(t.proc))
		case it.call.job != nil:
			j := it.call.job
			fmt.Fprintf(&b, "%s  %s  %s  age %s  %s, next run in %s", j.call.id, j.name(), j.line, age(now.Sub(j.created)), j.call.status, age(j.next.Sub(now)))
		case it.call.appr != nil:
			a := it.call.appr
			fmt.Fprintf(&b, "%s  command  %s  age %s  %s, waiting for permission", a.call.id, a.line, age(now.Sub(a.asked)), a.call.status)
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
