package lineclient

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// handleUpdate applies a session update to the session and prints it,
// and moves a script on when the update ends the turn it waits for.
func (c *client) handleUpdate(u *update) {
	switch u.SessionUpdate {
	case "user_message":
		if w := c.wait; w != nil && w.messageID != "" && u.MessageID == w.messageID {
			w.userSeq = c.seq
		}
	case "state_update":
		c.paceState(c.view.stateUpdate(u))
	case "notice":
		if c.tty == nil || !c.tty.mutes(u) {
			c.view.notice(u, c.tty != nil)
		}
	default:
		if c.tty != nil && c.tty.says(u) {
			c.tty.through = true
			c.view.show(u)
			c.tty.told()
		} else {
			c.view.show(u)
		}
		if c.tty != nil {
			c.tty.updated(u)
		}
	}
}

// resumeTail is how many lines of each running terminal's output the
// client shows when it reattaches to a session.
const resumeTail = 20

// view applies the agent's updates to the client's session and prints
// them. It belongs to the client's event loop.
type view struct {
	p           *printer
	sess        *session
	lastLine    string // the last line sent as a prompt
	lastListing string // the last background listing printed
	// lastFinal is the text of the tool call final status printed last,
	// until the next agent message: a message that says the same (a
	// wait's result, a watch's end) is not printed again.
	lastFinal string
	// typedInto holds the terminals the person typed into (/send, /keys)
	// since the agent last said they wait for input.
	typedInto map[string]bool
	// resuming is set while session/resume brings the client up to
	// date: each terminal it reports runs already, and only the tail of
	// its output is shown (resumeTail lines).
	resuming bool

	// In terminal mode: started announces a new terminal if it takes the
	// screen, and raw takes terminal output instead of the printer.
	started func(*terminal) bool
	raw     func(id string, data []byte)
}

// output shows a chunk of a terminal's output.
func (v *view) output(id string, data []byte) {
	if v.raw != nil {
		v.raw(id, data)
		return
	}
	v.p.output(id, data, v.sess.live() > 1)
}

// typing records a prompt line that types into a terminal: /send ID …
// or /keys ID ….
func (v *view) typing(line string) {
	f := strings.Fields(line)
	if len(f) >= 2 && (f[0] == "/send" || f[0] == "/keys") {
		if v.typedInto == nil {
			v.typedInto = make(map[string]bool)
		}
		v.typedInto[f[1]] = true
	}
}

// notice prints a notice: its title as a note ("warning: " first for a
// warning or an error), and its description. With attach set, a terminal
// waiting for input is said to be one /attach away. A terminal that waits
// for input again after the person typed into it is not said to wait
// again: they answered it and see what it prints (the agent says it once
// per wait, and a wait after typed input is a new one); input from
// elsewhere (another client) leaves the next one said.
func (v *view) notice(u *update, attach bool) {
	if u.Title == nil {
		return
	}
	if id := u.Meta.Shellagent.TerminalID; u.Meta.Shellagent.Event == "waiting_for_input" && id != "" {
		typed := v.typedInto[id]
		delete(v.typedInto, id)
		if typed {
			return
		}
	}
	title := *u.Title
	if u.Severity == "warning" || u.Severity == "error" {
		title = u.Severity + ": " + title
	}
	v.p.note(title)
	v.p.text(u.Description)
	if id := u.Meta.Shellagent.TerminalID; attach && u.Meta.Shellagent.Event == "waiting_for_input" && id != "" {
		v.p.note("/attach " + id + " types into it")
	}
}

// show applies an update other than a state_update.
func (v *view) show(u *update) {
	switch u.SessionUpdate {
	case "agent_message":
		text := contentText(u.Content)
		if last := v.lastFinal; last != "" {
			v.lastFinal = ""
			if strings.TrimSpace(text) == last {
				return
			}
		}
		v.p.text(text)
	case "agent_message_chunk":
		v.p.stream(contentText(u.Content))
	case "terminal_update":
		v.terminalUpdate(u)
	case "terminal_output_chunk":
		data, err := base64.StdEncoding.DecodeString(u.Data)
		if err != nil {
			v.p.note(fmt.Sprintf("%s: output that is not base64: %v", u.TerminalID, err))
			return
		}
		v.output(u.TerminalID, data)
	case "tool_call_update", "tool_call":
		v.toolCallUpdate(u)
	}
}

