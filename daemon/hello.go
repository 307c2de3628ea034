package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"shellagent/supervisor"
)

// RelayVersion is the version of what the daemon and its clients say to
// each other around ACP: the hello lines, and the Status and Stopped
// answers. A client and a daemon of different versions do not serve ACP
// to each other.
const RelayVersion = 1

// What a client can want of the daemon (Hello.Want).
const (
	WantACP    = "acp"    // an ACP connection (also when Want is empty)
	WantStatus = "status" // one Status line
	WantStop   = "stop"   // stop every session and the daemon; one Stopped line
)

// Hello is the first line each side of a connection writes.
type Hello struct {
	// Shellagent is the relay-protocol version (RelayVersion): the key
	// also tells a hello from an ACP message.
	Shellagent int    `json:"shellagent"`
	Build      string `json:"build"`
	Pid        int    `json:"pid"`
	Want       string `json:"want,omitempty"` // the client's; see WantACP
}

// Status is the daemon's answer to WantStatus.
type Status struct {
	Pid         int
	Build       string
	Socket      string
	Started     time.Time
	RSS         int64 // bytes of resident memory (VmRSS)
	Connections int   // ACP connections open
	Sessions    []supervisor.SessionStatus
}

// Stopped is the daemon's answer to WantStop, once every session has
// closed: what was open when the stop began.
type Stopped struct {
	Sessions []supervisor.SessionStatus
	Error    string `json:",omitempty"` // what did not stop in time, if anything
}

// maxHello bounds a hello line; a longer one is refused.
const maxHello = 4 << 10

// helloTimeout bounds how long either side waits for the other's hello.
const helloTimeout = 5 * time.Second

// writeLine writes v as one JSON line.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readHello reads a hello line from r, leaving what follows it in r.
func readHello(r *bufio.Reader) (Hello, error) {
	var h Hello
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return h, fmt.Errorf("hello: longer than %d bytes", r.Size())
	case errors.Is(err, io.EOF) && len(line) == 0:
		return h, io.EOF
	case err != nil:
		return h, fmt.Errorf("hello: %w", err)
	}
	if err := json.Unmarshal(line, &h); err != nil || h.Shellagent == 0 {
		return h, fmt.Errorf("hello: not a shellagent hello: %.80q", line)
	}
	return h, nil
}

// readLine reads one JSON line of the answer v from r.
func readLine(r *bufio.Reader, v any) error {
	line, err := r.ReadBytes('\n')
	if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
		return err
	}
	return json.Unmarshal(line, v)
}
