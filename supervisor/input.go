package supervisor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"shellagent/acp"
	"shellagent/internal/keys"
	"shellagent/protocol"
	"shellagent/ptyio"
	"shellagent/supervisor/work"
	"shellagent/termtext"
)

// Typing into terminals, sizing them and reading their tail: the
// _shellagent/terminal/write and _shellagent/terminal/resize methods
// (protocol.TerminalInput), and the prompt commands /send, /keys, /resize
// and /tail for clients that can only send prompts. Those act at once,
// like /ps, and answer in an agent message.

var _ protocol.TerminalInput = (*Supervisor)(nil)

// WriteTerminal implements protocol.TerminalInput. It is answered in
// the session's turn: after an entry doing slow work (a launch), as every
// entry is, without holding up the connection meanwhile.
func (sv *Supervisor) WriteTerminal(c protocol.Client, p *acp.WriteTerminalRequest, reply protocol.Reply) {
	s, err := sv.session(p.SessionID)
	if err != nil {
		reply(nil, err)
		return
	}
	s.do(func(st *state) {
		if st.out.lost(c) {
			reply(nil, errTaken(s.id))
			return
		}
		reply(done(st.work.typeInto(p.TerminalID, p.Bytes())))
	})
}

// ResizeTerminal implements protocol.TerminalInput, answered as
// WriteTerminal is, after the terminal_update with the new size.
func (sv *Supervisor) ResizeTerminal(c protocol.Client, p *acp.ResizeTerminalRequest, reply protocol.Reply) {
	s, err := sv.session(p.SessionID)
	if err != nil {
		reply(nil, err)
		return
	}
	s.do(func(st *state) {
		if st.out.lost(c) {
			reply(nil, errTaken(s.id))
			return
		}
		reply(done(st.work.resize(p.TerminalID, *p.Size, &st.out)))
	})
}

// done is the answer of a method that answers {} or an error.
func done(err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// Bounds of /tail.
const (
	defaultTail = 20       // lines shown without N
	maxTail     = 200      // lines shown at most
	tailText    = 16 << 10 // bytes of text shown at most: the message is kept in the history
	tailWindow  = 256 << 10
)

// parseTerminalCommand reads the arguments of /send, /keys, /resize and
// /tail, which start with a terminal id.
func parseTerminalCommand(c *command, rest string) input {
	name := c.name
	id, arg, _ := strings.Cut(rest, " ")
	if id == "" {
		return bad(fmt.Sprintf("/%s needs a terminal id", name), name)
	}
	in := input{id: id}
	switch name {
	case "send":
		in.data, in.what = []byte(arg+"\r"), "Enter"
		if arg != "" {
			in.what = quoteShort(arg) + " and Enter"
		}
	case "keys":
		names := strings.Fields(arg)
		if len(names) == 0 {
			return bad("/keys needs at least one key", name)
		}
		for _, k := range names {
			b, err := keys.Bytes(k)
			if err != nil {
				return input{cmd: malformed, problem: "/keys: " + err.Error() + ". " + keys.Help + "."}
			}
			in.data = append(in.data, b...)
		}
		in.what = strings.Join(names, " ")
	case "resize":
		cols, rows, ok := strings.Cut(arg, "x")
		c, err1 := strconv.Atoi(cols)
		r, err2 := strconv.Atoi(rows)
		if !ok || err1 != nil || err2 != nil {
			return bad(fmt.Sprintf("/resize: %q is not a size COLSxROWS", arg), name)
		}
		in.size = acp.TerminalSize{Cols: c, Rows: r}
		if err := in.size.Validate("size"); err != nil {
			return bad("/resize: "+errorMessage(err), name)
		}
	case "tail":
		in.lines = defaultTail
		if arg != "" {
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return bad(fmt.Sprintf("/tail: %q is not a number of lines (1 or more)", arg), name)
			}
			in.lines = min(n, maxTail)
		}
	}
	return in
}

// quoteShort quotes text typed by /send for its answer, cut short.
func quoteShort(s string) string {
	return strconv.Quote(shorten(s, 40))
}

