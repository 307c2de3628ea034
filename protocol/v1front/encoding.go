package v1front

import (
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"shellagent/acp"
	"shellagent/protocol"
)

// acpV1 is the ACP v1 encoding: it writes what the supervisor reports in v2
// shapes as v1 messages, with the writer's ordering, coalescing and flow
// control unchanged (see protocol.Encoding).
//
//   - agent_message becomes agent_message_chunk, and so does a notice (v1
//     has none), with a messageId of its own (notice_N); user_message and
//     state_update have no v1 counterpart (the v1 front ends turns by
//     answering session/prompt, see v1Front, and replays user messages
//     itself);
//   - a tool call's first update on this connection since the client
//     last attached to its session (see protocol.Encoding.Attached) becomes a tool_call,
//     later ones tool_call_update; v2's cancelled status becomes failed,
//     paused in_progress (see v1Status);
//   - a command's terminal, when the client advertised
//     _meta.terminal_output (as Zed does): the tool_call that first
//     references the terminal carries _meta.terminal_info {terminal_id,
//     cwd} and the terminal content item (a tool call announced before it
//     had a terminal is announced again, since clients read terminal_info
//     only from a tool_call); output goes out as tool_call_updates with
//     only _meta.terminal_output {terminal_id, data}, data being the bytes
//     decoded as UTF-8 across chunk boundaries; the exit status as one
//     with only _meta.terminal_exit {terminal_id, exit_code, signal}, sent
//     just before the tool call's final status. A command that leaves the
//     foreground keeps streaming to its (completed) tool call until it
//     exits;
//   - a terminal belongs to the command's tool call (kind execute) that
//     started it: a tool call of another kind whose content references
//     a terminal (a /wait) shows it only in its text, since v1 routes a
//     terminal's output and exit to one tool call;
//   - without that capability no terminal content item is sent (a client
//     fails an update that references a terminal it does not know): the
//     tool call's final update carries the end of the output as text
//     instead (see tailText), once. A final update that introduces its
//     terminal (a client that attaches: the terminal's replacement comes
//     next) leaves the text to a tool_call_update sent with that
//     replacement. The exit of a terminal whose tool call was final
//     before it (background work) is an agent_message_chunk that names the
//     terminal, its command and how it ended (see v1ExitText);
//   - a command that leaves the foreground completes with a text naming
//     its terminal and the slash commands that list and stop it (v1 has
//     no background list and no terminal/cancel).
//
// Bytes that can never be valid UTF-8 become U+FFFD, one per maximal
// ill-formed subpart (see termtext.IllFormedLen); a sequence cut by a
// chunk boundary is carried to the next chunk, and only replaced if the
// terminal ends in the middle of it.
//
// Concurrency: as the encoding interface says. output only builds a
// v1Output; everything else, including v1Output's methods, runs on the
// writer's goroutine and owns the fields below.
type acpV1 struct {
	meta bool // the client advertised _meta.terminal_output

	calls   map[v1Key]*v1Call
	terms   map[v1Key]*v1Term
	scratch []byte // a chunk with the bytes carried before it

	// drawn: the terminals whose output this connection had sent when the
	// client attached to their session again; their replacement clears
	// the screen first. Kept per session until its next attach.
	drawn   map[v1Key]bool
	notices int64 // notices written, for their message ids
	// toldExit is, per session, the last terminal whose exit went out as
	// an agent message (without terminal_output): the exit notice that
	// follows it would say the same again.
	toldExit map[string]string
}

var _ protocol.Encoding = (*acpV1)(nil)

// newACPV1 returns the v1 encoding for a client that advertised
// _meta.terminal_output (meta) or not.
func newACPV1(meta bool) *acpV1 {
	return &acpV1{meta: meta, calls: make(map[v1Key]*v1Call), terms: make(map[v1Key]*v1Term), drawn: make(map[v1Key]bool), toldExit: make(map[string]string)}
}

// v1Key names a tool call or a terminal of a session.
type v1Key struct{ session, id string }

// v1Call is a tool call the client knows, until it is final and its
// terminal (if any) is done.
type v1Call struct {
	title, kind, status string
	terminal            string // the terminal its content references
	// earlier are the terminals it showed before terminal, oldest first: a
	// service's earlier runs, which its content still references.
	earlier  []string
	final    bool
	detached bool                  // it completed while its terminal ran on (left the foreground)
	content  []acp.ToolCallContent // while its terminal owes the tail: the content sent
}

