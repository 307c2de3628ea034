// Package terminput is typing into a session's terminals and watching
// for a program that waits for input, as far as it needs nothing of the
// session but what package work gives: the prompt commands /send, /keys,
// /resize and /tail (Commands), their arguments (Parse) and the text of
// /tail (Tail); typing into a running terminal and resizing it, through a
// work.Host and its work.Terminal (Type, Resize, and the commands' Send
// and SetSize), and the rule of a running terminal (Live); the watch of a
// terminal's input wait (Watch, Input); the notify setting and the
// notices (Notify, ExitNotice, InputNotice, TakenNotice). Package
// supervisor finds the session, enters its actor, on which all of it
// runs but the watch's looks, and sends the notices.
//
// Files: commands.go (the commands' entries in the session's command
// table), terminput.go (the commands' arguments, /tail), typing.go
// (typing and resizing), watch.go (when to look for a program waiting for input,
// and the waits noticed), notice.go (the notify setting and the notices).
package terminput

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"shellagent/acp"
	"shellagent/internal/keys"
	"shellagent/outputbuf"
	"shellagent/supervisor/work"
	"shellagent/termtext"
)

// Bounds of /tail.
const (
	DefaultTail = 20       // lines shown without N
	MaxTail     = 200      // lines shown at most
	tailText    = 16 << 10 // bytes of text shown at most: the message is kept in the history
	tailWindow  = 256 << 10
)

// Args are the arguments of /send, /keys, /resize or /tail: the terminal
// id, and what follows it (Parse).
type Args struct {
	ID    string           // the terminal's id (the commands' Parse; not Parse's)
	Data  []byte           // the bytes to type (/send, /keys)
	What  string           // what they are, for the answer (/send, /keys)
	Size  acp.TerminalSize // the new size (/resize)
	Lines int              // how many lines to show (/tail)
}

// Parse reads arg, the arguments of command name (send, keys, resize,
// tail) after the terminal id. A problem is said in a sentence without
// its final period; usage reports whether the command's usage is to
// follow it.
func Parse(name, arg string) (a Args, problem string, usage bool) {
	switch name {
	case "send":
		a.Data, a.What = []byte(arg+"\r"), "Enter"
		if arg != "" {
			a.What = strconv.Quote(work.Shorten(arg, 40)) + " and Enter"
		}
	case "keys":
		names := strings.Fields(arg)
		if len(names) == 0 {
			return a, "/keys needs at least one key", true
		}
		for _, k := range names {
			b, err := keys.Bytes(k)
			if err != nil {
				return a, "/keys: " + err.Error() + ". " + keys.Help, false
			}
			a.Data = append(a.Data, b...)
		}
		a.What = strings.Join(names, " ")
	case "resize":
		cols, rows, ok := strings.Cut(arg, "x")
		c, err1 := strconv.Atoi(cols)
		r, err2 := strconv.Atoi(rows)
		if !ok || err1 != nil || err2 != nil {
			return a, fmt.Sprintf("/resize: %q is not a size COLSxROWS", arg), true
		}
		a.Size = acp.TerminalSize{Cols: c, Rows: r}
		if err := a.Size.Validate("size"); err != nil {
			return a, "/resize: " + errorMessage(err), true
		}
	case "tail":
		a.Lines = DefaultTail
		if arg != "" {
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return a, fmt.Sprintf("/tail: %q is not a number of lines (1 or more)", arg), true
			}
			a.Lines = min(n, MaxTail)
		}
	}
	return a, "", false
}

// errorMessage is the message of err, without the code of an acp.Error.
func errorMessage(err error) string {
	if pe, ok := errors.AsType[*acp.Error](err); ok {
		return pe.Message
	}
	return err.Error()
}

// Tail is the /tail answer: the last n lines of the output ring of
// terminal id as plain text, running or exited; line is its command line
// and status says whether it runs or how it ended. It reads the ring,
// which any goroutine may.
func Tail(id, line, status string, ring *outputbuf.Ring, n int) string {
	buf := make([]byte, min(ring.Total(), tailWindow))
	k, start := ring.ReadAt(buf, ring.Total()-int64(len(buf)))
	text := termtext.Plain(buf[:k])
	if start > 0 {
		// The window may start in the middle of a line (or a character,
		// or an escape sequence): show only whole lines.
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
	}
	last, lines := termtext.LastLines(text, n)
	shown := strings.Count(last, "\n") + 1
	cut := false // last is the end of a line longer than tailText
	if len(last) > tailText {
		if _, after, ok := strings.Cut(last[len(last)-tailText:], "\n"); ok && after != "" {
			last, shown = after, strings.Count(after, "\n")+1
		} else {
			// The last line alone is longer than the text shown (a
			// minified file, a long JSON line, a line the window
			// began in): its end, from a character's start.
			end := last[len(last)-tailText:]
			for end != "" && !utf8.RuneStart(end[0]) {
				end = end[1:]
			}
			last, shown, cut = "…"+end, 1, true
		}
	}
	what := fmt.Sprintf("%s (%s, %s)", id, shortLine(line), status)
	switch {
	case last == "":
		return "No output from " + what + "."
	case cut:
		return fmt.Sprintf("Output of %s, the end of its last line, escape sequences removed:\n%s", what, termtext.Fence(last))
	case start == 0 && shown == lines:
		return fmt.Sprintf("Output of %s, all %s, escape sequences removed:\n%s", what, plural(shown, "line"), termtext.Fence(last))
	}
	return fmt.Sprintf("Output of %s, the last %s, escape sequences removed:\n%s", what, plural(shown, "line"), termtext.Fence(last))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
