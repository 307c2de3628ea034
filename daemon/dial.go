package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/peercred"
)

// StartTimeout is how long Connect waits for a daemon it started to
// answer.
const StartTimeout = 5 * time.Second

// ErrNotRunning is what Dial returns, wrapping the connect error, when no
// daemon listens at the socket: no socket file (ENOENT), or one that
// refuses connections (ECONNREFUSED), which a dead daemon leaves.
var ErrNotRunning = errors.New("no daemon is running")

// ErrNoHello is what Dial returns, wrapped, when the daemon closed the
// connection before its hello: a daemon that stops (--idle-exit, daemon
// stop) closes what it had not accepted yet, the peer check closes a
// connection at once, and an upgrade in place closes at its exec what
// came during its hand-over (the new image answers the next dial).
var ErrNoHello = errors.New("no hello")

// errLive is what startOnce returns, wrapped, when it started nothing
// because a daemon lives for the socket (its claim is held) whose socket
// file was removed.
var errLive = errors.New("a daemon lives")

// removeStale removes the socket file at socket, a dead daemon's: only a
// socket, never another kind of file.
func removeStale(socket string) error {
	d, err := openDir(filepath.Dir(socket), false)
	if err != nil {
		return err
	}
	defer d.close()
	if err := d.removeSocket(filepath.Base(socket), fileID{}); err != nil {
		return fmt.Errorf("remove the stale socket: %w", err)
	}
	return nil
}

// A Client is a connection to the daemon, past the hellos.
type Client struct {
	Conn *net.UnixConn
	// R reads what the daemon sends after its hello.
	R *bufio.Reader
	// Daemon is the daemon's hello.
	Daemon Hello
	// HandedStdin says that the client's stdin went along with the hello
	// (Hello.Stdin): a daemon that serves the connection reads the
	// requests from it, and the caller must neither read it nor write
	// anything to Conn. A daemon of the caller's own build always
	// serves it so; one of another build serves no ACP at all, and
	// closes its copy unread.
	HandedStdin bool
}

// Stdio is what a client may hand the daemon along with an ACP hello
// (SCM_RIGHTS): its stdout, to which the daemon then writes the
// connection's output (Hello.Stdout), and its stdin, from which the
// daemon then reads the requests (Hello.Stdin). Either is handed only if
// it is a pipe or a socket; nil, or anything else (a terminal, a file),
// stays with the client, and that direction goes on the connection.
type Stdio struct {
	In, Out *os.File
}

// Dial connects to the daemon at socket, writes hello, and reads the
// daemon's. The socket's directory is checked first (CheckDir), and
// connected through (socketDir); a file at socket that is not a socket is
// an error that says what it is (not ErrNotRunning). If stdio.Out
// is a pipe or a socket, it is passed along with an ACP hello
// (Hello.Stdout): the daemon then writes the connection's output to it,
// and the caller must write nothing to it while the connection lasts.
// Any other stdout (a terminal, a file; nil) is not passed, and the output
// comes on the connection. So is stdio.In (Hello.Stdin, Client.HandedStdin):
// the daemon then reads the requests from it, and the caller must not
// read it. A pipe is passed as an open file of its own
// where the OS allows (OwnPipe), so that the daemon's O_NONBLOCK is not
// set on the caller's.
//
// A daemon that takes the connection but sends no hello within 5 s (one
// out of file descriptors leaves it in its listener's queue unaccepted;
// a hung one never answers) is a *NoAnswerError.
func Dial(socket string, hello Hello, stdio Stdio) (*Client, error) {
	return dialWithin(socket, hello, stdio, helloTimeout)
}

// A NoAnswerError is a Dial whose connection the daemon took (the
// kernel queues it for the daemon's accept) but did not answer with its
// hello in time: it is out of file descriptors, so that it accepts
// nothing, or hung. Its text says what was waited for, how long, and
// where to look.
type NoAnswerError struct {
	Socket string
	PID    int           // the daemon's, as the socket tells (0: unknown)
	Waited time.Duration // how long Dial waited for its hello
	// Log is where the daemon's log is, if the caller knows it (a
	// relay: the file it starts a daemon with); "" says "its log".
	Log string
	Err error // the timeout
}

func (e *NoAnswerError) Error() string {
	pid, log := "", "its log"
	if e.PID > 0 {
		pid = fmt.Sprintf(" (pid %d)", e.PID)
	}
	if e.Log != "" {
		log = e.Log
	}
	return fmt.Sprintf("the daemon at %s%s did not answer within %v (it may be out of file descriptors or hung: see %s)", e.Socket, pid, e.Waited, log)
}

func (e *NoAnswerError) Unwrap() error { return e.Err }

// noAnswer returns err, of the hello's exchange on nc, as a
// *NoAnswerError if it is the deadline's, set within.
func noAnswer(socket string, nc *net.UnixConn, within time.Duration, err error) (*NoAnswerError, bool) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, false
	}
	e := &NoAnswerError{Socket: socket, Waited: within, Err: err}
	if cred, cerr := peercred.Peer(nc); cerr == nil {
		e.PID = cred.PID
	}
	return e, true
}

