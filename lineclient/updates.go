package lineclient

import (
	"fmt"
	"strings"

	"shellagent/acp"
	"shellagent/internal/clientview"
	"shellagent/termtext"
)

// handleUpdate applies a session update to the session and prints it,
// and moves a script on when the update ends the turn it waits for.
func (c *client) handleUpdate(u *clientview.Update) {
	switch u.SessionUpdate {
	case "user_message":
		if w := c.wait; w != nil && w.messageID != "" && u.MessageID == w.messageID {
			w.userSeq = c.seq
		}
	case "state_update":
		c.paceState(c.view.stateUpdate(u))
	case "notice":
		if u.Meta.Shellagent.Event == acp.EventSessionTaken {
			c.taken = true
		}
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
	// seen is where each terminal's output stands for the client: its
	// bytes from the first, those the agent dropped included.
	seen map[string]int64

	// In terminal mode: started announces a new terminal if it takes the
	// screen, and raw takes terminal output instead of the printer.
	started func(*clientview.Terminal) bool
	raw     func(id string, data []byte)
}

// output shows a chunk of a terminal's output.
func (v *view) output(id string, data []byte) {
	v.saw(id, v.seen[id]+int64(len(data)))
	if v.raw != nil {
		v.raw(id, data)
		return
	}
	v.p.output(id, data, v.sess.Live() > 1)
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
func (v *view) notice(u *clientview.Update, attach bool) {
	if u.Title == nil {
		return
	}
	if id := u.Meta.Shellagent.TerminalID; u.Meta.Shellagent.Event == acp.EventWaitingForInput && id != "" {
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
	if id := u.Meta.Shellagent.TerminalID; attach && u.Meta.Shellagent.Event == acp.EventWaitingForInput && id != "" {
		v.p.note("/attach " + id + " types into it")
	}
}

// show applies an update other than a state_update.
func (v *view) show(u *clientview.Update) {
	switch u.SessionUpdate {
	case "agent_message":
		text := clientview.ContentText(u.Content)
		if last := v.lastFinal; last != "" {
			v.lastFinal = ""
			if strings.TrimSpace(text) == last {
				return
			}
		}
		v.p.text(text)
	case "agent_message_chunk":
		v.p.stream(clientview.ContentText(u.Content))
	case "terminal_update":
		v.terminalUpdate(u)
	case "terminal_output_chunk":
		data, err := u.Chunk()
		if err != nil {
			v.p.note(err.Error())
			return
		}
		v.output(u.TerminalID, data)
	case "tool_call_update", "tool_call":
		v.toolCallUpdate(u)
	}
}

// stateUpdate takes a new snapshot, the state and the background list,
// and returns its stop reason ("" for none).
func (v *view) stateUpdate(u *clientview.Update) string {
	s := v.sess
	changed := s.ApplyState(u)
	stopReason := ""
	if u.StopReason != nil {
		stopReason = *u.StopReason
	}
	if s.State == "idle" && stopReason == "cancelled" {
		v.p.note("turn cancelled")
	}
	// An emptied list printed while running is printed again once the
	// session is idle, to say it is quiet.
	if changed || (s.Quiet() && v.lastListing == "background: none") {
		v.lastListing = s.listing()
		v.p.note(v.lastListing)
	}
	for _, id := range s.NewlyAbandoned() {
		v.p.note(id + " abandoned: unfinished, not listed, and the session is idle")
	}
	return stopReason
}

// terminalUpdate creates or patches a terminal. While resuming, a
// terminal the client had not seen that still runs ran before it came.
func (v *view) terminalUpdate(u *clientview.Update) {
	s := v.sess
	t, isNew := s.ApplyTerminal(u)
	switch {
	case !isNew:
	case s.Resuming && u.ExitStatus == nil:
		what := t.ID + " runs"
		if t.Command != "" {
			what += ": " + t.Command
		}
		v.p.note(what)
	case v.started != nil && v.started(t):
	default:
		if t.Command == "" || t.Command == v.lastLine {
			v.p.note(t.ID + " started")
		} else {
			v.p.note(t.ID + " started: " + t.Command)
		}
	}
	if u.Output != nil {
		v.snapshot(t, u.Output, isNew)
	}
	if s.ApplyExit(t, u.ExitStatus) {
		v.p.ended(t.ID)
		v.p.note(t.ID + " ended: " + t.Exit.String())
	}
}

// snapshot handles a replacement snapshot of a terminal's output: shown in
// full for a terminal the client had not seen (its last resumeTail lines
// while resuming), else only noted, since what was printed cannot be
// taken back.
func (v *view) snapshot(t *clientview.Terminal, out *clientview.TerminalOutput, isNew bool) {
	data, err := out.Decode(t.ID)
	if err != nil {
		v.p.note(err.Error())
		return
	}
	if !isNew && v.sess.Resuming {
		v.unseen(t.ID, out.Dropped(), data)
		return
	}
	if dropped := out.Dropped(); dropped > 0 {
		if !isNew {
			dropped += v.seen[t.ID] // the bytes it will never get, from where it stood
		}
		v.saw(t.ID, dropped+int64(len(data)))
		v.p.note(fmt.Sprintf("%s: %d bytes of output were dropped; it continues from here", t.ID, out.Dropped()))
		return
	}
	switch {
	case isNew && v.sess.Resuming:
		v.saw(t.ID, int64(len(data)))
		if v.raw != nil {
			v.raw(t.ID, data) // terminal mode keeps it, for /attach
		}
		v.p.output(t.ID, data[termtext.LastLinesStart(data, resumeTail):], v.sess.Live() > 1)
	case isNew:
		v.output(t.ID, data) // counts it
	default: // the client's copy replaced, from the terminal's first byte
		v.saw(t.ID, int64(len(data)))
	}
}

// unseen shows, of a known terminal's output as a resume after a
// reconnect sends it (data, after the dropped bytes the agent no longer
// holds), what the client has not seen: what the terminal wrote while
// the client was away.
func (v *view) unseen(id string, dropped int64, data []byte) {
	seen, end := v.seen[id], dropped+int64(len(data))
	switch {
	case seen >= end:
		return
	case seen < dropped:
		v.p.note(fmt.Sprintf("%s: %d bytes of output written meanwhile were dropped; it continues from here", id, dropped-seen))
		seen = dropped
		v.saw(id, seen)
	}
	v.output(id, data[seen-dropped:])
}

// saw records that the client's copy of terminal id's output ends at
// byte n of it.
func (v *view) saw(id string, n int64) {
	if v.seen == nil {
		v.seen = make(map[string]int64)
	}
	v.seen[id] = n
}

// toolCallUpdate creates or patches a tool call. A command's tool call
// (kind execute) is shown through its terminal: only its pending state
// and its final status with text, or a cancellation, are printed. Other
// tool calls (scheduled jobs, watchers) are printed at every status.
func (v *view) toolCallUpdate(u *clientview.Update) {
	tc, isNew, old := v.sess.ApplyToolCall(u)
	if (!isNew && tc.Status == old) || (v.sess.Resuming && tc.Kind == "execute") {
		return // while resuming, a command is told by its terminal ("term_1 runs")
	}
	text := strings.TrimSpace(clientview.ContentText(u.Content))
	if tc.Kind == "execute" {
		switch {
		case tc.Status == "pending":
		case tc.Status == "cancelled":
		case clientview.Final(tc.Status) && text != "":
		default:
			return
		}
	}
	note := tc.ID + " " + tc.Status
	switch {
	case text != "":
		note += ": " + text
		if clientview.Final(tc.Status) {
			v.lastFinal = text
		}
	case tc.Title != "" && (tc.Kind != "execute" || tc.Status == "pending"):
		note += ": " + tc.Title
	}
	v.p.note(note)
}
