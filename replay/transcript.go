package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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

// Read reads a transcript in the golden format, as shellagent client
// --trace writes it and testdata/transcripts holds it: one JSON object a
// line, {"client":MSG} or {"agent":MSG}, where MSG is the message as it
// was sent, or a JSON string holding the text of a line that was not JSON.
// Other members (the golden transcripts' "text" of output chunks) are
// ignored; so are blank lines. An error names the line.
func Read(r io.Reader) (*Transcript, error) {
	br := bufio.NewReader(r)
	t := &Transcript{}
	for num := 1; ; num++ {
		text, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(text)) > 0 {
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
