package supervisor

import (
	"fmt"

	"shellagent/acp"
	"shellagent/protocol"
	"shellagent/ptyio"
	"shellagent/supervisor/terminput"
	"shellagent/supervisor/work"
)

// Typing into terminals, sizing them and reading their tail: the
// _shellagent/terminal/write and _shellagent/terminal/resize methods
// (protocol.TerminalInput), and what the prompt commands /send, /keys,
// /resize and /tail (their entries are supervisor/terminput's) read of
// the session: a terminal's tail (registry.tail, host.Tail).

var _ protocol.TerminalInput = (*Supervisor)(nil)

// WriteTerminal implements protocol.TerminalInput. It is answered in
// the session's turn: after an entry doing slow work (a launch), as every
// entry is, without holding up the connection meanwhile.
func (sv *Supervisor) WriteTerminal(c protocol.Client, p *acp.WriteTerminalRequest, reply protocol.Reply) {
	onTerminal(sv, c, p.SessionID, reply, func(h host) error { return terminput.Type(h, p.TerminalID, p.Bytes()) })
}

// ResizeTerminal implements protocol.TerminalInput, answered as
// WriteTerminal is, after the terminal_update with the new size.
func (sv *Supervisor) ResizeTerminal(c protocol.Client, p *acp.ResizeTerminalRequest, reply protocol.Reply) {
	onTerminal(sv, c, p.SessionID, reply, func(h host) error { return terminput.Resize(h, p.TerminalID, *p.Size) })
}

// onTerminal answers client c's request on a terminal of sv's session
// sid with what f does, on the session's actor: {} or f's error; an error
// if there is no such session, or c no longer holds it.
func onTerminal(sv *Supervisor, c protocol.Client, sid string, reply protocol.Reply, f func(host) error) {
	s, err := sv.live.get(sid)
	if err != nil {
		reply(nil, err)
		return
	}
	s.do(func(st *state) {
		if st.out.lost(c) {
			reply(nil, errTaken(s.id))
			return
		}
		reply(done(f(host{st})))
	})
}

// done is the answer of a method that answers {} or an error.
func done(err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// tail is the /tail answer: the last lines of a terminal's output as
// plain text, running or exited (terminput.Tail).
func (r *registry) tail(id string, n int) string {
	t := r.terminals[id]
	if t == nil {
		return fmt.Sprintf("Cannot show %s: no terminal %q in this session.", id, id)
	}
	return terminput.Tail(id, t.line, terminalStatus(t), t.ring, n)
}

// terminalStatus says whether a terminal runs, or how it ended.
func terminalStatus(t *terminal) string {
	switch {
	case t.state == termStopping:
		return "stopping"
	case t.exit == nil:
		return "running"
	}
	return exitText(t.exit)
}

// exitText says how a terminal ended (work.ExitText).
func exitText(es *acp.ExitStatus) string { return work.ExitText(es) }

// shorten cuts text to at most n runes, marking the cut (work.Shorten).
func shorten(text string, n int) string { return work.Shorten(text, n) }

// shortLine cuts a command line short for a title.
func shortLine(line string) string { return shorten(line, 60) }

// Notices (terminput: the notify setting, and what each says): a
// terminal whose program waits for input (once per wait), and a
// background terminal that ends on its own. A notice is a live event, not
// history: it goes to the attached client, if any, and a replay does not
// repeat it. Whatever the setting, a connection that another client took
// the session from is told so (terminput.TakenNotice, outbox.attach).

// notice sends a notice to the attached client; it is not recorded.
func (o *outbox) notice(n *acp.Notice) {
	n.SessionUpdate = acp.KindNotice
	o.send(n)
}

// notifyIn is the notify setting that applies now: none once the session
// is closing.
func (st *state) notifyIn() terminput.Notify {
	return st.settings.Notify.In(st.life == sessionOpen)
}

// noticeExit tells that background terminal t ended on its own, as the
// notify setting says (terminput.ExitNotice).
func (o *outbox) noticeExit(t *terminal, mode terminput.Notify) {
	if n := terminput.ExitNotice(t.id, t.line, t.exit, mode); n != nil {
		o.notice(n)
	}
}

// watchInput starts watching a launched terminal for its program waiting
// for input; a wait found is noticed on the session's actor.
func (t *terminal) watchInput(s *Session) {
	t.input = terminput.Watch(t.ring, t.proc, func(wait ptyio.InputWait) {
		s.do(func(st *state) { st.out.noticeInput(t, wait, st.notifyIn()) })
	})
}

// unwatchInput stops watching a terminal that exited, and lets go of the
// watch.
func (t *terminal) unwatchInput() {
	if t.input != nil {
		t.input.Stop()
		t.input = nil
	}
}

// noticeInput tells, once per wait (terminput.Input.Noticed), that a
// running terminal's program waits for input, and how to type into it.
func (o *outbox) noticeInput(t *terminal, wait ptyio.InputWait, mode terminput.Notify) {
	if t.state != termRunning || t.input == nil || !t.input.Noticed(wait) || mode == terminput.NotifyOff {
		return
	}
	o.notice(terminput.InputNotice(t.id, t.line))
}
