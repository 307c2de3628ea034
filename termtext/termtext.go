// Package termtext turns terminal output into plain text for readers
// without a terminal emulator: escape sequences removed, carriage returns
// applied, invalid UTF-8 replaced. The ACP v1 front uses it for the output
// it shows as text, the supervisor for /tail. Fence puts such text in a
// Markdown code block for an editor; Unfence takes it out again for the
// stack's command line.
package termtext

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// Plain renders terminal output as plain text: escape sequences (CSI,
// OSC, DCS and two-byte ESC sequences) are removed, text that follows a
// carriage return on its line starts the line over (as progress bars
// expect), while a carriage return that nothing follows on its line
// leaves it as it is (a line ended with "\r\n", which a terminal's ONLCR
// makes "\r\r\n", or the output's last line), an erase of the line
// (ESC [ 2 K, or ESC [ K right after a carriage return) empties it, as a
// terminal shows it, other control characters
// but tab are dropped, and each maximal ill-formed UTF-8 subpart becomes
// one U+FFFD (see IllFormedLen).
func Plain(p []byte) string {
	var out []byte
	lineStart := 0
	over := false // a carriage return came: the next text starts the line over
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == 0x1b:
			n := escapeLen(p[i:])
			if erasesLine(p[i:i+n], over) {
				out = out[:lineStart]
			}
			i += n
		case c == '\r':
			over = true
			i++
		case c == '\n':
			out = append(out, '\n')
			lineStart, over = len(out), false
			i++
		case c == '\t' || c >= 0x20 && c < 0x7f:
			if over {
				out, over = out[:lineStart], false
			}
			out = append(out, c)
			i++
		case c < utf8.RuneSelf:
			i++ // another control character
		default:
			if over {
				out, over = out[:lineStart], false
			}
			r, size := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size <= 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
				i += IllFormedLen(p[i:])
				continue
			}
			out = append(out, p[i:i+size]...)
			i += size
		}
	}
	return string(out)
}

// erasesLine reports whether the escape sequence esc erases the line's
// text as Plain keeps it: "ESC [ 2 K" (the whole line), or "ESC [ K" and
// "ESC [ 0 K" (to its end) with the cursor at its start (atStart: a
// carriage return came last).
func erasesLine(esc []byte, atStart bool) bool {
	switch string(esc) {
	case "\x1b[2K":
		return true
	case "\x1b[K", "\x1b[0K":
		return atStart
	}
	return false
}

// escapeLen returns the length of the escape sequence at the start of p
// (p[0] is ESC); an unterminated one runs to the end of p.
func escapeLen(p []byte) int {
	if len(p) < 2 {
		return len(p)
	}
	switch p[1] {
	case '[': // CSI: parameters and intermediates, then a final byte
		for i := 2; i < len(p); i++ {
			if p[i] >= 0x40 && p[i] <= 0x7e {
				return i + 1
			}
		}
		return len(p)
	case ']', 'P', '_', '^': // OSC, DCS, APC, PM: up to BEL or ST
		for i := 2; i < len(p); i++ {
			if p[i] == 0x07 {
				return i + 1
			}
			if p[i] == 0x1b && i+1 < len(p) && p[i+1] == '\\' {
				return i + 2
			}
		}
		return len(p)
	}
	i := 1
	for i < len(p) && p[i] >= 0x20 && p[i] <= 0x2f { // intermediates, as in ESC ( B
		i++
	}
	if i < len(p) {
		i++ // the final byte
	}
	return i
}

// IllFormedLen returns the length of the maximal subpart of an ill-formed
// UTF-8 sequence at the start of p (which utf8.DecodeRune rejected): the
// lead byte and the continuation bytes that could still have completed
// it. Each such subpart becomes one U+FFFD, as the Unicode standard
// recommends and as WHATWG's TextDecoder and Rust's from_utf8_lossy do.
// p must not be empty.
func IllFormedLen(p []byte) int {
	b := p[0]
	lo, hi := byte(0x80), byte(0xBF)
	var need int
	switch {
	case b >= 0xC2 && b <= 0xDF:
		need = 1
	case b == 0xE0:
		need, lo = 2, 0xA0
	case b == 0xED:
		need, hi = 2, 0x9F
	case b >= 0xE1 && b <= 0xEF:
		need = 2
	case b == 0xF0:
		need, lo = 3, 0x90
	case b == 0xF4:
		need, hi = 3, 0x8F
	case b >= 0xF1 && b <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(p); n++ {
		c := p[n]
		if n > 1 {
			lo, hi = 0x80, 0xBF
		}
		if c < lo || c > hi {
			break
		}
	}
	return n
}

// LastLines returns the last n lines of text (n > 0), a final line
// without a newline counting as one, and how many lines text has in all.
// Trailing empty lines are left out: a terminal's cursor on an empty last
// line is not output worth showing.
func LastLines(text string, n int) (last string, lines int) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return "", 0
	}
	lines = strings.Count(text, "\n") + 1
	start := len(text)
	for range n {
		i := strings.LastIndexByte(text[:start], '\n')
		if i < 0 {
			return text, lines
		}
		start = i
	}
	return text[start+1:], lines
}

// LastLinesStart returns where the last n lines of b start: after the
// nth newline from its end, not counting one that ends b; 0 if b holds n
// lines or fewer, len(b) for n <= 0. Unlike LastLines it keeps b as it is:
// bytes of a terminal, escapes and trailing empty lines included.
func LastLinesStart(b []byte, n int) int {
	if n <= 0 {
		return len(b)
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for ; n > 0; n-- {
		if end = bytes.LastIndexByte(b[:end], '\n'); end < 0 {
			return 0
		}
	}
	return end + 1
}

// Fence returns text in a Markdown code fence that text cannot close: a
// run of backticks longer than any in it.
func Fence(text string) string {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	return fence + "\n" + text + "\n" + fence
}

// Unfence undoes Fence at the end of s: for s = head + "\n" + Fence(body),
// or Fence(body) alone (head ""), it returns head and body. When s does not
// end in a fenced block, ok is false and head is s.
func Unfence(s string) (head, body string, ok bool) {
	i := strings.LastIndexByte(s, '\n')
	fence := s[i+1:]
	if i < 0 || len(fence) < 3 || strings.Trim(fence, "`") != "" {
		return s, "", false
	}
	// body holds no run of backticks as long as fence: the last line
	// before it that is fence opens the block.
	rest := s[:i+1]
	open := strings.LastIndex(rest, "\n"+fence+"\n") + 1
	if open == 0 && !strings.HasPrefix(rest, fence+"\n") {
		return s, "", false
	}
	body = strings.TrimSuffix(rest[open+len(fence)+1:], "\n")
	return strings.TrimSuffix(s[:open], "\n"), body, true
}
