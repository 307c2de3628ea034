package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"shellagent/acp"
)

// A MessageReader reads a newline-delimited JSON-RPC stream as the
// agent's connection reads it: one message per line, blank lines skipped,
// a line over the size cap skipped without being held in memory. It tells
// each line the agent refuses (see Next) from a message the agent handles,
// so that a program that stands in for the agent (shellagent replay)
// answers bad input exactly as the agent does.
type MessageReader struct {
	lines *lineReader
}

// NewMessageReader returns a MessageReader of r that accepts lines of up
// to max bytes (DefaultMaxLine if max <= 0).
func NewMessageReader(r io.Reader, max int) *MessageReader {
	if max <= 0 {
		max = DefaultMaxLine
	}
	return &MessageReader{lines: newLineReader(r, max)}
}

// Next returns the next non-blank line, without surrounding white space,
// and refusal: nil for a message the agent handles, else the complete
// error response the agent answers the line with (not JSON: -32700; a
// batch, not an object, a bad jsonrpc, id or method: -32600). A line
// over the cap is skipped: line is nil and refusal says how long a line
// may be. The line is valid until the next call. At the end err is
// io.EOF.
func (r *MessageReader) Next() (line, refusal []byte, err error) {
	for {
		line, err := r.lines.next()
		if errors.Is(err, errTooLong) {
			return nil, errorResponse(nil, acp.CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes", r.lines.max)), nil
		}
		if err != nil {
			return nil, nil, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		return line, checkMessage(line), nil
	}
}
