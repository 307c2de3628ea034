package lineclient

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"shellagent/acp"
	"shellagent/internal/clientview"
	"shellagent/termtext"
)

// Terminal mode: the client on a terminal, with an agent that offers the
// input methods. The user's terminal is in raw mode for the whole session.
// At the prompt, golang.org/x/term's editor reads a line (editing,
// history); the terminal's replies never reach it (see editKeys). A
// command that a line started takes the keyboard and the screen: each
// keystroke goes to its PTY with _shellagent/terminal/write, the screen's
// size with _shellagent/terminal/resize (at the start and on SIGWINCH),
// and only its output is shown, as it is. Ctrl-B is the prefix of the
// client's own keys: b moves the command to the background, c stops it,
// d detaches from it, Ctrl-B types Ctrl-B. /attach ID does the same for a
// background terminal, after redrawing its screen from the client's copy
// of its output. Notes and messages that arrive meanwhile are held and
// shown once the terminal has let go of the screen; the output of
// terminals that do not have the screen is not shown (/attach, /tail).

// Bounds of terminal mode.
const (
	maxPending = 64 << 10  // keys typed ahead, while nothing takes them
	copySize   = 256 << 10 // output kept per live terminal, to redraw it
	maxHeld    = 256 << 10 // notes held while a terminal has the screen
)

// resetModes undoes what a program may have left set in the terminal when
// it lets go of the screen: application cursor keys and keypad, a hidden
// cursor, colours and attributes, bracketed paste, mouse reports.
const resetModes = "\x1b[?1l\x1b>\x1b[?25h\x1b[0m\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l"

