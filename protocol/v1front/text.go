package v1front

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"shellagent/termtext"
)

// Terminal output as text, for the ACP v1 front, whose clients take output
// as JSON strings: bytes are decoded as UTF-8 across chunk boundaries, and
// invalid bytes are replaced the way the Unicode standard recommends (see
// termtext.IllFormedLen).

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
			i += termtext.IllFormedLen(p[i:])
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
	text := strings.TrimRight(termtext.Plain(shown), "\n")
	head := fmt.Sprintf("Output (%s, escape sequences removed):", sizeText(int64(len(shown))))
	if int64(len(shown)) < total {
		head = fmt.Sprintf("Output (the last %s of %s, escape sequences removed):", sizeText(int64(len(shown))), sizeText(total))
	}
	return head + "\n" + termtext.Fence(text)
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
