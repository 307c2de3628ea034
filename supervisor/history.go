package supervisor

import (
	"strconv"
	"time"

	"shellagent/acp"
	"shellagent/internal/clientcheck"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/supervisor/history"
	"shellagent/supervisor/record"
	"shellagent/supervisor/terminput"
)

// An outbox is where a session's updates go: to the client attached to the
// session, if one is, and, for what a replay must restore, into the
// history. It is part of the session's state.
//
// The history is not a log of updates: it holds each message, tool call
// and terminal once, in the order they were first reported, and a replay
// sends each item as it is now. So the history holds no update that could
// keep a ring alive, and retired work (see registry) drops out of it. Its
// rules (what it keeps, in what order) are package history's.
type outbox struct {
	session   string
	client    protocol.Client     // nil while detached, and once the session is closed
	since     time.Time           // when client last changed: attached, detached, or created
	updatedAt time.Time           // when the session last reported something
	messages  int                 // messages so far: the last message id issued
	history   history.List[entry] // each item once, in the order first reported
	ads       clientcheck.Ads     // what the client was told about cancelling each item
	asks      clientcheck.Asks    // the permission requests the client has not answered (askClient)
	disk      *record.Recorder    // the history on disk, which records what it sends

	// taken holds the connections the session was taken from: another
	// connection resumed it while they were attached. The session is not
	// active on them (lost) until they resume it again or go away.
	taken map[protocol.Client]bool
}

// entry is one item of the history; the empty entry is a forgotten one.
type entry struct {
	msg  *acp.Message
	call *toolCall
	term *terminal
}

// Message implements history.Item.
func (e entry) Message() bool { return e.msg != nil }

// attach makes c the client the session reports to (nil: none). The
// client it reported to before, if another, is released: it no longer
// streams the session's terminals, nor holds them back. When c takes the
// session from it (a takeover: c resumed it), it is told so in a notice
// first, and the session is no longer active on it (lost). It returns
// the client the session was taken from, if any.
func (o *outbox) attach(c protocol.Client) (from protocol.Client) {
	old := o.client
	if old != nil && old != c {
		if c != nil {
			from = old
			old.Update(o.session, terminput.TakenNotice(o.session))
			if o.taken == nil {
				o.taken = make(map[protocol.Client]bool)
			}
			o.taken[old] = true
		}
		old.Release(o.session)
	}
	if old != c {
		o.since = time.Now()
	}
	delete(o.taken, c)
	o.client = c
	return from
}

// lost reports whether the session was taken from c (attach): a request
// of c for it is answered errTaken, as one for a session that is not
// active on its connection.
func (o *outbox) lost(c protocol.Client) bool { return o.taken[c] }

// gone forgets c, a connection that went away.
func (o *outbox) gone(c protocol.Client) { delete(o.taken, c) }

// errTaken is the -32002 error of a request for session id from a
// connection it was taken from.
func errTaken(id string) *acp.Error {
	return &acp.Error{
		Code:    acp.CodeNotFound,
		Message: "session " + id + " is not active on this connection: another client took it (session/resume); resume it here to take it back",
		Data:    map[string]string{"sessionId": id},
	}
}

// send sends an update to the attached client.
func (o *outbox) send(u acp.Update) {
	o.updatedAt = time.Now()
	o.ads.NoteUpdate(u)
	o.disk.Record(u)
	if o.client != nil {
		o.client.Update(o.session, u)
	}
}

// sendTerminal sends a terminal_update with the terminal's output, as mode
// says.
func (o *outbox) sendTerminal(t *terminal, u *acp.TerminalUpdate, mode protocol.OutputMode) {
	o.updatedAt = time.Now()
	o.ads.NoteUpdate(u)
	o.disk.Record(u)
	if o.client != nil {
		var src protocol.OutputSource = output{t.ring}
		if t.source != nil {
			src = t.source
		}
		o.client.UpdateTerminal(o.session, u, src, mode)
	}
}

// message records a new user or agent message and sends it. It returns
// the message's id.
func (o *outbox) message(kind string, content []acp.ContentBlock) string {
	o.messages++
	m := &acp.Message{SessionUpdate: kind, MessageID: "msg_" + strconv.Itoa(o.messages), Content: content}
	o.history.Record(entry{msg: m})
	o.disk.Message(m)
	o.send(m)
	return m.MessageID
}

func (o *outbox) agentMessage(text string) {
	o.message(acp.KindAgentMessage, []acp.ContentBlock{acp.TextBlock(text)})
}

// announceTerminal records a new terminal and starts streaming it.
func (o *outbox) announceTerminal(t *terminal) {
	o.history.Record(entry{term: t})
	o.sendTerminal(t, t.announcement(), protocol.StreamOutput)
}

// forget drops retired work from the history, its client's ads and its
// record on disk.
func (o *outbox) forget(retired []entry) {
	for _, e := range retired {
		switch {
		case e.call != nil:
			o.disk.Forget(e.call.id)
			o.ads.Drop(false, e.call.id)
		case e.term != nil:
			o.disk.Forget(e.term.id)
			o.ads.Drop(true, e.term.id)
		}
	}
	o.history.Forget(retired...)
}

// replay sends the history as it is now: each message as it was sent, each
// tool call and terminal at its current state, a running terminal's output
// as a replacement followed by live chunks, an exited one's with its
// exitStatus. It returns the items it delivered.
func (o *outbox) replay() (delivered map[any]bool) {
	delivered = make(map[any]bool)
	for _, e := range o.history.All() {
		switch {
		case e == entry{}:
		case e.msg != nil:
			o.send(e.msg)
		case e.call != nil:
			o.send(e.call.update())
			delivered[e.call] = true
		case e.term.state == termExited:
			o.sendTerminal(e.term, e.term.exitedUpdate(), protocol.ReplaceOutput)
			delivered[e.term] = true
		default:
			o.sendTerminal(e.term, e.term.announcement(), protocol.ReplaceOutput)
			delivered[e.term] = true
		}
	}
	return delivered
}

// sendCurrent brings a client that attaches up to date on a tool call and
// its terminal, if it has one, unless the replay already delivered them at
// their current state: a full tool_call_update, and a full terminal_update
// with a replacement of the output, followed by live chunks.
func (o *outbox) sendCurrent(delivered map[any]bool, c *toolCall, t *terminal) {
	if !delivered[c] {
		o.send(c.update())
	}
	if t != nil && !delivered[t] {
		o.sendTerminal(t, t.announcement(), protocol.ReplaceOutput)
	}
}

// newCall registers a tool call and records it in the history, where it
// is announced: at once, by the caller.
func (st *state) newCall(state callState, kind, title string) *toolCall {
	c := st.work.newCall(state, kind, title)
	st.out.history.Record(entry{call: c})
	return c
}

// output is a terminal's ring as the connection reads it.
type output struct{ *outputbuf.Ring }

func (o output) Follow(notify func()) protocol.OutputFollower { return o.Ring.Follow(notify) }
