package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"

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
	// WantUpgrade: upgrade in place to the binary Hello.Exe; one
	// Upgraded line, from the new image or, on failure, the old one.
	WantUpgrade = "upgrade"
)

// Hello is the first line each side of a connection writes.
type Hello struct {
	// Shellagent is the relay-protocol version (RelayVersion): the key
	// also tells a hello from an ACP message.
	Shellagent int    `json:"shellagent"`
	Build      string `json:"build"`
	Pid        int    `json:"pid"`
	Want       string `json:"want,omitempty"` // the client's; see WantACP
	// Stdout, in a client's hello: the client's stdout, a pipe or a
	// socket, travels with the hello line (SCM_RIGHTS), and the daemon
	// writes the connection's ACP output to it directly, with nothing on
	// the socket; without it, the output goes on the socket.
	Stdout bool `json:"stdout,omitempty"`
	// Stdin, in a client's ACP hello: the client's stdin, a pipe or a
	// socket, travels with the hello line too (after stdout, if that
	// does), and the daemon reads the connection's requests from it
	// directly; the client then writes nothing more on the socket, and
	// the connection ends when the socket does (the client gone) or the
	// stdin does. Without it, the requests come on the socket.
	Stdin bool `json:"stdin,omitempty"`
	// Exe, in a client's WantUpgrade hello: the absolute path of the
	// binary to upgrade to.
	Exe string `json:"exe,omitempty"`
	// Grace, in the daemon's hello: its longest kill grace in use, in
	// milliseconds, which bounds how long an upgrade waits for closing
	// sessions before its probe (AskUpgrade waits that much longer).
	Grace int64 `json:"grace,omitempty"`
}

// Status is the daemon's answer to WantStatus.
type Status struct {
	Pid         int
	Build       string
	Socket      string
	Started     time.Time
	RSS         int64 // bytes of resident memory (VmRSS)
	Connections int   // ACP connections open
	Procs       int   // processors Go code runs on (GOMAXPROCS); 0 from a daemon that does not say
	CPUs        int   // processors the daemon may use (runtime.NumCPU)
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
//
// A variable only so that the tests can give it testloop.Bound for a
// loaded machine.
var helloTimeout = 5 * time.Second

// writeLine writes v as one JSON line.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readHello reads a hello line from r, leaving what follows it in r. It
// is the client's side of the handshake (Dial): a panic while it reads is
// returned as an error, with its stack, and the caller drops the
// connection.
func readHello(r *bufio.Reader) (h Hello, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("hello: reading it panicked: %v\n%s", p, debug.Stack())
		}
	}()
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return Hello{}, fmt.Errorf("hello: longer than %d bytes", r.Size())
	case errors.Is(err, io.EOF) && len(line) == 0:
		return Hello{}, io.EOF
	case err != nil:
		return Hello{}, fmt.Errorf("hello: %w", err)
	}
	return parseHello(line)
}

func parseHello(line []byte) (Hello, error) {
	var h Hello
	if err := json.Unmarshal(line, &h); err != nil || h.Shellagent == 0 {
		return h, fmt.Errorf("hello: not a shellagent hello: %.80q", line)
	}
	return h, nil
}

// maxHelloFDs is the most descriptors a hello comes with: the client's
// stdout and stdin (Dial). A hello that brings more is refused as soon
// as they come.
const maxHelloFDs = 2

// readClientHello reads the client's hello line from nc, with the
// descriptors sent along with it (close-on-exec, as net receives them),
// and returns a reader of what follows the line. On an error no
// descriptor is left open.
func readClientHello(nc *net.UnixConn) (h Hello, fds []int, rest io.Reader, err error) {
	defer func() {
		if err != nil {
			closeAll(fds)
			fds = nil
		}
	}()
	buf := make([]byte, 0, maxHello)
	oob := make([]byte, unix.CmsgSpace(4*4)) // room for a few: extra ones are closed
	for {
		if len(buf) == cap(buf) {
			return h, fds, nil, fmt.Errorf("hello: longer than %d bytes", maxHello)
		}
		// The error first: on a failed recvmsg (a reset) n is -1, and
		// neither n nor oobn may be used.
		n, oobn, _, _, rerr := nc.ReadMsgUnix(buf[len(buf):cap(buf)], oob)
		switch {
		case errors.Is(rerr, io.EOF) && len(buf) == 0:
			return h, fds, nil, io.EOF
		case rerr != nil:
			return h, fds, nil, fmt.Errorf("hello: %w", rerr)
		case n < 0 || n > cap(buf)-len(buf) || oobn < 0 || oobn > len(oob):
			return h, fds, nil, fmt.Errorf("hello: a read returned %d bytes and %d of control data into %d and %d", n, oobn, cap(buf)-len(buf), len(oob))
		}
		fds = append(fds, rights(oob[:oobn])...)
		if len(fds) > maxHelloFDs {
			// Not a client of ours: each piece of a hello could bring
			// more, held until the hello ends or times out.
			return h, fds, nil, fmt.Errorf("hello: more than %d descriptors came with it", maxHelloFDs)
		}
		buf = buf[:len(buf)+n]
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			h, err = parseHello(buf[:i+1])
			return h, fds, io.MultiReader(bytes.NewReader(buf[i+1:]), nc), err
		}
	}
}

// rights returns the descriptors that the control messages oob carry.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd) // Best effort: received, never used.
	}
}

// maxAnswer bounds the daemon's answer to status or stop, which lists
// its sessions: a longer one is refused, not held. A variable for the
// tests.
var maxAnswer = 16 << 20

// readLine reads one JSON line of the answer v from r, of at most
// maxAnswer bytes.
func readLine(r *bufio.Reader, v any) error {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxAnswer {
			return fmt.Errorf("answer longer than %d bytes", maxAnswer)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return err
		}
		return json.Unmarshal(line, v)
	}
}