// dialWithin is Dial, waiting at most within for the hellos.
func dialWithin(socket string, hello Hello, stdio Stdio, within time.Duration) (*Client, error) {
	d, err := openDir(filepath.Dir(socket), false)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s", ErrNotRunning, socket)
		}
		return nil, err
	}
	defer d.close()
	base := filepath.Base(socket)
	if err := d.checkSocketFile(base); err != nil {
		return nil, err
	}
	nc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: d.name(base), Net: "unix"})
	if err != nil {
		err = errno(err)
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w at %s: %w", ErrNotRunning, socket, err)
		}
		return nil, fmt.Errorf("connect to %s: %w", socket, err)
	}
	nc.SetDeadline(time.Now().Add(within)) // Best effort: without it a hung daemon hangs the client.
	handed, err := writeHello(nc, hello, stdio)
	if err != nil {
		defer nc.Close() // Best effort: failed anyway.
		if e, ok := noAnswer(socket, nc, within, err); ok {
			return nil, e
		}
		return nil, fmt.Errorf("hello to the daemon at %s: %w", socket, err)
	}
	r := bufio.NewReader(nc)
	daemon, err := readHello(r)
	if err != nil {
		defer nc.Close() // Best effort: failed anyway.
		if e, ok := noAnswer(socket, nc, within, err); ok {
			return nil, e
		}
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return nil, fmt.Errorf("%w: the daemon at %s closed the connection before its hello: it refuses this user, or is stopping (see its log)", ErrNoHello, socket)
		}
		return nil, fmt.Errorf("the daemon at %s: %w", socket, err)
	}
	nc.SetDeadline(time.Time{}) // Best effort: as above.
	return &Client{Conn: nc, R: r, Daemon: daemon, HandedStdin: handed.Stdin}, nil
}

// writeHello writes the client's hello, with stdout and stdin, in that
// order, where they can be passed; it returns the hello written.
func writeHello(nc *net.UnixConn, hello Hello, stdio Stdio) (Hello, error) {
	if hello.Want != "" && hello.Want != WantACP {
		return hello, writeLine(nc, hello)
	}
	var fds []int
	for _, h := range []struct {
		f    *os.File
		mode int
		said *bool
	}{
		{stdio.Out, unix.O_WRONLY, &hello.Stdout},
		{stdio.In, unix.O_RDONLY, &hello.Stdin},
	} {
		if h.f == nil || !passable(h.f) {
			continue
		}
		fd := descriptor(h.f)
		if own := OwnPipe(h.f, h.mode); own != nil {
			defer own.Close() // Best effort: the daemon has its copy once sent.
			fd = descriptor(own)
		}
		if fd >= 0 {
			fds, *h.said = append(fds, fd), true
		}
	}
	if len(fds) == 0 {
		return hello, writeLine(nc, hello)
	}
	line, err := json.Marshal(hello)
	if err != nil {
		return hello, err
	}
	_, _, err = nc.WriteMsgUnix(append(line, '\n'), unix.UnixRights(fds...), nil)
	return hello, err
}

// descriptor returns f's descriptor, or -1, without taking f out of the
// runtime poller, as f.Fd would: that makes a non-blocking f blocking,
// for everyone who shares its open file.
func descriptor(f *os.File) int {
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(d uintptr) { fd = int(d) }) // Best effort: -1 passes nothing.
	}
	return fd
}

// passable reports whether f is a pipe or a socket: a descriptor whose
// open file the process has to itself, unlike a terminal's.
func passable(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode().Type()&(os.ModeNamedPipe|os.ModeSocket) != 0
}

// Close closes the connection.
func (c *Client) Close() error { return c.Conn.Close() }

// rebindWait bounds how long DialLive waits for a daemon to bind its
// removed socket again: Socket.Keep looks every keepEvery.
const rebindWait = 4 * keepEvery

