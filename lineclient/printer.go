package lineclient

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// printer writes what the user reads: terminal output as it arrives,
// messages, and notes in brackets. Notes and messages hold the agent's
// text, so their control characters are escaped (see [visible]); terminal
// output is written as it is, as a terminal would show it. It keeps track of an unfinished line so
// that a note or another terminal's output starts on a line of its own.
// It belongs to the client's event loop.
type printer struct {
	w    io.Writer
	open string          // who left the current line unfinished: a terminal id, "text", or "" at a line start
	cr   map[string]bool // terminals whose last chunk ended in a held-back "\r"
	err  error           // the first write error; later writes are skipped
}

func newPrinter(w io.Writer) *printer {
	return &printer{w: w, cr: make(map[string]bool)}
}

func (p *printer) write(b []byte) {
	if p.err != nil || len(b) == 0 {
		return
	}
	_, p.err = p.w.Write(b)
}

// lineStart ends an unfinished line.
func (p *printer) lineStart() {
	if p.open != "" {
		p.write([]byte("\n"))
		p.open = ""
	}
}

// note writes a note: "[text]" on a line of its own.
func (p *printer) note(text string) {
	p.lineStart()
	p.write([]byte("[" + visible(text) + "]\n"))
}

// text writes an agent message or an echoed input line on lines of its own.
func (p *printer) text(s string) {
	if s == "" {
		return
	}
	s = visible(s)
	p.lineStart()
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	p.write([]byte(s))
}

// stream writes streamed text (a message chunk), which may end mid-line.
func (p *printer) stream(s string) {
	s = visible(s)
	if p.open != "text" {
		p.lineStart()
	}
	p.write([]byte(s))
	p.open = "text"
	if strings.HasSuffix(s, "\n") {
		p.open = ""
	}
}

// output writes a chunk of terminal id's output. "\r\n" becomes "\n" (a
// "\r" at the end of a chunk is held back until the next chunk says
// whether a "\n" follows). With label set, every line starts with
// "id| ".
func (p *printer) output(id string, data []byte, label bool) {
	if p.cr[id] {
		p.cr[id] = false
		if len(data) == 0 || data[0] != '\n' {
			data = append([]byte("\r"), data...)
		}
	}
	if bytes.HasSuffix(data, []byte("\r")) {
		data = data[:len(data)-1]
		p.cr[id] = true
	}
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	if len(data) == 0 {
		return
	}
	if p.open != id {
		p.lineStart()
	}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line = data[:i+1]
		}
		data = data[len(line):]
		if label && p.open == "" {
			p.write([]byte(id + "| "))
		}
		p.write(line)
		p.open = id
		if line[len(line)-1] == '\n' {
			p.open = ""
		}
	}
}

// ended forgets a terminal's held-back "\r": its output is complete.
func (p *printer) ended(id string) { delete(p.cr, id) }

// visible returns s with what could drive a terminal made visible, so
// that the agent's text cannot clear the screen, set the window title or
// reorder what the user reads: every C0 control but newline and tab, DEL,
// every C1 control, and the bidirectional embeddings, overrides and
// isolates (U+202A to U+202E, U+2066 to U+2069) are written as Go escapes
// (strconv.QuoteRune without its quotes): ESC as \x1b, a carriage return
// as \r, CSI (U+009B) as \u009b, U+202E as \u202e. A byte that is not
// UTF-8 is written \xNN. Everything else, backslashes included, is kept.
func visible(s string) string {
	if strings.IndexFunc(s, hidden) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case hidden(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// hidden reports whether visible escapes r.
func hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case unicode.IsControl(r): // C0, DEL and C1
		return true
	}
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}
