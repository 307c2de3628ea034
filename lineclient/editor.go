package lineclient

import (
	"io"
	"sync"

	"golang.org/x/term"
)

// prompt is what the line editor shows before the line.
const prompt = "> "

// editor is terminal mode's line editor: golang.org/x/term's Terminal
// (line editing, history), which reads its keys from a feed that the
// event loop fills and writes to the user's terminal. It runs on a
// goroutine of its own, which reads one line each time the loop asks
// (read) and hands it back on lines. While it reads, the Terminal's lock
// orders its writes and the loop's (through term.Write), and the loop
// writes to the user's terminal only through it.
type editor struct {
	term    *term.Terminal
	rw      io.ReadWriter // the feed and the user's terminal, which term uses
	cols    int           // the width term was given
	rows    int
	in      *feed
	want    chan struct{}   // the loop asks for a line
	lines   chan editResult // the line, or io.EOF for Ctrl-D on an empty line
	done    chan struct{}   // closed when the goroutine has returned
	reading bool            // a line was asked for and has not come back; the loop's
}

// editResult is a line read by the editor.
type editResult struct {
	line string
	err  error
}

func newEditor(out io.Writer) *editor {
	e := &editor{
		in:    newFeed(),
		want:  make(chan struct{}, 1),
		lines: make(chan editResult, 1),
		done:  make(chan struct{}),
	}
	e.rw = struct {
		io.Reader
		io.Writer
	}{e.in, out}
	e.term = term.NewTerminal(e.rw, prompt)
	go e.run()
	return e
}

// setSize gives the editor the terminal's size.
func (e *editor) setSize(cols, rows int) {
	e.cols, e.rows = cols, rows
	_ = e.term.SetSize(cols, rows) // Best effort: a failed write shows in the printer's next.
}

func (e *editor) run() {
	defer close(e.done)
	for range e.want {
		line, err := e.term.ReadLine()
		e.lines <- editResult{line, err}
	}
}

// read asks for a line, unless one is being read.
func (e *editor) read() {
	if !e.reading {
		e.reading = true
		e.want <- struct{}{}
	}
}

// got takes a line that came back. After io.EOF (Ctrl-D on an empty
// line) the Terminal is replaced by a new one with the same history: x/term
// returns io.EOF without consuming the Ctrl-D, and would return it again
// at every ReadLine. Keys read along with that Ctrl-D are lost.
func (e *editor) got(r editResult) {
	e.reading = false
	if r.err == nil {
		return
	}
	history := e.term.History
	e.term = term.NewTerminal(e.rw, prompt)
	e.term.History = history
	if e.cols > 0 {
		e.setSize(e.cols, e.rows)
	}
}

// close ends the goroutine: a line being read ends with io.EOF, never
// delivered.
func (e *editor) close() {
	e.in.close()
	close(e.want)
	<-e.done
}

// feed is the editor's input: bytes pushed by the event loop, read by
// the editor's goroutine. Its mutex guards it.
type feed struct {
	mu     sync.Mutex
	ready  *sync.Cond
	buf    []byte
	closed bool
}

func newFeed() *feed {
	f := &feed{}
	f.ready = sync.NewCond(&f.mu)
	return f
}

// Read blocks until there are bytes, or returns io.EOF once closed.
func (f *feed) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.buf) == 0 && !f.closed {
		f.ready.Wait()
	}
	if len(f.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

func (f *feed) push(b []byte) {
	if len(b) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, b...)
	f.ready.Signal()
}

func (f *feed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	f.ready.Signal()
}