// hasInputMethods reports whether an initialize result's
// _meta.shellagent.methods lists the input methods: terminal mode needs
// both.
func hasInputMethods(meta json.RawMessage) bool {
	var m struct {
		Shellagent struct {
			Methods []string `json:"methods"`
		} `json:"shellagent"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return false
	}
	return slices.Contains(m.Shellagent.Methods, acp.MethodWriteTerminal) && slices.Contains(m.Shellagent.Methods, acp.MethodResizeTerminal)
}

// tty is terminal mode's state. It belongs to the client's event loop,
// and is the printer's writer (Write).
type tty struct {
	c          *client
	fd         int
	out        io.Writer // the screen
	saved      *term.State
	cols, rows int
	ed         *editor
	att        *attachment // the terminal that has the keyboard and the screen, if any
	q          question    // the open question, if any: the next key answers it
	pending    []byte      // keys typed while nothing takes them
	partial    []byte      // an escape sequence cut by the end of a read, for the editor
	copies     map[string]*outputCopy
	held       []byte // what the printer wrote while a terminal had the screen
	heldLost   int    // bytes of it dropped past maxHeld
	through    bool   // what the printer writes now goes to the screen, not held (see says)
	wrote      bool   // it wrote through
}

// attachment is a terminal that has the keyboard and the screen.
type attachment struct {
	id      string
	prefix  bool // Ctrl-B was typed: the next key is the client's
	atStart bool // the cursor is at the start of a line
	failed  bool // a write failed and was reported
}

// startTerminal starts terminal mode if the agent takes keystrokes, or
// says that the client runs in line mode; then it starts reading input.
func (c *client) startTerminal(methods bool) {
	switch {
	case !methods:
		c.p.note("this agent cannot be typed into: line mode (each line is sent as a prompt; Ctrl-C cancels)")
	default:
		t, err := newTTY(c, c.cfg.Terminal, c.cfg.Output)
		if err != nil {
			c.p.note(err.Error() + ": line mode")
			break
		}
		c.tty, c.p.w = t, t
	}
	c.startInput()
}

// newTTY puts the terminal f in raw mode and starts the editor.
func newTTY(c *client, f *os.File, out io.Writer) (*tty, error) {
	fd := int(f.Fd())
	c.cfg.raw.Store(true) // before: a line that comes meanwhile has a CR more
	saved, err := term.MakeRaw(fd)
	if err != nil {
		c.cfg.raw.Store(false)
		return nil, fmt.Errorf("lineclient: raw mode: %w", err)
	}
	t := &tty{c: c, fd: fd, out: out, saved: saved, copies: make(map[string]*outputCopy), q: question{c: c}}
	t.ed = newEditor(out)
	t.readSize()
	return t, nil
}

// readSize reads the terminal's size, keeping the last one known if that
// fails.
func (t *tty) readSize() {
	cols, rows, err := term.GetSize(t.fd)
	if err != nil || cols <= 0 || rows <= 0 {
		if t.cols == 0 {
			t.cols, t.rows = 80, 24
		}
		return
	}
	t.cols, t.rows = cols, rows
	t.ed.setSize(cols, rows)
}

// close lets go of the screen, clears the prompt and restores the
// terminal's mode.
func (t *tty) close() {
	if t.att != nil {
		t.detach()
	}
	t.ed.close() // first: its goroutine writes no more
	if t.ed.reading {
		_, _ = io.WriteString(t.out, "\r\x1b[K") // Best effort: the prompt line goes.
	}
	_ = term.Restore(t.fd, t.saved) // Best effort: nothing more to do if it fails.
	t.c.cfg.raw.Store(false)        // after: a line that came meanwhile had a CR more
}

// Write writes what the printer prints: through the editor while it reads
// a line (the prompt stays below), held while a terminal has the screen,
// else with each newline made CRLF, as raw mode needs.
func (t *tty) Write(b []byte) (int, error) {
	switch {
	case t.att != nil && t.through:
		if !t.att.atStart {
			t.raw([]byte("\r\n"))
		}
		t.raw(bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")))
		t.att.atStart, t.wrote = lineStartAfter(b, true), true
		return len(b), nil
	case t.att != nil:
		if room := maxHeld - len(t.held); room < len(b) {
			t.heldLost += len(b) - max(room, 0)
			b = b[:max(room, 0)]
		}
		t.held = append(t.held, b...)
		return len(b), nil
	case t.ed.reading:
		return t.ed.term.Write(b)
	}
	return writeCRLF(t.out, b)
}

// writeCRLF writes b with each "\n" as "\r\n".
func writeCRLF(w io.Writer, b []byte) (int, error) {
	if _, err := w.Write(bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// raw writes b to the screen as it is.
func (t *tty) raw(b []byte) {
	if t.c.p.err == nil {
		_, t.c.p.err = t.out.Write(b)
	}
}

// keys routes keys read from the terminal: to the open question, the
// terminal that has the keyboard, or the editor; kept for the next of
// them if none takes them now. Ctrl-C is the client's interrupt except
// while a terminal has the keyboard.
func (t *tty) keys(b []byte) {
	for len(b) > 0 {
		switch {
		case t.c.phase != running:
			if bytes.IndexByte(b, keyCtrlC) >= 0 {
				t.c.interrupt()
				return
			}
			t.pending = append(t.pending, b[:min(len(b), maxPending-len(t.pending))]...) // typed ahead
			return
		case t.q.open():
			b = t.q.answer(b)
		case t.att != nil:
			b = t.forward(b)
		case t.ed.reading:
			b = t.edit(b)
		default:
			// A turn runs with nothing that takes keys (a command not started
			// yet, /wait): keys are typed ahead, but Ctrl-C interrupts.
			before, after, interrupted := bytes.Cut(b, []byte{keyCtrlC})
			t.pending = append(t.pending, before[:min(len(before), maxPending-len(t.pending))]...)
			if !interrupted {
				return
			}
			t.c.interrupt()
			b = after
		}
	}
}

// edit gives keys to the editor, up to a Ctrl-C, which is the interrupt:
// it clears the line. It returns the keys after that Ctrl-C.
func (t *tty) edit(b []byte) []byte {
	keys, rest := editKeys(append(t.partial, b...))
	t.partial = rest
	before, after, interrupted := bytes.Cut(keys, []byte{keyCtrlC})
	t.ed.in.push(before)
	if !interrupted {
		return nil
	}
	t.ed.in.push([]byte{0x05, 0x15}) // Ctrl-E, Ctrl-U: the line is dropped
	t.c.interrupt()
	return after
}

// forward types keys into the terminal that has the keyboard, and acts
// on the client's keys (Ctrl-B, then b, c, d or Ctrl-B). It returns the
// keys after one that let go of the terminal.
func (t *tty) forward(b []byte) []byte {
	a := t.att
	out := make([]byte, 0, len(b))
	for i, k := range b {
		switch {
		case !a.prefix && k == keyCtrlB:
			a.prefix = true
		case !a.prefix:
			out = append(out, k)
		case k == keyCtrlB:
			a.prefix = false
			out = append(out, k)
		default:
			a.prefix = false
			if k != 'b' && k != 'c' && k != 'd' {
				continue // no such key: nothing happens
			}
			t.write(a, out)
			out = out[:0]
			t.prefixed(a, k)
			if t.att != a {
				return b[i+1:]
			}
		}
	}
	t.write(a, out)
	return nil
}

// prefixed acts on Ctrl-B then k: b and d let go of the terminal (a
// foreground command moves to the background), c stops it.
func (t *tty) prefixed(a *attachment, k byte) {
	c := t.c
	fg := !c.sess.Listed(a.id)
	switch {
	case k == 'c' && fg:
		c.rpc.notify("session/cancel", map[string]string{"sessionId": c.sess.ID})
	case k == 'c':
		c.prompt("/stop " + a.id)
	case fg:
		c.prompt("/bg")
		t.detach()
	default:
		t.detach()
	}
}

// write types b into the attached terminal.
func (t *tty) write(a *attachment, b []byte) {
	for len(b) > 0 {
		n := min(len(b), acp.MaxWrite)
		params := map[string]string{"sessionId": t.c.sess.ID, "terminalId": a.id, "data": base64.StdEncoding.EncodeToString(b[:n])}
		b = b[n:]
		t.c.rpc.call(acp.MethodWriteTerminal, params, func(m *message) {
			if m.Error != nil && m.Error.Code != acp.CodeInvalidParams && !a.failed { // it has just exited
				a.failed = true
				t.c.p.note(fmt.Sprintf("typing into %s failed: %s", a.id, m.Error.Message))
			}
		})
	}
}

// sendSize gives the attached terminal the screen's size.
func (t *tty) sendSize(cols, rows int) {
	params := map[string]any{"sessionId": t.c.sess.ID, "terminalId": t.att.id, "size": map[string]int{"cols": cols, "rows": rows}}
	id := t.att.id
	t.c.rpc.call(acp.MethodResizeTerminal, params, func(m *message) {
		if m.Error != nil && m.Error.Code != acp.CodeInvalidParams {
			t.c.p.note(fmt.Sprintf("resizing %s failed: %s", id, m.Error.Message))
		}
	})
}

// resized takes a SIGWINCH.
func (t *tty) resized() {
	t.readSize()
	if t.att != nil {
		t.sendSize(t.cols, t.rows)
	}
}

// started is told of a new terminal; it takes the keyboard and the screen
// if it runs the line the client sent last and waits for, and reports
// whether it did (and so announced the terminal).
func (t *tty) started(tm *clientview.Terminal) bool {
	w := t.c.wait
	if w == nil || t.att != nil || t.ed.reading || t.q.open() || tm.Exit != nil || tm.Command != w.line {
		return false
	}
	t.c.p.note(tm.ID + ": keys go to the command; Ctrl-B b: background, Ctrl-B c: cancel")
	t.attach(tm.ID)
	return true
}

// attach gives a terminal the keyboard and the screen.
func (t *tty) attach(id string) {
	t.att = &attachment{id: id, atStart: true}
	t.sendSize(t.cols, t.rows)
}

// attachCommand serves /attach ID.
func (t *tty) attachCommand(id string) {
	s := t.c.sess
	tm := s.Terminals[id]
	switch {
	case id == "":
		t.c.p.note("/attach needs a terminal id; /ps lists them")
		return
	case tm == nil:
		t.c.p.note("no terminal " + id + "; /ps lists them")
		return
	case tm.Exit != nil:
		t.c.p.note(id + " has ended (" + tm.Exit.String() + "); /tail " + id + " shows its output")
		return
	}
	what := id
	if tm.Command != "" {
		what += " (" + tm.Command + ")"
	}
	t.c.p.note(what + ": keys go to it; Ctrl-B d: detach, Ctrl-B c: stop it")
	cp := t.copies[id]
	t.attach(id)
	if cp == nil {
		return
	}
	if cp.alt.on {
		// Its screen from the switch on, and a resize there and back,
		// which makes a full-screen program draw itself again.
		t.raw([]byte("\x1b[?1049h\x1b[H\x1b[2J"))
		t.show(id, cp.data[max(cp.enter, 0):])
		if t.rows > 1 {
			t.sendSize(t.cols, t.rows-1)
			t.sendSize(t.cols, t.rows)
		}
		return
	}
	t.show(id, cp.data[termtext.LastLinesStart(cp.data, t.rows-1):])
}

// detach lets go of the attached terminal: the program's modes are undone
// (and its alternate screen left), the cursor goes to a line start, and
// what was held is shown.
func (t *tty) detach() {
	a := t.att
	t.att = nil
	if cp := t.copies[a.id]; cp != nil && cp.alt.on {
		t.raw([]byte("\x1b[?1049l"))
		a.atStart = true
	}
	t.raw([]byte(resetModes))
	if !a.atStart {
		t.raw([]byte("\r\n"))
	}
	held, lost := t.held, t.heldLost
	t.held, t.heldLost = nil, 0
	t.c.p.write(held)
	if lost > 0 {
		t.c.p.note(fmt.Sprintf("%d bytes of notes were dropped while %s had the screen", lost, a.id))
	}
}

// output takes a chunk of a terminal's output: kept, and shown if the
// terminal has the screen.
func (t *tty) output(id string, data []byte) {
	tm := t.c.sess.Terminals[id]
	if tm == nil || tm.Exit == nil {
		cp := t.copies[id]
		if cp == nil {
			cp = &outputCopy{enter: -1}
			t.copies[id] = cp
		}
		cp.add(data)
	}
	if t.att != nil && t.att.id == id {
		t.show(id, data)
	}
}

// show writes a terminal's output to the screen.
func (t *tty) show(id string, data []byte) {
	t.raw(data)
	t.att.atStart = lineStartAfter(data, t.att.atStart)
}

// updated follows an update the view has applied: an attached terminal
// that ended lets go of the screen, and an ended terminal's copy goes.
func (t *tty) updated(u *clientview.Update) {
	if u.SessionUpdate != "terminal_update" || u.ExitStatus == nil {
		return
	}
	if t.att != nil && t.att.id == u.TerminalID {
		t.detach()
	}
	delete(t.copies, u.TerminalID)
}

// says reports whether the update is told at once, on the screen of the
// terminal that has it, rather than held: its own tool call's end, which
// a command that passed the foreground timeout, moved to the background,
// gets (line mode says it too). A program on the alternate screen (an
// editor) is not written over: it is told when it lets go.
func (t *tty) says(u *clientview.Update) bool {
	if t.att == nil || (u.SessionUpdate != "tool_call_update" && u.SessionUpdate != "tool_call") || u.Status == nil || *u.Status != "completed" {
		return false
	}
	tc, tm := t.c.sess.Calls[u.ToolCallID], t.c.sess.Terminals[t.att.id]
	if tc == nil || clientview.Final(tc.Status) || !slices.Contains(tc.Terminals, t.att.id) || tm == nil || tm.Exit != nil {
		return false
	}
	cp := t.copies[t.att.id]
	return cp == nil || !cp.alt.on
}

// told follows an update that says let through: if it said anything,
// it says who has the screen now, and how to get the prompt back.
func (t *tty) told() {
	t.through = false
	if t.wrote {
		t.wrote = false
		t.raw([]byte("[" + t.att.id + " keeps the keyboard and the screen; Ctrl-B d: the prompt, Ctrl-B c: stop it]\r\n"))
		t.att.atStart = true
	}
}

// mutes reports whether a notice is not worth showing: the attached
// terminal waits for input, which the user is typing.
func (t *tty) mutes(u *clientview.Update) bool {
	return t.att != nil && u.Meta.Shellagent.TerminalID == t.att.id && u.Meta.Shellagent.Event == acp.EventWaitingForInput
}

// settle starts the editor when the client is ready for a line, and
// hands keys typed ahead to what takes them now (never to the close
// question: keys typed before it was asked do not answer it).
func (t *tty) settle() {
	c := t.c
	if c.phase == running && t.att == nil && !t.q.open() && (c.wait == nil || c.perms.waiting()) {
		t.ed.read()
	}
	if len(t.pending) > 0 && c.phase == running && !t.q.open() && (t.att != nil || t.ed.reading) {
		b := t.pending
		t.pending = nil
		t.keys(b)
	}
}

// line takes a line the editor read: the client's own commands (/help,
// /quit, /attach), or a prompt.
func (t *tty) line(r editResult) {
	t.ed.got(r)
	c := t.c
	switch {
	case c.phase != running: // typed while the session closes
		return
	case r.err != nil && c.cfg.Daemon: // Ctrl-D on an empty line
		t.raw([]byte("\r\n"))
		t.q.ask(askLeave, c.sess.closeWarning())
		return
	case r.err != nil:
		t.raw([]byte("\r\n"))
		c.askQuit()
		return
	case c.perms.waiting():
		c.handleInput(inputEvent{line: r.line})
		return
	}
	name, arg, _ := strings.Cut(strings.TrimSpace(r.line), " ")
	switch name {
	case "/help":
		c.p.text(help(c.commands, c.cfg.Daemon))
	case "/quit":
		c.askQuit()
	case "/attach":
		t.attachCommand(strings.TrimSpace(arg))
	default:
		c.handleInput(inputEvent{line: r.line})
	}
}

// help is /help's text: the client's keys and commands, and the agent's,
// each with the arguments it takes, as the agent's input hint says;
// daemon says that leaving detaches.
func help(commands []command, daemon bool) string {
	var b strings.Builder
	b.WriteString(`While a command runs, keys go to it (Ctrl-C too: its own interrupt), and so does the screen's size.
  Ctrl-B b        move it to the background
  Ctrl-B c        stop it
  Ctrl-B d        detach from a terminal (/attach), which runs on
  Ctrl-B Ctrl-B   type Ctrl-B
At the prompt:
  Up, Down        earlier lines
  Left, Right, Home, End, Backspace, Delete, Ctrl-A, Ctrl-E, Ctrl-K, Ctrl-U, Ctrl-W   line editing
  Ctrl-C          cancel the foreground command; again: close the session
  Ctrl-D          close the session (on an empty line)
The client's commands:
  /attach ID      type into a background terminal and see its output
  /close          close the session, which stops its work
  /help           this help
  /quit           close the session (it asks first if work runs)
  /sessions       list the agent's sessions
`)
	if daemon {
		b.WriteString(`With a daemon, Ctrl-C twice, Ctrl-D and /quit detach: the session runs on, and
  shellagent client --daemon --resume ID comes back to it (Ctrl-D asks: c closes it instead).
`)
	}
	if len(commands) > 0 {
		b.WriteString("The agent's commands:\n")
		for _, cmd := range commands {
			fmt.Fprintf(&b, "  /%-14s %s\n", cmd.Name, cmd.Description)
			if cmd.Input != nil && cmd.Input.Hint != "" {
				fmt.Fprintf(&b, "  %-15s arguments: %s\n", "", cmd.Input.Hint)
			}
		}
	}
	return b.String()
}

// outputCopy is the end of a terminal's output, kept so that /attach can
// redraw its screen.
type outputCopy struct {
	data  []byte
	alt   altScreen
	enter int // offset in data just after the last switch to the alternate screen; -1 if data holds none
}

// add appends a chunk, keeping the last copySize bytes at least.
func (o *outputCopy) add(data []byte) {
	if at := o.alt.scan(data); at >= 0 {
		o.enter = len(o.data) + at
	}
	o.data = append(o.data, data...)
	if len(o.data) > 2*copySize {
		cut := len(o.data) - copySize
		o.data = slices.Clone(o.data[cut:])
		o.enter = max(o.enter-cut, -1) // -1: the switch was cut off
	}
}
