package lineclient

import (
	"bytes"
	"io"
	"strings"
)

// printer writes what the user reads: terminal output as it arrives,
// messages, and notes in brackets. It keeps track of an unfinished line so
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
	p.write([]byte("[" + text + "]\n"))
}

// text writes an agent message or an echoed input line on lines of its own.
func (p *printer) text(s string) {
	if s == "" {
		return
	}
	p.lineStart()
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	p.write([]byte(s))
}

// stream writes streamed text (a message chunk), which may end mid-line.
func (p *printer) stream(s string) {
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