// typeIntoTerminal serves /send and /keys.
func typeIntoTerminal(st *state, in input) {
	if err := st.work.typeInto(in.id, in.data); err != nil {
		st.out.agentMessage("Cannot type into " + in.id + ": " + errorMessage(err) + ".")
		return
	}
	st.out.agentMessage("Typed " + in.what + " into " + in.id + ".")
}

// resizeTerminal serves /resize.
func resizeTerminal(st *state, in input) {
	if err := st.work.resize(in.id, in.size, &st.out); err != nil {
		st.out.agentMessage("Cannot resize " + in.id + ": " + errorMessage(err) + ".")
		return
	}
	st.out.agentMessage(fmt.Sprintf("Resized %s to %d columns and %d rows.", in.id, in.size.Cols, in.size.Rows))
}

// liveTerminal returns the terminal id if it runs, or the -32602 error
// that says why not.
func (r *registry) liveTerminal(id string) (*terminal, error) {
	t := r.terminals[id]
	switch {
	case t == nil:
		return nil, acp.InvalidParams("terminalId: no terminal %q in this session", id)
	case t.state >= termExited:
		return nil, acp.InvalidParams("terminalId: %s has already exited", id)
	case t.proc == nil:
		return nil, acp.InvalidParams("terminalId: %s has not started yet", id)
	}
	return t, nil
}

// typeInto writes data to a terminal's input. It never blocks: a full
// input buffer (the program does not read) is the -32800 error, whose
// data says how many bytes were written.
func (r *registry) typeInto(id string, data []byte) error {
	t, err := r.liveTerminal(id)
	if err != nil {
		return err
	}
	n, err := t.proc.Write(data)
	if n > 0 {
		t.input.typed()
	}
	switch {
	case errors.Is(err, ptyio.ErrInputFull):
		return &acp.Error{
			Code:    acp.CodeRequestCancelled,
			Message: fmt.Sprintf("the input buffer of %s is full: its program is not reading its input (%d of %d bytes were written)", id, n, len(data)),
			Data:    map[string]any{"terminalId": id, "written": n},
		}
	case err != nil:
		return acp.InvalidParams("terminalId: %s takes no input: %v", id, err)
	}
	return nil
}

// resize sets a terminal's size and sends a terminal_update with it
// through out.
func (r *registry) resize(id string, size acp.TerminalSize, out *outbox) error {
	t, err := r.liveTerminal(id)
	if err != nil {
		return err
	}
	if err := size.Validate("size"); err != nil {
		return err
	}
	s := ptyio.Size{Cols: uint16(size.Cols), Rows: uint16(size.Rows)}
	if err := t.proc.Resize(s); err != nil {
		return acp.InvalidParams("terminalId: %s cannot be resized: %v", id, err)
	}
	t.size = s
	out.sendTerminal(t, &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: t.id, Size: &size}, protocol.StreamOutput)
	return nil
}

// tail is the /tail answer: the last lines of a terminal's output as
// plain text, running or exited.
func (r *registry) tail(id string, n int) string {
	t := r.terminals[id]
	if t == nil {
		return fmt.Sprintf("Cannot show %s: no terminal %q in this session.", id, id)
	}
	buf := make([]byte, min(t.ring.Total(), tailWindow))
	k, start := t.ring.ReadAt(buf, t.ring.Total()-int64(len(buf)))
	text := termtext.Plain(buf[:k])
	if start > 0 {
		// The window may start in the middle of a line (or a character,
		// or an escape sequence): show only whole lines.
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
	}
	last, lines := termtext.LastLines(text, n)
	shown := strings.Count(last, "\n") + 1
	for len(last) > tailText {
		_, last, _ = strings.Cut(last[len(last)-tailText:], "\n")
		shown = strings.Count(last, "\n") + 1
	}
	what := fmt.Sprintf("%s (%s, %s)", id, shortLine(t.line), terminalStatus(t))
	switch {
	case last == "":
		return "No output from " + what + "."
	case start == 0 && shown == lines:
		return fmt.Sprintf("Output of %s, all %s, escape sequences removed:\n%s", what, plural(shown, "line"), termtext.Fence(last))
	}
	return fmt.Sprintf("Output of %s, the last %s, escape sequences removed:\n%s", what, plural(shown, "line"), termtext.Fence(last))
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

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
