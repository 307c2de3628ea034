package protocol

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Terminal output as text, for the ACP v1 front, whose clients take output
// as JSON strings: bytes are decoded as UTF-8 across chunk boundaries, and
// invalid bytes are replaced the way the Unicode standard recommends.

// cutIncomplete splits p before a UTF-8 sequence that p's end cuts short:
// complete ends at a sequence boundary, and rest (at most 3 bytes) is the
// start of a sequence that the next bytes may complete. Bytes that cannot
// start or continue a valid sequence are left in complete, where
// appendJSONString replaces them.
func cutIncomplete(p []byte) (complete, rest []byte) {
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		if !utf8.RuneStart(p[i]) {
			continue // a continuation byte: look for its lead byte
		}
		if !utf8.FullRune(p[i:]) {
			return p[:i], p[i:]
		}
		break
	}
	return p, nil
}

// invalidLen returns the length of the maximal subpart of an ill-formed
// sequence at the start of p (which utf8.DecodeRune rejected): the lead
// byte and the continuation bytes that could still have completed it.
// Each such subpart becomes one U+FFFD, as the Unicode standard recommends
// and as WHATWG's TextDecoder and Rust's from_utf8_lossy do.
func invalidLen(p []byte) int {
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

const hexDigits = "0123456789abcdef"

// appendJSONString appends p as a JSON string: valid UTF-8 as it is,
// quotes, backslashes and control characters escaped, and each maximal
// ill-formed subpart replaced by \ufffd. It does not allocate beyond dst.
func appendJSONString(dst, p []byte) []byte {
	dst = append(dst, '"')
	start := 0 // p[start:i] is pending, to be copied as it is
	for i := 0; i < len(p); {
		c := p[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			if r, size := utf8.DecodeRune(p[i:]); r != utf8.RuneError || size > 1 {
				i += size
				continue
			}
			dst = append(dst, p[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += invalidLen(p[i:])
			start = i
			continue
		}
		dst = append(dst, p[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, p[start:]...)
	return append(dst, '"')
}

// plainText renders terminal output for a reader without a terminal
// emulator: escape sequences (CSI, OSC, and two-byte ESC sequences) are
// removed, a carriage return not followed by a line feed starts its line
// over (as progress bars expect), "\r\n" becomes "\n", other control
// characters but tab are dropped, and invalid UTF-8 becomes U+FFFD.
func plainText(p []byte) string {
	var out []byte
	lineStart := 0
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c == 0x1b:
			i += escapeLen(p[i:])
		case c == '\r':
			if i+1 < len(p) && p[i+1] == '\n' {
				i++
				continue
			}
			out = out[:lineStart]
			i++
		case c == '\n':
			out = append(out, '\n')
			lineStart = len(out)
			i++
		case c == '\t' || c >= 0x20 && c < 0x7f:
			out = append(out, c)
			i++
		case c < utf8.RuneSelf:
			i++ // another control character
		default:
			r, size := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && size <= 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
				i += invalidLen(p[i:])
				continue
			}
			out = append(out, p[i:i+size]...)
			i += size
		}
	}
	return string(out)
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

// tailMax bounds the output a v1 client without terminal support gets in
// a command's final tool call update.
const tailMax = 4 << 10

// tailText is the tool call text that shows the end of a command's
// output to a client that cannot show terminals: the last tailMax bytes
// of it at most (from the first line that starts in them, when they do
// not hold everything), as plain text in a code fence, with the sizes
// stated. total counts every byte the command wrote; tail holds the last
// of them.
func tailText(tail []byte, total int64) string {
	if total == 0 {
		return "No output."
	}
	shown := tail
	if int64(len(shown)) > total {
		shown = shown[int64(len(shown))-total:]
	}
	if len(shown) > tailMax {
		shown = shown[len(shown)-tailMax:]
	}
	if int64(len(shown)) < total {
		// Start at a line: the cut may have split a line, a character or
		// an escape sequence.
		if i := bytes.IndexByte(shown, '\n'); i >= 0 && i+1 < len(shown) {
			shown = shown[i+1:]
		}
	}
	text := strings.TrimRight(plainText(shown), "\n")
	head := fmt.Sprintf("Output (%s, escape sequences removed):", sizeText(int64(len(shown))))
	if int64(len(shown)) < total {
		head = fmt.Sprintf("Output (the last %s of %s, escape sequences removed):", sizeText(int64(len(shown))), sizeText(total))
	}
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	return head + "\n" + fence + "\n" + text + "\n" + fence
}

// sizeText renders a byte count for people.
func sizeText(n int64) string {
	switch {
	case n == 1:
		return "1 byte"
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
