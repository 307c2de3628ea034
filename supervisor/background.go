package supervisor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/ptyio"
	"shellagent/supervisor/work"
)

// The background list and the RFD rules it follows ("The background list
// on state snapshots"). Every rule is kept here, by construction:
//
//  1. background is on every state_update: reportState (through which
//     transition and settle report) is the only code that writes a
//     state_update but for a scenario's (kit.Scene.Report, kit.go), and
//     it always includes the list ([] if empty).
//  2. Items are announced before they are listed: a terminal is listed
//     only by detach, after launch has sent its terminal_update; a tool
//     call only after its tool_call_update.
//  3. Items are finalized before they are removed: drop refuses a
//     terminal that has not exited and a tool call that is not final, and
//     is called after the update that says so.
//  4. A list change is re-sent: it marks the list dirty, and the way into
//     the session (Session.do) ends by sending a repeated state_update
//     (the current state, no stop reason) unless a state transition in the
//     same event already carried the new list. So follow-up work is
//     reported with the removal, never as idle with an emptied list
//     followed at once by running.
//  5. Each piece of work is listed once: a command is listed as its
//     terminal, never also as its tool call. A background command waiting
//     for permission has no terminal yet and is listed as its tool call;
//     once it runs, replaceCall swaps the tool call for the terminal in
//     one state_update.
//  6. Only background work is listed: the foreground command is listed
//     only once it has left the foreground (detach), and a scheduled job's
//     firing, which is new foreground work, never is.
//  7. A permission request for listed work is sent only after a state_update
//     that lists it (supervisor/approval's Ask, through host.Waiting in
//     permission.go).

// maxListed bounds the background list for the commands that add to it
// (/bg, /after, /every, /watch): each item is sent in every state_update
// of the session, so that a list without bound would make each change
// cost more (10,000 /after took 214 s, each state_update 400 KB), and
// jobs and watches, which hold no process or terminal, meet no other
// limit.
const maxListed = 256

// listFull returns the -32600 that refuses the prompt in, a command that
// lists what it starts, while st lists maxListed items; else nil. /bg
// alone while a command runs in the foreground starts nothing: it moves
// that command's terminal, which its PTY bounds as every terminal's, to
// the list. Other foreground work (a wait) it would list beyond bound.
func listFull(st *state, in input) error {
	n := len(st.list.items)
	movesCommand := in.cmd.name == "bg" && in.line == "" && st.turns.fg != nil && st.turns.fg.term != nil
	if !in.cmd.lists || movesCommand || n < maxListed {
		return nil
	}
	return &acp.Error{Code: acp.CodeInvalidRequest,
		Message: fmt.Sprintf("session/prompt: /%s: the session lists %d pieces of background work already, the most it keeps; stop some (/stop, tool_call/cancel, terminal/cancel) first", in.cmd.name, n),
		Data:    map[string]int{"listed": n}}
}

// backgroundList is the ordered background work of a session: terminals,
// and tool calls that run without a process of their own (scheduled jobs,
// background commands waiting for permission).
type backgroundList struct {
	items []listItem
	dirty bool // changed since the last state_update
}

// listItem is a terminal or a tool call.
type listItem struct {
	term *terminal
	call *toolCall
}

// final reports whether the item has reached its end: a terminal that
// has exited, a tool call with its final status.
func (it listItem) final() bool {
	if it.term != nil {
		return it.term.state >= termExited
	}
	return it.call.state >= callDone
}

// add lists an announced terminal (one that has left the foreground) or
// tool call, once, unless it is final.
func (l *backgroundList) add(it listItem) {
	if it.final() || l.index(it) >= 0 {
		return
	}
	l.items = append(l.items, it)
	l.dirty = true
}

// drop unlists a terminal whose exitStatus, or a tool call whose final
// status, has been reported; it leaves one that is not final.
func (l *backgroundList) drop(it listItem) {
	if i := l.index(it); i >= 0 && it.final() {
		l.items = slices.Delete(l.items, i, i+1)
		l.dirty = true
	}
}

