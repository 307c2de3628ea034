package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// screen is a small model of the terminal a person reads: enough of a
// VT100 to track lines and the cursor (printable text with wrapping, CR,
// LF, BS, TAB, cursor moves and CUP, ED and EL, save and restore, the
// alternate screen), and to answer a cursor position request (ESC[6n) as
// a terminal does, by typing the report. Everything else is ignored.
type screen struct {
	mu         sync.Mutex
	rows, cols int
	grid       [][]rune
	main       [][]rune // the main screen while the alternate one is shown
	gone       []string // lines scrolled off the top of the main screen
	row, col   int
	wrapNext   bool // the cursor is past the last column: the next character wraps
	savedRow   int
	savedCol   int
	pending    []byte    // an escape sequence or a character cut by the end of a write
	replies    io.Writer // where the terminal's replies go
}

func newScreen(rows, cols int, replies io.Writer) *screen {
	s := &screen{rows: rows, cols: cols, replies: replies}
	s.grid = s.blank()
	return s
}

func (s *screen) blank() [][]rune {
	g := make([][]rune, s.rows)
	for i := range g {
		g[i] = []rune(strings.Repeat(" ", s.cols))
	}
	return g
}

// Write takes what the program wrote to the terminal.
func (s *screen) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(b)
	b = append(s.pending, b...)
	s.pending = nil
	for len(b) > 0 {
		switch c := b[0]; {
		case c == 0x1b:
			k := s.escape(b)
			if k == 0 {
				s.pending = append([]byte(nil), b...)
				return n, nil
			}
			b = b[k:]
			continue
		case c == '\r':
			s.col, s.wrapNext = 0, false
		case c == '\n':
			s.lineFeed()
		case c == '\b':
			s.col, s.wrapNext = max(s.col-1, 0), false
		case c == '\t':
			s.col = min((s.col/8+1)*8, s.cols-1)
		case c < 0x20 || c == 0x7f:
		default:
			r, k := utf8.DecodeRune(b)
			if r == utf8.RuneError && !utf8.FullRune(b) {
				s.pending = append([]byte(nil), b...)
				return n, nil
			}
			s.put(r)
			b = b[k:]
			continue
		}
		b = b[1:]
	}
	return n, nil
}

func (s *screen) put(r rune) {
	if s.wrapNext {
		s.col, s.wrapNext = 0, false
		s.lineFeed()
	}
	s.grid[s.row][s.col] = r
	if s.col == s.cols-1 {
		s.wrapNext = true
	} else {
		s.col++
	}
}

func (s *screen) lineFeed() {
	s.wrapNext = false
	if s.row < s.rows-1 {
		s.row++
		return
	}
	if s.main == nil {
		s.gone = append(s.gone, strings.TrimRight(string(s.grid[0]), " "))
	}
	s.grid = append(s.grid[1:], []rune(strings.Repeat(" ", s.cols)))
}

// escape applies the escape sequence b starts with and returns its
// length, or 0 if b ends before it does.
func (s *screen) escape(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '[':
		for i := 2; i < len(b); i++ {
			if b[i] >= 0x40 && b[i] <= 0x7e {
				s.csi(string(b[2:i]), b[i])
				return i + 1
			}
		}
		return 0
	case ']', 'P', '_', '^':
		for i := 2; i < len(b); i++ {
			if b[i] == 0x07 {
				return i + 1
			}
			if b[i] == 0x1b && i+1 < len(b) && b[i+1] == '\\' {
				return i + 2
			}
		}
		return 0
	case '(', ')', '#':
		if len(b) < 3 {
			return 0
		}
		return 3
	case '7':
		s.savedRow, s.savedCol = s.row, s.col
	case '8':
		s.row, s.col, s.wrapNext = s.savedRow, s.savedCol, false
	}
	return 2
}

func (s *screen) csi(params string, final byte) {
	private := strings.HasPrefix(params, "?")
	params = strings.TrimLeft(params, "?>=<")
	var args []int
	for p := range strings.SplitSeq(params, ";") {
		n, _ := strconv.Atoi(p) // Safe: an empty or odd parameter is 0, the default.
		args = append(args, n)
	}
	arg := func(i, def int) int {
		if i < len(args) && args[i] > 0 {
			return args[i]
		}
		return def
	}
	s.wrapNext = false
	switch final {
	case 'A':
		s.row = max(s.row-arg(0, 1), 0)
	case 'B':
		s.row = min(s.row+arg(0, 1), s.rows-1)
	case 'C':
		s.col = min(s.col+arg(0, 1), s.cols-1)
	case 'D':
		s.col = max(s.col-arg(0, 1), 0)
	case 'G':
		s.col = min(arg(0, 1), s.cols) - 1
	case 'H', 'f':
		s.row, s.col = min(arg(0, 1), s.rows)-1, min(arg(1, 1), s.cols)-1
	case 'J':
		s.erase(arg(0, 0), true)
	case 'K':
		s.erase(arg(0, 0), false)
	case 'n':
		if arg(0, 0) == 6 && s.replies != nil {
			fmt.Fprintf(s.replies, "\x1b[%d;%dR", s.row+1, s.col+1)
		}
	case 'h', 'l':
		if private && (arg(0, 0) == 1049 || arg(0, 0) == 47 || arg(0, 0) == 1047) {
			s.alternate(final == 'h')
		}
	}
}

// erase is ED (screen) or EL (line): 0 from the cursor on, 1 up to it, 2
// all.
func (s *screen) erase(mode int, screen bool) {
	clear := func(row, from, to int) {
		for c := from; c < to; c++ {
			s.grid[row][c] = ' '
		}
	}
	switch mode {
	case 0:
		clear(s.row, s.col, s.cols)
		for r := s.row + 1; screen && r < s.rows; r++ {
			clear(r, 0, s.cols)
		}
	case 1:
		clear(s.row, 0, s.col+1)
		for r := 0; screen && r < s.row; r++ {
			clear(r, 0, s.cols)
		}
	default:
		clear(s.row, 0, s.cols)
		for r := 0; screen && r < s.rows; r++ {
			clear(r, 0, s.cols)
		}
	}
}

func (s *screen) alternate(on bool) {
	switch {
	case on && s.main == nil:
		s.main, s.grid = s.grid, s.blank()
		s.savedRow, s.savedCol = s.row, s.col
	case !on && s.main != nil:
		s.grid, s.main = s.main, nil
		s.row, s.col = s.savedRow, s.savedCol
	}
}

// resize changes the screen's size as a terminal that cuts what does not
// fit.
func (s *screen) resize(rows, cols int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := make([][]rune, rows)
	for i := range g {
		g[i] = []rune(strings.Repeat(" ", cols))
		if i < len(s.grid) {
			copy(g[i], s.grid[i])
		}
	}
	s.rows, s.cols, s.grid, s.main = rows, cols, g, nil
	s.row, s.col, s.wrapNext = min(s.row, rows-1), min(s.col, cols-1), false
}

func (s *screen) lines() string {
	var b strings.Builder
	for _, row := range s.grid {
		b.WriteString(strings.TrimRight(string(row), " ") + "\n")
	}
	return b.String()
}

// all returns the lines scrolled off the main screen, then the visible
// screen.
func (s *screen) all() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, l := range s.gone {
		b.WriteString(l + "\n")
	}
	b.WriteString(s.lines())
	return strings.TrimRight(b.String(), "\n")
}

// cursorLine returns the row the cursor is on, without trailing blanks.
func (s *screen) cursorLine() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.TrimRight(string(s.grid[s.row]), " ")
}
