package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// DefaultMaxLine is the largest message accepted, in bytes.
const DefaultMaxLine = 16 << 20

// keepLine is the largest line buffer kept between messages; a larger one
// is dropped after use so that one big message does not pin its memory.
const keepLine = 1 << 20

var errTooLong = errors.New("line too long")

// lineReader splits a byte stream into lines of at most max bytes. A longer
// line is skipped without being held in memory.
type lineReader struct {
	br   *bufio.Reader
	max  int
	line []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its end-of-line bytes. It returns
// errTooLong after skipping a line over the cap, and io.EOF at the end.
func (r *lineReader) next() ([]byte, error) {
	if cap(r.line) > keepLine {
		r.line = nil
	}
	r.line = r.line[:0]
	tooLong := false
	for {
		frag, err := r.br.ReadSlice('\n')
		if !tooLong && len(r.line)+len(bytes.TrimRight(frag, "\r\n")) > r.max {
			tooLong, r.line = true, r.line[:0]
		}
		if !tooLong {
			r.line = append(r.line, frag...)
		}
		switch {
		case err == nil:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && (len(r.line) > 0 || tooLong):
			// A last line without a newline; the next call reports EOF.
		default:
			return nil, err
		}
		if tooLong {
			return nil, errTooLong
		}
		return bytes.TrimRight(r.line, "\r\n"), nil
	}
}

// objectStream is the jsonrpc2.ObjectStream of a connection: it reads one
// message per line and writes through the connection's Writer. A line that
// is not a valid JSON-RPC message is answered here, and reading goes on.
type objectStream struct {
	lines *lineReader
	w     *writer
	ready <-chan struct{} // closed when the connection is set up
}

// ReadObject decodes the next valid message into v.
func (s *objectStream) ReadObject(v any) error {
	<-s.ready
	for {
		line, err := s.lines.next()
		if errors.Is(err, errTooLong) {
			s.w.send(errorResponse(nil, CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes", s.lines.max)))
			continue
		}
		if err != nil {
			return err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if resp := checkMessage(line); resp != nil {
			s.w.send(resp)
			continue
		}
		if err := json.Unmarshal(line, v); err != nil {
			s.w.send(errorResponse(envelopeID(line), CodeInvalidRequest, "invalid request: "+err.Error()))
			continue
		}
		return nil
	}
}

// WriteObject queues a message; it never blocks on the peer.
func (s *objectStream) WriteObject(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.w.send(b)
	return nil
}

// Close does nothing: the input belongs to whoever gave it to NewConn (a
// blocked read of stdin cannot be interrupted anyway), and the writer is
// closed by Conn.Close once the agent has said everything.
func (s *objectStream) Close() error { return nil }

type envelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// checkMessage returns the error response for a line that is not a JSON-RPC
// 2.0 message shellagent accepts, or nil.
func checkMessage(line []byte) []byte {
	if !json.Valid(line) {
		return errorResponse(nil, CodeParseError, "parse error: not valid JSON")
	}
	switch line[0] {
	case '{':
	case '[':
		return errorResponse(nil, CodeInvalidRequest, "batch requests are not supported")
	default:
		return errorResponse(nil, CodeInvalidRequest, "a message must be a JSON object")
	}
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		return errorResponse(nil, CodeInvalidRequest, "invalid request: "+err.Error())
	}
	id := validID(env.ID)
	if env.ID != nil && id == nil {
		return errorResponse(nil, CodeInvalidRequest, "id: must be a string or a non-negative integer")
	}
	if env.JSONRPC == nil || *env.JSONRPC != "2.0" {
		return errorResponse(id, CodeInvalidRequest, `jsonrpc: must be "2.0"`)
	}
	if env.Method == nil && env.Result == nil && env.Error == nil {
		return errorResponse(id, CodeInvalidRequest, "method: required")
	}
	return nil
}

// validID returns raw if it is an id jsonrpc2 can carry back unchanged: a
// string or an integer in [0, 2^63).
func validID(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	switch raw[0] {
	case '"':
		return raw
	case 'n', 't', 'f', '{', '[', '-':
		return nil
	}
	if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil {
		return nil
	}
	return raw
}

func envelopeID(line []byte) json.RawMessage {
	var env envelope
	if json.Unmarshal(line, &env) != nil {
		return nil
	}
	return validID(env.ID)
}

// errorResponse returns a complete error response; a nil id is sent as null.
func errorResponse(id json.RawMessage, code int64, msg string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	return b
}
