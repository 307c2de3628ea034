package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"shellagent/internal/jsonrpcline"
)

// Side is who sent a line of a transcript.
type Side int

const (
	Client Side = iota // a line the client sent
	Agent              // a line the agent sent
)

func (s Side) String() string {
	if s == Client {
		return "client"
	}
	return "agent"
}

// A Line is one message of a transcript.
type Line struct {
	Num  int  // its line number in the file, from 1
	From Side // who sent it
	// Msg is the message as it was sent: JSON text, or the text of a line
	// that was not JSON.
	Msg []byte
}

// A Transcript is a recorded exchange between a client and an agent, in
// the order it happened.
type Transcript struct {
	Lines []Line
}

// ReadFile reads the transcript in the file at path; see Read.
func ReadFile(path string) (*Transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // Best effort: read-only.
	t, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return t, nil
}

// Limits of a transcript, so that replay holds a bounded amount of it
// (a FILE of /dev/zero grew to a gigabyte in 6 s, one line of 100 MB
// took 753 MB).
const (
	// MaxLine is the longest line: twice the agent's cap on a message
	// (jsonrpcline.DefaultMaxLine), room for the {"client":…} around it and
	// for the escapes of a line that was not JSON.
	MaxLine = 2 * jsonrpcline.DefaultMaxLine
	// MaxSize is the most bytes a transcript holds.
	MaxSize = 64 << 20
	// MaxLines is the most lines a transcript holds, blank ones included.
	MaxLines = 1 << 20
)

// Read reads a transcript in the golden format, as shellagent client
// --trace writes it and testdata/transcripts holds it: one JSON object a
// line, {"client":MSG} or {"agent":MSG}, where MSG is the message as it
// was sent, or a JSON string holding the text of a line that was not JSON.
// Other members (the golden transcripts' "text" of output chunks) are
// ignored; so are blank lines. An error names the line. A line over
// MaxLine, a transcript over MaxSize or MaxLines is refused after at most
// that much has been read.
func Read(r io.Reader) (*Transcript, error) {
	return read(r, limits{line: MaxLine, size: MaxSize, lines: MaxLines})
}

// limits are a transcript's: MaxLine, MaxSize and MaxLines, lower in
// tests.
type limits struct{ line, size, lines int }

// read is Read within lim.
func read(r io.Reader, lim limits) (*Transcript, error) {
	lr := &lineReader{br: bufio.NewReader(r), lim: lim}
	t := &Transcript{}
	for num := 1; ; num++ {
		if num > lim.lines {
			return nil, fmt.Errorf("%d: more than %d lines: a transcript holds at most %d", num, lim.lines, lim.lines)
		}
		text, err := lr.next()
		if err == nil && len(bytes.TrimSpace(text)) > 0 {
			line, perr := parseLine(text)
			if perr != nil {
				return nil, fmt.Errorf("%d: %w", num, perr)
			}
			line.Num = num
			t.Lines = append(t.Lines, line)
		}
		if errors.Is(err, io.EOF) {
			return t, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%d: %w", num, err)
		}
	}
}

// lineReader reads the lines of a transcript within its limits.
type lineReader struct {
	br   *bufio.Reader
	lim  limits
	line []byte
	read int // bytes read so far
}

// next returns the next line, which is valid until the next call, or
// io.EOF at the end.
func (r *lineReader) next() ([]byte, error) {
	r.line = r.line[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		if r.read += len(frag); r.read > r.lim.size {
			return nil, fmt.Errorf("more than %d bytes: a transcript holds at most %d", r.lim.size, r.lim.size)
		}
		if len(r.line)+len(frag) > r.lim.line+1 { // and its newline
			return nil, fmt.Errorf("a line longer than %d bytes, twice what the agent accepts", r.lim.line)
		}
		r.line = append(r.line, frag...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(r.line) > 0:
			return r.line, nil // the last line, without a newline; the next call reports EOF
		case err != nil:
			return nil, err
		}
		return r.line, nil
	}
}

var errLineForm = errors.New(`want {"client":MSG} or {"agent":MSG}`)

// parseLine parses one line of a transcript.
func parseLine(text []byte) (Line, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(text, &obj); err != nil {
		return Line{}, fmt.Errorf("%w: %v", errLineForm, err)
	}
	client, isClient := obj["client"]
	agent, isAgent := obj["agent"]
	if isClient == isAgent {
		return Line{}, errLineForm
	}
	l := Line{From: Client, Msg: client}
	if isAgent {
		l = Line{From: Agent, Msg: agent}
	}
	if l.Msg[0] == '"' {
		// A string is the text of a line that was not JSON; one that is
		// JSON was a JSON string sent as it is.
		var s string
		if err := json.Unmarshal(l.Msg, &s); err == nil && !json.Valid([]byte(s)) {
			l.Msg = []byte(s)
		}
	}
	return l, nil
}
