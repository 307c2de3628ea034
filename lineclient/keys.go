package lineclient

import (
	"bytes"
	"unicode/utf8"
)

// Keys as terminal mode reads them: bytes from a terminal in raw mode,
// where a key is a byte, a UTF-8 character or an escape sequence, and
// where the terminal's own replies (a cursor position report such as
// ESC[12;1R, device attributes, colours asked with OSC) arrive on the same
// stream as the keys.

const (
	keyEsc    = 0x1b
	keyCtrlB  = 0x02 // the prefix of the client's keys while a terminal has the keyboard
	keyCtrlC  = 0x03
	keyDelete = 0x7f
	maxSeq    = 4 << 10 // longest escape sequence waited for across reads; longer ones are dropped
)

// editKeys returns the keys of b that the line editor takes: text, Enter,
// Backspace, Ctrl-C and Ctrl-D, the editing keys (Ctrl-A, E, K, U, W, L,
// T, H, B, F, N, P), the cursor keys, Home, End and Delete (in the forms
// golang.org/x/term knows). Everything else is dropped: terminal replies,
// function keys, Alt chords, the Escape key, Tab and the other controls.
// rest is an escape sequence or a UTF-8 character that b ends in the
// middle of, to be put before the next read; a lone ESC at the end of a
// read is the Escape key, and is dropped.
func editKeys(b []byte) (keys, rest []byte) {
	keys = make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == keyEsc:
			n := seqLen(b[i:])
			if n == 0 { // cut by the end of the read
				if len(b)-i == 1 || len(b)-i > maxSeq {
					return keys, nil // the Escape key, or no sequence at all
				}
				return keys, b[i:]
			}
			keys = append(keys, editorKey(b[i:i+n])...)
			i += n
		case c < 0x20 || c == keyDelete:
			if editControl(c) {
				keys = append(keys, c)
			}
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			switch {
			case r == utf8.RuneError && n == 1 && !utf8.FullRune(b[i:]):
				return keys, b[i:]
			case r == utf8.RuneError && n == 1, r >= 0x80 && r <= 0x9f: // not UTF-8; C1 controls
			default:
				keys = append(keys, b[i:i+n]...)
			}
			i += n
		}
	}
	return keys, nil
}

// editControl reports whether the line editor takes control character c.
func editControl(c byte) bool {
	switch c {
	case 0x01, keyCtrlB, keyCtrlC, 0x04, 0x05, 0x06, 0x08, '\n', 0x0b, 0x0c, '\r', 0x0e, 0x10, 0x14, 0x15, 0x17, keyDelete:
		return true
	}
	return false
}

// editorKey translates a complete escape sequence into what
// golang.org/x/term's editor knows, or nothing if it has no use for it.
func editorKey(seq []byte) []byte {
	switch string(seq) {
	case "\x1b[A", "\x1b[B", "\x1b[C", "\x1b[D", "\x1b[H", "\x1b[F", "\x1b[3~", "\x1b[1;3C", "\x1b[1;3D":
		return seq
	case "\x1bOA", "\x1bOB", "\x1bOC", "\x1bOD", "\x1bOH", "\x1bOF": // application cursor keys
		return []byte{keyEsc, '[', seq[2]}
	case "\x1b[1~", "\x1b[7~":
		return []byte("\x1b[H")
	case "\x1b[4~", "\x1b[8~":
		return []byte("\x1b[F")
	case "\x1b[1;5C":
		return []byte("\x1b[1;3C") // Ctrl-Right: a word right
	case "\x1b[1;5D":
		return []byte("\x1b[1;3D")
	}
	return nil
}

// seqLen returns the length of the escape sequence that b starts with
// (b[0] is ESC), or 0 if b ends before it does. It knows CSI (ESC [,
// parameters, intermediates, a final byte), SS3 (ESC O and a byte), the
// string sequences OSC, DCS, SOS, PM and APC (ended by BEL or ESC \), and
// ESC followed by one byte.
func seqLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '[':
		for i := 2; i < len(b); i++ {
			if b[i] >= 0x40 && b[i] <= 0x7e {
				return i + 1
			}
			if b[i] < 0x20 || b[i] > 0x7e { // not a CSI byte: the sequence ends here, broken
				return i
			}
		}
		return 0
	case 'O':
		if len(b) < 3 {
			return 0
		}
		return 3
	case ']', 'P', 'X', '^', '_':
		for i := 2; i < len(b); i++ {
			switch {
			case b[i] == 0x07:
				return i + 1
			case b[i] == keyEsc && i+1 < len(b) && b[i+1] == '\\':
				return i + 2
			case b[i] == keyEsc && i+1 < len(b): // another sequence starts: this one was cut off
				return i
			}
		}
		return 0
	case keyEsc:
		return 1 // the Escape key, then a sequence
	}
	return 2
}

// altScreen tells whether a terminal's program has switched to the
// alternate screen (as full-screen programs do: vim, less, top) and not
// back, from its output, across chunks.
type altScreen struct {
	on   bool
	tail []byte // the end of the last chunk, which may hold a cut sequence
}

var (
	altOn  = [][]byte{[]byte("\x1b[?1049h"), []byte("\x1b[?1047h"), []byte("\x1b[?47h")}
	altOff = [][]byte{[]byte("\x1b[?1049l"), []byte("\x1b[?1047l"), []byte("\x1b[?47l")}
)

// scan follows the switches in data. It returns the offset in data just
// after the last switch to the alternate screen, or -1 if data holds none.
func (a *altScreen) scan(data []byte) int {
	buf := append(a.tail, data...)
	on, off := lastOf(buf, altOn), lastOf(buf, altOff)
	enter := -1
	switch {
	case on > off:
		a.on = true
		enter = max(on-len(a.tail), 0)
	case off > on:
		a.on = false
	}
	keep := min(len(buf), len("\x1b[?1049h")-1)
	a.tail = append(a.tail[:0], buf[len(buf)-keep:]...)
	return enter
}

// lastOf returns the offset just after the last occurrence in b of any of
// seqs, or -1.
func lastOf(b []byte, seqs [][]byte) int {
	last := -1
	for _, s := range seqs {
		if i := bytes.LastIndex(b, s); i >= 0 {
			last = max(last, i+len(s))
		}
	}
	return last
}

// lineStartAfter reports whether the cursor is at the start of a line
// after a terminal has shown data, given whether it was before: after a
// newline, or after leaving the alternate screen (which puts the cursor
// back where it was), with nothing printable since. Escape sequences do
// not count as printable.
func lineStartAfter(data []byte, start bool) bool {
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '\n':
			start = true
		case c == keyEsc:
			n := seqLen(data[i:])
			if n == 0 {
				return start
			}
			if lastOf(data[i:i+n], altOff) > 0 {
				start = true
			}
			i += n
			continue
		case c >= 0x20 && c != keyDelete:
			start = false
		}
		i++
	}
	return start
}
