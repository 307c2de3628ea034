// Package keys turns key names, as tmux's send-keys names them, into the
// bytes an xterm sends for them, for /keys (package supervisor).
//
// What it guarantees: a name is read in any case; a single character is
// itself; C- (or ^) with a letter or one of @ [ \ ] ^ _ ? and Space is
// its control byte, and M- puts ESC first; anything else is refused with
// an error that names the key. The bytes are an xterm's
// (TERM=xterm-256color), cursor keys in normal mode.
package keys

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Keys for /keys, named as tmux's send-keys names them, with the bytes an
// xterm sends for each (the agent sets TERM=xterm-256color). The cursor
// keys are sent in normal mode (ESC [ A); programs in application cursor
// mode (ESC O A) accept those too, as a rule.
var namedKeys = map[string]string{
	"enter": "\r", "escape": "\x1b", "tab": "\t", "btab": "\x1b[Z", "bspace": "\x7f", "space": " ",
	"up": "\x1b[A", "down": "\x1b[B", "right": "\x1b[C", "left": "\x1b[D",
	"home": "\x1b[H", "end": "\x1b[F",
	"pageup": "\x1b[5~", "pgup": "\x1b[5~", "ppage": "\x1b[5~",
	"pagedown": "\x1b[6~", "pgdn": "\x1b[6~", "npage": "\x1b[6~",
	"ic": "\x1b[2~", "insert": "\x1b[2~", "dc": "\x1b[3~", "delete": "\x1b[3~",
	"f1": "\x1bOP", "f2": "\x1bOQ", "f3": "\x1bOR", "f4": "\x1bOS",
	"f5": "\x1b[15~", "f6": "\x1b[17~", "f7": "\x1b[18~", "f8": "\x1b[19~",
	"f9": "\x1b[20~", "f10": "\x1b[21~", "f11": "\x1b[23~", "f12": "\x1b[24~",
}

// Help says how keys are named, for the message about one that is not.
const Help = "Keys are named as tmux send-keys names them: Enter, Escape, Tab, BTab, BSpace, Space, " +
	"Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, F1 to F12, " +
	"a single character, and C-x or ^x (Ctrl) and M-x (Alt) with a character. To type text, use /send ID TEXT"

// Bytes returns the bytes that typing key sends: a name (any case), a
// single character, or either behind the prefixes C- (Ctrl, on a
// character only) and M- (Alt: ESC first), as tmux reads them.
func Bytes(key string) ([]byte, error) {
	ctrl, meta := false, false
	k := key
	for len(k) > 2 && k[1] == '-' {
		switch k[0] {
		case 'C', 'c':
			ctrl = true
		case 'M', 'm':
			meta = true
		default:
			return nil, fmt.Errorf("unknown key %q", key)
		}
		k = k[2:]
	}
	if len(k) == 2 && k[0] == '^' {
		ctrl, k = true, k[1:]
	}
	var b []byte
	switch {
	case utf8.RuneCountInString(k) == 1:
		b = []byte(k)
	case namedKeys[strings.ToLower(k)] != "":
		b = []byte(namedKeys[strings.ToLower(k)])
	default:
		return nil, fmt.Errorf("unknown key %q", key)
	}
	if ctrl {
		c, ok := controlByte(b)
		if !ok {
			return nil, fmt.Errorf("%q: Ctrl goes with a letter or one of @ [ \\ ] ^ _ ? and Space", key)
		}
		b = []byte{c}
	}
	if meta {
		b = append([]byte{0x1b}, b...)
	}
	return b, nil
}

// controlByte is what Ctrl with the one-byte key b sends.
func controlByte(b []byte) (byte, bool) {
	if len(b) != 1 {
		return 0, false
	}
	switch c := b[0]; {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return c & 0x1f, true
	case c == '@', c == ' ':
		return 0, true
	case c >= '[' && c <= '_':
		return c & 0x1f, true
	case c == '?':
		return 0x7f, true
	}
	return 0, false
}
