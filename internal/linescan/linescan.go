// Package linescan finds the first line of a terminal's output that
// matches a regular expression, for /wait (package supervisor, whose
// wait's goroutine calls Scan on a timer and Partial once the terminal
// has been quiet).
//
// What it guarantees: lines are matched with escape sequences removed
// and carriage returns applied (termtext.Plain), each line alone (a match
// across lines does not count), on its first 64 KiB; a line whose start
// was skipped (past the budget of a scan) or overwritten in the ring
// before it was read is dropped, never matched on its tail; a partial
// last line (no newline yet) is tried by Partial once per length. Lines
// are matched in batches: one pass of termtext.Plain and one of the
// regular expression over many lines.
package linescan

import (
	"bytes"
	"regexp"
	"strings"

	"shellagent/outputbuf"
	"shellagent/termtext"
)

// Sizes of a scan.
const (
	maxLine   = 64 << 10 // a line is matched on its first 64 KiB
	maxBatch  = 64 << 10 // complete lines matched at once
	readChunk = 32 << 10
)

// Scanner finds the first line of a terminal's output that matches a
// pattern, escape sequences removed, reading the ring from an offset on.
// It is owned by one goroutine (a wait's).
type Scanner struct {
	re    *regexp.Regexp
	cur   outputbuf.Cursor // at the next offset of the ring to read
	line  []byte           // the line being read: its bytes since the last newline, at most maxLine
	frag  bool             // the line being read lost its start (skipped or overwritten): it is dropped
	tried int              // len(line) when Partial last tried it, or -1
	batch []byte           // complete lines, each with its newline, not yet matched
	buf   []byte
}

// New returns a scanner of a ring's output from offset from on for
// lines that re matches; re is compiled with (?m) (see findLine).
func New(re *regexp.Regexp, from int64) *Scanner {
	return &Scanner{re: re, cur: outputbuf.CursorAt(from), tried: -1, buf: make([]byte, readChunk)}
}

// Offset returns the next offset of the ring that Scan reads: it moves
// when output was read.
func (sc *Scanner) Offset() int64 { return sc.cur.Offset() }

// Scan reads what ring holds beyond the last scan, at most budget bytes
// of it (0: no limit), and returns the first complete line that matches.
func (sc *Scanner) Scan(ring *outputbuf.Ring, budget int) (string, bool) {
	total := ring.Total()
	if budget > 0 {
		sc.cur.Skip(total - int64(budget))
	}
	for sc.cur.Offset() < total {
		n, lost := sc.cur.Next(ring, sc.buf)
		if lost > 0 {
			sc.drop() // skipped, or overwritten before it was read
		}
		if n == 0 {
			break
		}
		sc.add(sc.buf[:n])
		if len(sc.batch) >= maxBatch {
			if line, ok := sc.match(); ok {
				return line, true
			}
		}
	}
	return sc.match()
}

// drop follows bytes that will never be read: the line they cut is
// dropped.
func (sc *Scanner) drop() {
	sc.line, sc.frag, sc.tried = sc.line[:0], true, -1
}

// add takes bytes of output: each line they complete joins the batch.
func (sc *Scanner) add(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			sc.extend(p)
			return
		}
		sc.extend(p[:i])
		if !sc.frag {
			sc.batch = append(append(sc.batch, sc.line...), '\n')
		}
		sc.line, sc.frag, sc.tried = sc.line[:0], false, -1
		p = p[i+1:]
	}
}

func (sc *Scanner) extend(p []byte) {
	if room := maxLine - len(sc.line); len(p) > room {
		p = p[:room]
	}
	sc.line = append(sc.line, p...)
}

// match matches the batch and empties it.
func (sc *Scanner) match() (string, bool) {
	if len(sc.batch) == 0 {
		return "", false
	}
	text := termtext.Plain(sc.batch)
	sc.batch = sc.batch[:0]
	return findLine(sc.re, text)
}

// Partial matches the line being read, which has no newline yet, unless
// it was tried as it is already.
func (sc *Scanner) Partial() (string, bool) {
	if len(sc.line) == 0 || sc.frag || len(sc.line) == sc.tried {
		return "", false
	}
	sc.tried = len(sc.line)
	text := termtext.Plain(sc.line)
	return text, sc.re.MatchString(text)
}

// findLine returns the first line of text that re matches. re is compiled
// with (?m), so that ^ and $ match at each line's ends and one pass over
// many lines finds a candidate; a match that spans lines does not count,
// so the line a candidate starts on is matched alone, and the search goes
// on after it if that fails.
func findLine(re *regexp.Regexp, text string) (string, bool) {
	for text != "" {
		loc := re.FindStringIndex(text)
		if loc == nil {
			return "", false
		}
		start := strings.LastIndexByte(text[:loc[0]], '\n') + 1
		end := len(text)
		if i := strings.IndexByte(text[start:], '\n'); i >= 0 {
			end = start + i
		}
		if line := text[start:end]; re.MatchString(line) {
			return line, true
		}
		if end == len(text) {
			return "", false
		}
		text = text[end+1:]
	}
	return "", false
}