// v1Term is a command's terminal as the client sees it through its tool
// call.
type v1Term struct {
	call      string // the tool call that shows it
	cwd       string
	announced bool // terminal_info was sent
	exited    bool
	gone      bool   // forgotten: its output is no longer encoded
	drawn     bool   // its output was sent before the client attached again
	sent      int64  // bytes of output sent
	prefix    []byte // a terminal_output line up to its data
	carry     []byte // an incomplete UTF-8 sequence, for the next chunk

	// Without terminal_output: the end of the output, for tailText, kept
	// until the tool call's final update has carried it.
	tail  []byte
	total int64 // bytes the command wrote
	final bool  // its tool call is final
	owed  bool  // the tail goes out with the terminal's replacement
}

func (e *acpV1) Output(session, terminal string) protocol.OutputEncoder {
	return &v1Output{e: e, key: v1Key{session, terminal}}
}

func (e *acpV1) AppendUpdate(dst []byte, session string, update acp.Update) ([]byte, error) {
	if acp.StateOf(update) != nil {
		return dst, nil // a state_update, or one the kit crafted
	}
	switch u := update.(type) {
	case *acp.Message:
		return e.message(dst, session, u)
	case *acp.ToolCallUpdate:
		return e.toolCall(dst, session, u)
	case *acp.TerminalUpdate:
		return e.terminal(dst, session, u)
	case *acp.Notice:
		return e.notice(dst, session, u)
	}
	panic(fmt.Sprintf("v1 encoding: unknown update %T", update))
}

