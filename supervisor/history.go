package supervisor

import (
	"slices"
	"strconv"
	"time"

	"shellagent/protocol"
)

// maxHistory bounds the history: messages beyond it are forgotten, oldest
// first, as retired work is.
const maxHistory = 10000

// An outbox is where a session's updates go: to the client attached to the
// session, if one is, and, for what a replay must restore, into the
// history. It is part of the session's state.
//
// The history is not a log of updates: it holds each message, tool call
// and terminal once, in the order they were first reported, and a replay
// sends each item as it is now. So the history holds no update that could
// keep a ring alive, and retired work (see registry) drops out of it.
type outbox struct {
	session   string
	client    protocol.Client // nil while detached, and once the session is closed
	updatedAt time.Time       // when the session last reported something
	messages  int             // messages so far: the last message id issued
	history   []entry
	retired   int // registry.retired when the history was last compacted
}

// entry is one item of the history.
type entry struct {
	msg  *protocol.Message
	call *toolCall
	term *terminal
}

// retired reports whether the entry's item was forgotten.
func (e entry) retired() bool {
	return e.call != nil && e.call.state == callRetired || e.term != nil && e.term.state == termRetired
}

// send sends an update to the attached client.
func (o *outbox) send(u any) {
	o.updatedAt = time.Now()
	if o.client != nil {
		o.client.Update(o.session, u)
	}
}

// sendTerminal sends a terminal_update with the terminal's output, as mode
// says.
func (o *outbox) sendTerminal(t *terminal, u *protocol.TerminalUpdate, mode protocol.OutputMode) {
	o.updatedAt = time.Now()
	if o.client != nil {
		o.client.UpdateTerminal(o.session, u, t.ring, mode)
	}
}

// message records a new user or agent message and sends it. It returns
// the message's id.
func (o *outbox) message(kind string, content []protocol.ContentBlock) string {
	o.messages++
	m := &protocol.Message{SessionUpdate: kind, MessageID: "msg_" + strconv.Itoa(o.messages), Content: content}
	o.record(entry{msg: m})
	o.send(m)
	return m.MessageID
}

func (o *outbox) agentMessage(text string) {
	o.message(protocol.KindAgentMessage, []protocol.ContentBlock{protocol.TextBlock(text)})
}

// announceCall records a new tool call and sends it.
func (o *outbox) announceCall(c *toolCall) {
	o.record(entry{call: c})
	o.send(c.update())
}

// announceTerminal records a new terminal and starts streaming it.
func (o *outbox) announceTerminal(t *terminal) {
	o.record(entry{term: t})
	o.sendTerminal(t, t.announcement(), protocol.StreamOutput)
}

// record appends to the history. A full history first drops the entries
// of retired work, then, if that is not enough, its oldest tenth.
func (o *outbox) record(e entry) {
	if len(o.history) >= maxHistory {
		o.history = slices.DeleteFunc(o.history, entry.retired)
		if len(o.history) >= maxHistory*9/10 {
			o.history = slices.Delete(o.history, 0, maxHistory/10)
		}
		o.history = slices.Clip(o.history)
	}
	o.history = append(o.history, e)
}

// compact drops the entries of retired work once they could be half the
// history, so that what retirement releases is not held by the history.
func (o *outbox) compact(retired int) {
	if retired-o.retired < max(len(o.history)/2, 64) {
		return
	}
	o.retired = retired
	o.history = slices.DeleteFunc(o.history, entry.retired)
}

// replay sends the history as it is now: each message as it was sent, each
// tool call and terminal at its current state, a running terminal's output
// as a replacement followed by live chunks, an exited one's with its
// exitStatus. It returns the items it delivered.
func (o *outbox) replay() (delivered map[any]bool) {
	delivered = make(map[any]bool)
	for _, e := range o.history {
		switch {
		case e.retired():
		case e.msg != nil:
			o.send(e.msg)
		case e.call != nil:
			o.send(e.call.update())
			delivered[e.call] = true
		case e.term.state == termExited:
			o.send(e.term.exitedUpdate())
			delivered[e.term] = true
		default:
			o.sendTerminal(e.term, e.term.announcement(), protocol.ReplaceOutput)
			delivered[e.term] = true
		}
	}
	return delivered
}

// sendCurrent re-sends a running terminal and its tool call for a client
// that attaches, with a replacement of its output.
func (o *outbox) sendCurrent(t *terminal) {
	o.send(t.call.update())
	o.sendTerminal(t, t.announcement(), protocol.ReplaceOutput)
}
