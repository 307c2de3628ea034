package jsonrpcline

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"shellagent/acp"
)

// DefaultMaxLine is the largest message accepted, in bytes.
const DefaultMaxLine = 16 << 20

// keepLine is the largest line buffer kept between lines; a larger one is
// dropped after use so that one big message does not pin its memory.
const keepLine = 1 << 20

// ErrTooLong reports a line over the cap; the Reader skips it.
var ErrTooLong = errors.New("line too long")

// A Reader splits a byte stream into lines: the bytes before each '\n',
// without trailing '\r's (which do not count against the cap). A line
// over the cap is reported as soon as the cap is passed, then skipped up
// to its newline without being held in memory, so that a line that never
// ends is refused all the same.
type Reader struct {
	br   *bufio.Reader
	max  int
	line []byte
	skip bool // inside a refused line: drop up to its newline first
}

// NewReader returns a Reader of r that accepts lines of up to max bytes
// (DefaultMaxLine if max <= 0).
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxLine
	}
	return newReaderSize(r, max, 64<<10)
}

// newReaderSize is NewReader with a read buffer of size bytes and a cap
// taken as it is.
func newReaderSize(r io.Reader, max, size int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, size), max: max}
}

// Max returns the cap on a line, in bytes.
func (r *Reader) Max() int { return r.max }

// Line returns the next line, ErrTooLong for a line over the cap, or the
// read error (io.EOF at the end). A last line without a newline is
// returned before io.EOF. The line is valid until the next call.
func (r *Reader) Line() ([]byte, error) {
	if r.skip {
		if err := r.skipLine(); err != nil {
			return nil, err
		}
	}
	if cap(r.line) > keepLine {
		r.line = nil
	}
	r.line = r.line[:0]
	crs := 0 // trailing '\r's read but not appended: they may end the line
	read := false
	for {
		frag, err := r.br.ReadSlice('\n')
		read = read || len(frag) > 0
		ended := err == nil // frag ends with the newline
		content := bytes.TrimSuffix(frag, []byte("\n"))
		body := bytes.TrimRight(content, "\r")
		if len(body) > 0 {
			if len(r.line)+crs+len(body) > r.max {
				r.line, r.skip = r.line[:0], !ended
				return nil, ErrTooLong
			}
			r.grow(crs + len(body))
			for range crs {
				r.line = append(r.line, '\r')
			}
			r.line, crs = append(r.line, body...), 0
		}
		crs += len(content) - len(body)
		switch {
		case ended:
			return r.line, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF) && read:
			return r.line, nil // the last line, without a newline; the next call reports EOF
		default:
			return nil, err
		}
	}
}

// grow makes room for n more bytes in r.line, doubling its capacity up
// to the cap (append grows a large slice by a quarter at a time, which
// costs five times the line in allocations).
func (r *Reader) grow(n int) {
	if len(r.line)+n <= cap(r.line) {
		return
	}
	grown := make([]byte, len(r.line), min(max(2*cap(r.line), len(r.line)+n, 4<<10), r.max))
	copy(grown, r.line)
	r.line = grown
}

// skipLine drops the rest of a refused line, up to its newline.
func (r *Reader) skipLine() error {
	for {
		_, err := r.br.ReadSlice('\n')
		switch {
		case err == nil:
			r.skip = false
			return nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return err
		}
	}
}

// A Message is a non-blank line read by Next, checked as the agent checks
// it.
type Message struct {
	// Line is the line without surrounding white space, valid until the
	// next call of Next; nil for a line over the cap.
	Line []byte
	// Refusal is nil for a message the agent handles, else the complete
	// error response the agent answers the line with.
	Refusal []byte
	// Envelope is what Check found of the message.
	Envelope
}

// Next returns the next non-blank line as a Message. A line over the cap
// is skipped: its Line is nil and its Refusal says how long a line may
// be. At the end err is io.EOF.
func (r *Reader) Next() (Message, error) {
	for {
		line, err := r.Line()
		if errors.Is(err, ErrTooLong) {
			return Message{Refusal: ErrorResponse(nil, &acp.Error{Code: acp.CodeInvalidRequest, Message: fmt.Sprintf("message longer than %d bytes", r.max)})}, nil
		}
		if err != nil {
			return Message{}, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		env, refusal := Check(line)
		return Message{Line: line, Refusal: refusal, Envelope: env}, nil
	}
}