// stateUpdate takes a new snapshot, the state and the background list,
// and returns its stop reason ("" for none).
func (v *view) stateUpdate(u *update) string {
	s := v.sess
	before, beforeReported := s.bg, s.bgReported
	s.state = u.State
	s.bg, s.bgReported = decodeBackground(u.Background)
	stopReason := ""
	if u.StopReason != nil {
		stopReason = *u.StopReason
	}
	if s.state == "idle" && stopReason == "cancelled" {
		v.p.note("turn cancelled")
	}
	changed := s.bgReported != beforeReported || !sameList(s.bg, before)
	// An emptied list printed while running is printed again once the
	// session is idle, to say it is quiet.
	if changed || (s.quiet() && v.lastListing == "background: none") {
		v.lastListing = s.listing()
		v.p.note(v.lastListing)
	}
	for _, id := range s.newlyAbandoned() {
		v.p.note(id + " abandoned: unfinished, not listed, and the session is idle")
	}
	return stopReason
}

// terminalUpdate creates or patches a terminal.
func (v *view) terminalUpdate(u *update) {
	s := v.sess
	t := s.terminals[u.TerminalID]
	isNew := t == nil
	if isNew {
		t = &terminal{id: u.TerminalID}
		s.terminals[u.TerminalID] = t
	}
	if u.Command != nil {
		t.command = *u.Command
	}
	switch {
	case !isNew:
	case v.resuming && u.ExitStatus == nil:
		what := t.id + " runs"
		if t.command != "" {
			what += ": " + t.command
		}
		v.p.note(what)
	case v.started != nil && v.started(t):
	default:
		if t.command == "" || t.command == v.lastLine {
			v.p.note(t.id + " started")
		} else {
			v.p.note(t.id + " started: " + t.command)
		}
	}
	if u.Output != nil {
		v.snapshot(t, u.Output, isNew)
	}
	if u.ExitStatus != nil && t.exit == nil {
		t.exit = u.ExitStatus
		v.p.ended(t.id)
		v.p.note(t.id + " ended: " + t.exit.String())
	}
}

// snapshot handles a replacement snapshot of a terminal's output: shown in
// full for a terminal the client had not seen (its last resumeTail lines
// while resuming), else only noted, since what was printed cannot be
// taken back.
func (v *view) snapshot(t *terminal, out *terminalOutput, isNew bool) {
	data, err := base64.StdEncoding.DecodeString(out.Data)
	if err != nil {
		v.p.note(fmt.Sprintf("%s: output that is not base64: %v", t.id, err))
		return
	}
	if dropped := out.Meta.Shellagent.DroppedBytes; dropped > 0 {
		v.p.note(fmt.Sprintf("%s: %d bytes of output were dropped; it continues from here", t.id, dropped))
		return
	}
	switch {
	case isNew && v.resuming:
		if v.raw != nil {
			v.raw(t.id, data) // terminal mode keeps it, for /attach
		}
		v.p.output(t.id, lastLines(data, resumeTail), v.sess.live() > 1)
	case isNew:
		v.output(t.id, data)
	}
}

// toolCallUpdate creates or patches a tool call. A command's tool call
// (kind execute) is shown through its terminal: only its pending state
// and its final status with text, or a cancellation, are printed. Other
// tool calls (scheduled jobs, watchers) are printed at every status.
func (v *view) toolCallUpdate(u *update) {
	s := v.sess
	tc := s.calls[u.ToolCallID]
	isNew := tc == nil
	if isNew {
		tc = &toolCall{id: u.ToolCallID}
		s.calls[u.ToolCallID] = tc
	}
	old := tc.status
	if u.Title != nil {
		tc.title = *u.Title
	}
	if u.Kind != nil {
		tc.kind = *u.Kind
	}
	if u.Status != nil {
		tc.status = *u.Status
	}
	if refs := terminalRefs(u.Content); len(refs) > 0 {
		tc.terminals = refs
	}
	if (!isNew && tc.status == old) || (v.resuming && tc.kind == "execute") {
		return // while resuming, a command is told by its terminal ("term_1 runs")
	}
	text := strings.TrimSpace(contentText(u.Content))
	if tc.kind == "execute" {
		switch {
		case tc.status == "pending":
		case tc.status == "cancelled":
		case isFinal(tc.status) && text != "":
		default:
			return
		}
	}
	note := tc.id + " " + tc.status
	switch {
	case text != "":
		note += ": " + text
		if isFinal(tc.status) {
			v.lastFinal = text
		}
	case tc.title != "" && (tc.kind != "execute" || tc.status == "pending"):
		note += ": " + tc.title
	}
	v.p.note(note)
}