// DialLive dials as Dial does, with no stdout, for a client that starts
// no daemon; where no socket answers but a daemon holds the socket's
// claim (one whose socket file was removed, and which binds it again),
// or the daemon closed the connection before its hello (an upgrade in
// place closes what waits for it at its exec: awaitThaw; a daemon that
// has just died resets what its listener still queued), it dials again
// for up to rebindWait.
func DialLive(socket string, hello Hello) (*Client, error) {
	deadline := time.Now().Add(rebindWait)
	for {
		c, err := Dial(socket, hello, Stdio{})
		switch {
		case err == nil || time.Now().After(deadline):
			return c, err
		case errors.Is(err, ErrNoHello):
		case !errors.Is(err, ErrNotRunning):
			return c, err
		default:
			if _, ok := claimant(socket); !ok {
				return c, err
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// AskStatus asks the daemon at socket for its Status.
func AskStatus(socket string, hello Hello) (Status, error) {
	var st Status
	hello.Want = WantStatus
	c, err := DialLive(socket, hello)
	if err != nil {
		return st, err
	}
	defer c.Close()
	c.Conn.SetReadDeadline(time.Now().Add(helloTimeout)) // Best effort: as in Dial.
	if err := readLine(c.R, &st); err != nil {
		return st, fmt.Errorf("status of the daemon at %s: %w", socket, err)
	}
	return st, nil
}

// AskStop asks the daemon at socket to close every session and exit. It
// returns what was stopped, once every session has closed, and the
// daemon's hello: wait for its Pid to be gone to know the daemon has
// exited.
func AskStop(socket string, hello Hello) (Stopped, Hello, error) {
	var st Stopped
	hello.Want = WantStop
	c, err := DialLive(socket, hello)
	if err != nil {
		return st, Hello{}, err
	}
	defer c.Close()
	if err := readLine(c.R, &st); err != nil {
		return st, c.Daemon, fmt.Errorf("stop the daemon at %s: %w", socket, err)
	}
	return st, c.Daemon, nil
}

// Connect dials the daemon at socket as Dial does (with stdio), starting one if none
// is running, as tmux's client does: on ErrNotRunning it takes the
// socket's lock without waiting, dials again, removes a socket that
// refused the connection (its daemon is dead: a live one holds the lock),
// and calls start, which starts the daemon and hands it the lock
// (Lock.HandOver) and returns a channel that delivers the daemon
// process's end. Then it dials until the daemon answers, at most
// StartTimeout, or the daemon exits. A Connect that finds the lock held
// starts nothing: it dials until the daemon that holder starts answers;
// so does a Connect that finds the socket's claim held (a daemon lives
// whose socket file was removed: it binds it again, Socket.Keep). A
// daemon that closes the connection before its hello (one that is
// stopping) is dialled again until the deadline. Only a socket is ever
// removed, never another kind of file at socket.
func Connect(socket string, hello Hello, stdio Stdio, start func(*Lock) (exited <-chan error, err error)) (*Client, error) {
	if err := PrepareDir(socket); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(StartTimeout)
	var exited <-chan error // the end of the daemon this Connect started
	var live error          // why none was started: a daemon lives (errLive)
	for {
		c, err := Dial(socket, hello, stdio)
		switch {
		case errors.Is(err, ErrNoHello) && time.Now().Before(deadline):
			// A daemon on its way out: its successor answers soon.
			time.Sleep(20 * time.Millisecond)
			continue
		case !errors.Is(err, ErrNotRunning):
			return c, err
		}
		if exited == nil {
			exited, err = startOnce(socket, hello, start)
			switch {
			case errors.Is(err, errLive):
				live = err
			case err != nil:
				return nil, err
			case exited != nil:
				deadline = time.Now().Add(StartTimeout)
			}
		}
		if time.Now().After(deadline) {
			switch {
			case live != nil:
				return nil, fmt.Errorf("%v, but did not answer within %v", live, StartTimeout)
			case exited == nil:
				return nil, fmt.Errorf("no daemon answered at %s within %v, and %s is held: a daemon is starting or stopping", socket, StartTimeout, lockPath(socket))
			}
			return nil, fmt.Errorf("the daemon started for %s did not answer within %v", socket, StartTimeout)
		}
		select {
		case err := <-exited: // a nil channel never delivers
			return nil, fmt.Errorf("the daemon started for %s exited before it answered: %v", socket, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// startOnce starts a daemon under the socket's lock, as Connect says, and
// returns the started daemon's end. It returns neither a channel nor an
// error when it started nothing: the lock is held (another client or
// daemon is starting, or a daemon is stopping) or a daemon answered after
// all; Connect's next Dial tells. It returns errLive, wrapped, when a
// daemon lives that holds the socket's claim (claimant) although no
// socket file answers: that daemon binds its removed socket again.
func startOnce(socket string, hello Hello, start func(*Lock) (<-chan error, error)) (<-chan error, error) {
	lock, ok, err := TryLock(socket)
	if err != nil || !ok {
		return nil, err
	}
	defer lock.Close() // Best effort: the daemon holds it on.
	c, err := Dial(socket, hello, Stdio{})
	switch {
	case err == nil:
		c.Close() // Best effort: Connect dials it again.
		return nil, nil
	case !errors.Is(err, ErrNotRunning):
		return nil, err
	}
	if pid, ok := claimant(socket); ok {
		// A daemon whose socket file was removed: it binds it again.
		return nil, fmt.Errorf("%w: the daemon (pid %d) that serves %s binds its removed socket again", errLive, pid, socket)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		if err := removeStale(socket); err != nil {
			return nil, err
		}
	}
	exited, err := start(lock)
	if err != nil {
		return nil, fmt.Errorf("start the daemon: %w", err)
	}
	return exited, nil
}
