package terminput

import (
	"errors"
	"fmt"

	"shellagent/acp"
	"shellagent/ptyio"
	"shellagent/supervisor/work"
)

// Type writes data to the input of terminal id of h, on the session's
// actor. It never blocks: a full input buffer (the program does not read)
// is the -32800 error, whose data says how many bytes were written; a
// terminal that does not run or takes no input is a -32602 error.
func Type(h work.Host, id string, data []byte) error {
	t := h.Terminal(id)
	if err := work.Live(id, t); err != nil {
		return err
	}
	n, err := t.Write(data)
	switch {
	case errors.Is(err, ptyio.ErrInputFull):
		return &acp.Error{
			Code:    acp.CodeRequestCancelled,
			Message: fmt.Sprintf("the input buffer of %s is full: its program is not reading its input (%d of %d bytes were written)", id, n, len(data)),
			Data:    map[string]any{"terminalId": id, "written": n},
		}
	case err != nil:
		return acp.InvalidParams("terminalId: %s takes no input: %v", id, err)
	}
	return nil
}

// Resize sets the size of terminal id of h, which sends a terminal_update
// with it, on the session's actor; a terminal that does not run, a size
// out of bounds, or a terminal that cannot be resized is a -32602 error.
func Resize(h work.Host, id string, size acp.TerminalSize) error {
	t := h.Terminal(id)
	if err := work.Live(id, t); err != nil {
		return err
	}
	if err := size.Validate("size"); err != nil {
		return err
	}
	if err := t.Resize(size); err != nil {
		return acp.InvalidParams("terminalId: %s cannot be resized: %v", id, err)
	}
	return nil
}

// Send serves /send and /keys, on the session's actor: it types a.Data
// into terminal id and says in an agent message what it typed, or why it
// could not.
func Send(h work.Host, id string, a Args) {
	if err := Type(h, id, a.Data); err != nil {
		h.Say("Cannot type into " + id + ": " + errorMessage(err) + ".")
		return
	}
	h.Say("Typed " + a.What + " into " + id + ".")
}

// SetSize serves /resize, on the session's actor: it resizes terminal id
// to size and says so in an agent message, or why it could not.
func SetSize(h work.Host, id string, size acp.TerminalSize) {
	if err := Resize(h, id, size); err != nil {
		h.Say("Cannot resize " + id + ": " + errorMessage(err) + ".")
		return
	}
	h.Say(fmt.Sprintf("Resized %s to %d columns and %d rows.", id, size.Cols, size.Rows))
}