// endCall gives tool call c its final status, sends the update that says
// so, then unlists it if it was listed: rule 3, in the one order it
// allows.
func endCall(st *state, c *toolCall, status string) {
	st.work.finish(c, status)
	st.out.send(c.update())
	st.list.drop(listItem{call: c})
}

// replaceCall lists a background command's terminal in place of its tool
// call, once it runs: the same piece of work, listed once, in its place.
func (l *backgroundList) replaceCall(c *toolCall, t *terminal) {
	i := l.index(listItem{call: c})
	if i < 0 || t.state >= termExited {
		return
	}
	l.items[i] = listItem{term: t}
	l.dirty = true
}

func (l *backgroundList) index(it listItem) int {
	return slices.Index(l.items, it)
}

// wire is the session's own work as a state_update lists it (the overlay
// adds to it: listed).
func (l *backgroundList) wire() acp.Background {
	out := make(acp.Background, 0, len(l.items))
	for _, it := range l.items {
		if it.term != nil {
			out = append(out, acp.BackgroundItem{Type: "terminal", TerminalID: it.term.id})
		} else {
			out = append(out, acp.BackgroundItem{Type: "tool_call", ToolCallID: it.call.id})
		}
	}
	return out
}

// transition reports a foreground state change with the current list.
// While closing, nothing is reported: the close reports the outcome once.
func (st *state) transition(fgState, stopReason string) {
	st.fgState = fgState
	if st.life == sessionOpen {
		st.reportState(stopReason)
	}
}

// reportState sends a state_update: the current foreground state, the stop
// reason given (empty for a repeated one) and the current list. The
// failure left for it goes with it.
func (st *state) reportState(stopReason string) { st.reportWith(stopReason, nil) }

// reportWith is reportState with meta as the update's _meta (a
// scenario's mark, kit.Scene.Running).
func (st *state) reportWith(stopReason string, meta map[string]any) {
	st.list.dirty = false
	u := &acp.StateUpdate{
		SessionUpdate: acp.KindState, State: st.fgState, StopReason: stopReason, Background: st.kit.listed(&st.list), Meta: meta,
	}
	if stopReason == acp.StopError {
		u.Error = st.failure
	}
	st.failure = nil
	st.out.send(u)
}

// processes returns the processes of the listed terminals, in order: what
// /ps scans (members), as slow work.
func (l *backgroundList) processes() []ptyio.Process {
	var out []ptyio.Process
	for _, it := range l.items {
		if it.term != nil {
			out = append(out, it.term.proc)
		}
	}
	return out
}

// listing is the /ps report: one line per piece of background work, with
// the members found for each listed terminal, in order, then what the
// overlay lists, as of now.
func (l *backgroundList) listing(now time.Time, found []string, overlaid []acp.BackgroundItem) string {
	if len(l.items) == 0 && len(overlaid) == 0 {
		return "No background work."
	}
	var b strings.Builder
	b.WriteString("Background work:")
	for _, it := range l.items {
		b.WriteString("\n")
		switch {
		case it.term != nil:
			t := it.term
			state := "running"
			if t.state == termStopping {
				state = "stopping"
			}
			fmt.Fprintf(&b, "%s  terminal  %s  age %s  %s%s", t.id, t.line, work.Age(now.Sub(t.started)), state, found[0])
			found = found[1:]
		default: // a listed tool call is a task's: a command's is listed as its terminal
			b.WriteString(it.call.task.listing(now))
		}
	}
	for _, p := range overlaid {
		fmt.Fprintf(&b, "\n%s  %s  listed by a scenario (/scenario)", cmp.Or(p.ToolCallID, p.TerminalID, "-"), p.Type)
	}
	return b.String()
}

// members lists a terminal's live processes for /ps: ", pid 123 sleep 30,
// pid 456 node server.js". It reads /proc: slow work (state.slow).
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
		fmt.Fprintf(&b, ", pid %d %s", m.Pid, shorten(m.Command, 60))
	}
	return b.String()
}