// message writes an agent message as one agent_message_chunk per block;
// the user's own messages are not echoed in v1.
func (e *acpV1) message(dst []byte, session string, m *acp.Message) ([]byte, error) {
	if m.SessionUpdate != acp.KindAgentMessage {
		return dst, nil
	}
	var err error
	for _, b := range m.Content {
		dst, err = protocol.AppendNotification(dst, session, &v1ContentChunk{SessionUpdate: "agent_message_chunk", Content: b, MessageID: m.MessageID})
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// notice writes a notice, which v1 does not have, as an agent message of
// its own: one agent_message_chunk whose messageId no other message has.
// A terminal's exit notice is left out where its exit went out as a
// message just before.
func (e *acpV1) notice(dst []byte, session string, n *acp.Notice) ([]byte, error) {
	if told, ok := e.toldExit[session]; ok {
		delete(e.toldExit, session)
		if id, event := noticeAbout(n); event == "exited" && id == told {
			return dst, nil
		}
	}
	e.notices++
	return protocol.AppendNotification(dst, session, &v1ContentChunk{
		SessionUpdate: "agent_message_chunk", Content: acp.TextBlock(noticeText(n)),
		MessageID: "notice_" + strconv.FormatInt(e.notices, 10),
	})
}

// noticeAbout returns the terminal and the event a notice of shellagent's
// is about (its _meta.shellagent terminalId and event), if it says.
func noticeAbout(n *acp.Notice) (terminalID, event string) {
	m, _ := n.Meta["shellagent"].(map[string]any)
	terminalID, _ = m["terminalId"].(string)
	event, _ = m["event"].(string)
	return terminalID, event
}

// noticeText is a notice as a message: its title, marked with its severity
// unless it is info, then its description.
func noticeText(n *acp.Notice) string {
	text := n.Title
	switch n.Severity {
	case acp.NoticeWarning:
		text = "Warning: " + text
	case acp.NoticeError:
		text = "Error: " + text
	}
	if n.Description != "" {
		text += "\n" + n.Description
	}
	return text
}

func (e *acpV1) toolCall(dst []byte, session string, u *acp.ToolCallUpdate) ([]byte, error) {
	key := v1Key{session, u.ToolCallID}
	out := &v1ToolCall{SessionUpdate: "tool_call_update", v1ToolCallUpdate: v1ToolCallUpdate{
		ToolCallID: u.ToolCallID, Title: u.Title, Kind: u.Kind,
		Status: v1Status(u.Status), RawInput: u.RawInput, RawOutput: u.RawOutput,
	}}
	c := e.calls[key]
	if c == nil {
		c = &v1Call{}
		e.calls[key] = c
		out.SessionUpdate = "tool_call"
	}
	c.title = orElse(u.Title, c.title)
	c.kind = orElse(u.Kind, c.kind)
	c.status = orElse(out.Status, c.status)
	var t *v1Term
	introduced := false
	if id := terminalRef(u.Content); id != "" && c.kind == "execute" && c.shows(id) == "" {
		// Its first terminal, or the next run of a service: announced
		// anew, by a complete tool_call, since v1 gives one terminal_info
		// per tool_call. A run shown before stays in its content.
		if c.terminal != "" {
			c.showAlso(session, e)
		}
		c.terminal, introduced = id, true
		tk := v1Key{session, id}
		t = &v1Term{call: u.ToolCallID, cwd: rawCwd(u.RawInput), drawn: e.drawn[tk]}
		delete(e.drawn, tk)
		e.terms[tk] = t
		if e.meta {
			out.SessionUpdate = "tool_call"
			out.Meta = &v1TerminalMeta{Info: &v1TerminalInfo{TerminalID: id, Cwd: t.cwd}}
			t.announced = true
		}
	} else if c.terminal != "" {
		t = e.terms[v1Key{session, c.terminal}]
	}
	if out.SessionUpdate == "tool_call" { // complete: it replaces what the client had
		out.Title, out.Kind, out.Status = orElse(c.title, u.ToolCallID), c.kind, c.status
	}
	final := acp.FinalStatus(u.Status)
	// Without terminal_output the final update carries the tail, unless
	// it introduces the terminal: then the replacement that follows has
	// the output.
	owe := final && !e.meta && introduced
	out.Content = e.content(u, c, t, final, final && !e.meta && t != nil && !owe)
	if final {
		c.final = true
		switch {
		case t == nil || t.exited:
			e.forget(session, key, c)
		case !e.meta:
			// Kept for its exit (or the tail it owes).
			t.final, t.owed = true, owe
			if owe {
				c.content = out.Content
			} else {
				t.tail = nil
			}
		}
	}
	return protocol.AppendNotification(dst, session, out)
}

// content is the v1 content of a tool call update, with the tail of its
// terminal's output if withTail: nil to leave it unchanged.
func (e *acpV1) content(u *acp.ToolCallUpdate, c *v1Call, t *v1Term, final, withTail bool) []acp.ToolCallContent {
	if u.Content == nil && !withTail {
		return nil
	}
	detached := final && u.Status == acp.StatusCompleted && t != nil && !t.exited
	out := make([]acp.ToolCallContent, 0, len(u.Content)+1)
	for _, it := range u.Content {
		switch {
		case it.Type == "terminal":
			if t != nil && t.announced && c.shows(it.TerminalID) != "" {
				out = append(out, it)
			}
		case detached && it.Content != nil && it.Content.Type == "text":
			// Only a command that left the foreground has text beside its
			// terminal (the supervisor's reason).
			c.detached = true
			out = append(out, acp.TextContent(v1DetachText(it.Content.Text, c.terminal)))
		default:
			out = append(out, it)
		}
	}
	if withTail {
		out = append(out, acp.TextContent(tailText(t.tail, t.total)))
	}
	return out
}

// terminal writes the exit of a terminal: as terminal_exit, or without
// terminal_output, for a terminal whose tool call was final before it
// exited, as an agent message (v1ExitText). Other terminal updates have no
// v1 counterpart (terminal_info went out with the tool call).
func (e *acpV1) terminal(dst []byte, session string, u *acp.TerminalUpdate) ([]byte, error) {
	t := e.terms[v1Key{session, u.TerminalID}]
	if u.ExitStatus == nil || t == nil || t.exited {
		return dst, nil
	}
	t.exited = true
	ck := v1Key{session, t.call}
	c := e.calls[ck]
	var err error
	if t.owed { // cannot happen: the replacement that pays it comes first
		if dst, err = e.appendTail(dst, session, t, c); err != nil {
			return dst, err
		}
	}
	if !e.meta && c != nil && c.detached {
		text := acp.TextBlock(v1ExitText(u.TerminalID, c.title, u.ExitStatus))
		if dst, err = protocol.AppendNotification(dst, session, &v1ContentChunk{SessionUpdate: "agent_message_chunk", Content: text, MessageID: "exit_" + u.TerminalID}); err != nil {
			return dst, err
		}
		e.toldExit[session] = u.TerminalID
	}
	if t.announced && !t.gone {
		if len(t.carry) > 0 { // the terminal ended inside a sequence
			dst = e.appendOutput(dst, session, u.TerminalID, t, nil, false)
		}
		exit := &v1TerminalExit{TerminalID: u.TerminalID, ExitCode: u.ExitStatus.ExitCode}
		if u.ExitStatus.Signal != "" {
			exit.Signal = &u.ExitStatus.Signal
		}
		dst, err = protocol.AppendNotification(dst, session, &v1ToolCall{SessionUpdate: "tool_call_update", v1ToolCallUpdate: v1ToolCallUpdate{ToolCallID: t.call, Meta: &v1TerminalMeta{Exit: exit}}})
		if err != nil {
			return dst, err
		}
	}
	switch {
	case c != nil && u.TerminalID != c.terminal: // an earlier run: its tool call goes on
		e.forgetTerm(v1Key{session, u.TerminalID})
	case c == nil || c.final:
		e.forget(session, ck, c)
	}
	return dst, nil
}

// appendTail appends the tool_call_update that carries the tail a
// terminal owes its final tool call c (see toolCall): the content sent
// with the final status, and the tail.
func (e *acpV1) appendTail(dst []byte, session string, t *v1Term, c *v1Call) ([]byte, error) {
	t.owed = false
	tail := tailText(t.tail, t.total)
	t.tail = nil
	if c == nil {
		return dst, nil
	}
	content := append(c.content[:len(c.content):len(c.content)], acp.TextContent(tail))
	c.content = nil
	return protocol.AppendNotification(dst, session, &v1ToolCall{SessionUpdate: "tool_call_update", v1ToolCallUpdate: v1ToolCallUpdate{ToolCallID: t.call, Content: content}})
}

// Attached implements protocol.Encoding: the client knows none of session's tool calls
// and terminals any more, so each is announced again by its next update.
// A terminal whose output was sent is remembered in drawn, so that its
// replacement clears what the client may still show.
func (e *acpV1) Attached(session string) {
	for k := range e.drawn {
		if k.session == session {
			delete(e.drawn, k)
		}
	}
	for k, t := range e.terms {
		if k.session != session {
			continue
		}
		if t.sent > 0 || len(t.carry) > 0 || t.drawn {
			e.drawn[k] = true
		}
		t.gone = true
		delete(e.terms, k)
	}
	for k := range e.calls {
		if k.session == session {
			delete(e.calls, k)
		}
	}
}

// forget drops a finished tool call and its terminals.
func (e *acpV1) forget(session string, key v1Key, c *v1Call) {
	delete(e.calls, key)
	if c == nil || c.terminal == "" {
		return
	}
	for _, id := range c.earlier {
		e.forgetTerm(v1Key{session, id})
	}
	e.forgetTerm(v1Key{session, c.terminal})
}

// forgetTerm drops a terminal: its output is no longer encoded.
func (e *acpV1) forgetTerm(tk v1Key) {
	if t := e.terms[tk]; t != nil {
		t.gone = true
		delete(e.terms, tk)
	}
}

// maxEarlier bounds the earlier terminals a tool call shows: a service's
// content references its last 5 runs (the supervisor's maxRuns).
const maxEarlier = 8

// showAlso moves the tool call's current terminal to its earlier ones,
// for the next to take its place: one that has exited is no longer
// encoded, and only its id is kept, for the content that references it.
func (c *v1Call) showAlso(session string, e *acpV1) {
	tk := v1Key{session, c.terminal}
	if t := e.terms[tk]; t != nil && t.exited {
		e.forgetTerm(tk)
	}
	c.earlier = append(c.earlier, c.terminal)
	if len(c.earlier) > maxEarlier {
		c.earlier = slices.Delete(c.earlier, 0, 1)
	}
}

// shows returns id if the tool call shows terminal id (its current one or
// an earlier one), else "".
func (c *v1Call) shows(id string) string {
	if id == c.terminal || slices.Contains(c.earlier, id) {
		return id
	}
	return ""
}

// appendOutput appends a terminal_output line with p after the bytes
// carried from the previous chunk. With cut, an incomplete sequence at
// the end of p is carried to the next chunk; without, it is replaced.
func (e *acpV1) appendOutput(dst []byte, session, terminal string, t *v1Term, p []byte, cut bool) []byte {
	if len(t.carry) > 0 {
		e.scratch = append(append(e.scratch[:0], t.carry...), p...)
		p = e.scratch
		t.carry = t.carry[:0]
	}
	if cut {
		var rest []byte
		p, rest = cutIncomplete(p)
		t.carry = append(t.carry, rest...)
	}
	if len(p) == 0 {
		return dst
	}
	if t.prefix == nil {
		t.prefix = fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%s,"update":{"sessionUpdate":"tool_call_update","toolCallId":%s,"_meta":{"terminal_output":{"terminal_id":%s,"data":`,
			appendJSONString(nil, []byte(session)), appendJSONString(nil, []byte(t.call)), appendJSONString(nil, []byte(terminal)))
	}
	t.sent += int64(len(p))
	dst = append(dst, t.prefix...)
	dst = appendJSONString(dst, p)
	return append(dst, "}}}}}\n"...)
}

// v1Output encodes one terminal's output for a v1 client. It finds its
// terminal when it first needs it: the tool call that introduces the
// terminal is written before the terminal's output, but may still be
// queued when output is called.
type v1Output struct {
	e   *acpV1
	key v1Key // session, terminal
	t   *v1Term
}

var _ protocol.OutputEncoder = (*v1Output)(nil)

func (o *v1Output) term() *v1Term {
	if o.t == nil || o.t.gone { // gone: a tool call may introduce it again
		o.t = o.e.terms[o.key]
	}
	if o.t == nil || o.t.gone {
		return nil
	}
	return o.t
}

func (o *v1Output) AppendChunk(dst, p []byte) []byte {
	t := o.term()
	switch {
	case t == nil:
		return dst
	case !o.e.meta:
		if !t.final {
			t.keep(p)
		}
		return dst
	case !t.announced:
		return dst
	}
	return o.e.appendOutput(dst, o.key.session, o.key.id, t, p, true)
}

// appendReplacement sends data after a gap (dropped bytes the client will
// never get) or, for a client that attaches (u != nil), in place of what
// it had: the screen is cleared first if this connection sent any of the
// terminal's output, since v1 output can only be appended to.
func (o *v1Output) AppendReplacement(dst []byte, u *acp.TerminalUpdate, data []byte, dropped int64) ([]byte, error) {
	t := o.term()
	if t == nil {
		return dst, nil
	}
	if !o.e.meta {
		if t.final && !t.owed {
			return o.exit(dst, u)
		}
		if u != nil {
			t.tail, t.total = t.tail[:0], 0
		}
		t.total += dropped
		t.keep(data)
		if t.owed && u != nil {
			var err error
			if dst, err = o.e.appendTail(dst, o.key.session, t, o.e.calls[v1Key{o.key.session, t.call}]); err != nil {
				return dst, err
			}
		}
		return o.exit(dst, u)
	}
	if !t.announced {
		return dst, nil
	}
	var head []byte
	if u != nil && (t.sent > 0 || len(t.carry) > 0 || t.drawn) {
		head = append(head, "\x1b[H\x1b[2J\x1b[3J"...)
	}
	if dropped > 0 {
		dropped += int64(len(t.carry)) // the sequence it began is gone
	}
	t.carry = t.carry[:0]
	if dropped > 0 {
		for k := 0; k < utf8.UTFMax-1 && len(data) > 0 && !utf8.RuneStart(data[0]); k++ {
			data, dropped = data[1:], dropped+1 // no character is cut in two
		}
		head = fmt.Appendf(head, "\r\n[shellagent: %s of output not shown]\r\n", sizeText(dropped))
	}
	dst = o.e.appendOutput(dst, o.key.session, o.key.id, t, append(head, data...), true)
	return o.exit(dst, u)
}

// exit writes the exit status that a replacement's update may carry.
func (o *v1Output) exit(dst []byte, u *acp.TerminalUpdate) ([]byte, error) {
	if u == nil {
		return dst, nil
	}
	return o.e.terminal(dst, o.key.session, u)
}

// keep records output for the tail of a client without terminals.
func (t *v1Term) keep(p []byte) {
	t.total += int64(len(p))
	if len(p) >= tailMax {
		t.tail = append(t.tail[:0], p[len(p)-tailMax:]...)
		return
	}
	t.tail = append(t.tail, p...)
	if len(t.tail) > 2*tailMax {
		t.tail = t.tail[:copy(t.tail, t.tail[len(t.tail)-tailMax:])]
	}
}

// terminalRef returns the terminal that tool call content references: the
// last one, where a service's content references its runs, oldest first.
func terminalRef(content []acp.ToolCallContent) string {
	for _, it := range slices.Backward(content) {
		if it.Type == "terminal" && it.TerminalID != "" {
			return it.TerminalID
		}
	}
	return ""
}

// rawCwd returns the cwd of a command's rawInput ({command, cwd}).
func rawCwd(raw any) string {
	switch in := raw.(type) {
	case map[string]string:
		return in["cwd"]
	case map[string]any:
		s, _ := in["cwd"].(string)
		return s
	}
	return ""
}

// orElse returns a if it is not empty, else b.
func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
