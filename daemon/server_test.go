package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/supervisor"
)

// TestServerClosesAStdoutItDoesNotServe: a descriptor sent along with a
// hello that is not served ACP to it (status, an unknown want, a client
// of another build, one whose hello says a stdin comes that does not) is
// closed by the daemon at once, unread and unwritten; it keeps none.
func TestServerClosesAStdoutItDoesNotServe(t *testing.T) {
	socket := serve(t, &Server{
		Supervisor: supervisor.New(supervisor.Config{}),
		Build:      "test",
		Log:        slog.New(slog.DiscardHandler),
	})

	tests := []struct {
		want, build   string
		stdout, stdin bool // what the hello says comes: the one descriptor sent is a stdin only if stdout is false
	}{
		{WantStatus, "test", true, false},
		{"bogus", "test", true, false},
		{WantACP, "other", true, false},
		{WantStatus, "test", false, true},
		{WantACP, "other", false, true},
		{WantACP, "other", true, true},
		{WantACP, "test", true, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/stdout=%v,stdin=%v", tt.want, tt.build, tt.stdout, tt.stdin), func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			nc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
			if err != nil {
				pw.Close()
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(30 * time.Second))
			line, _ := json.Marshal(Hello{Shellagent: RelayVersion, Build: tt.build, Pid: os.Getpid(), Want: tt.want, Stdout: tt.stdout, Stdin: tt.stdin})
			if !tt.stdout { // a stdin: the reading end goes
				defer pw.Close()
				_, _, err = nc.WriteMsgUnix(append(line, '\n'), unix.UnixRights(int(pr.Fd())), nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadAll(nc); err != nil {
					t.Fatal(err)
				}
				pr.Close() // the daemon's copy is the only reader left
				if n, err := pw.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
					t.Errorf("the passed stdin: wrote %d, %v; want EPIPE: the daemon still holds it", n, err)
				}
				return
			}
			_, _, err = nc.WriteMsgUnix(append(line, '\n'), unix.UnixRights(int(pw.Fd())), nil)
			pw.Close() // the daemon's copy is the only writer left
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadAll(nc); err != nil { // its hello, an answer or none, and its close
				t.Fatal(err)
			}
			pr.SetReadDeadline(time.Now().Add(30 * time.Second))
			if n, err := pr.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("the passed stdout: read %d, %v; want EOF: the daemon still holds it", n, err)
			}
		})
	}
}

// TestServerReadsAHandedStdin: a client that hands its stdin and stdout
// with its hello (Dial, as the relay does) has its requests read from
// the stdin and answered on the stdout, nothing on the socket. The
// connection ends, and its stdin and stdout are let go, when the stdin
// ends (the daemon then closes the socket), and when the socket does
// while the stdin's writer stays (a relay killed under a live editor).
func TestServerReadsAHandedStdin(t *testing.T) {
	socket := serve(t, &Server{
		Supervisor: supervisor.New(supervisor.Config{Detached: supervisor.KeepDetached}),
		Build:      "test",
		Log:        slog.New(slog.DiscardHandler),
	})
	hello := Hello{Shellagent: RelayVersion, Build: "test", Pid: os.Getpid()}

	for _, end := range []string{"stdin", "socket"} {
		t.Run(end, func(t *testing.T) {
			inR, inW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer inR.Close() // kept, as the relay keeps its stdin
			defer inW.Close()
			outR, outW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer outR.Close()
			c, err := Dial(socket, hello, Stdio{In: inR, Out: outW})
			outW.Close() // the daemon's copy is the only writer left
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !c.HandedStdin {
				t.Fatal("Dial did not hand the stdin, a pipe")
			}
			if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}`+"\n"); err != nil {
				t.Fatal(err)
			}
			outR.SetReadDeadline(time.Now().Add(30 * time.Second))
			r := bufio.NewReader(outR)
			if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, `{"id":1,"result":`) {
				t.Fatalf("the answer on the handed stdout: %q, %v", line, err)
			}
			c.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			switch end {
			case "stdin":
				inW.Close()
				if b, err := io.ReadAll(c.R); len(b) > 0 || err != nil {
					t.Errorf("the socket after the stdin's end: %q, %v; want its end, and nothing on it", b, err)
				}
			case "socket":
				c.Close()
			}
			if b, err := io.ReadAll(r); len(b) > 0 || err != nil {
				t.Errorf("the handed stdout after the %s's end: %q, %v; want its end: the daemon still holds it", end, b, err)
			}
			if end == "socket" {
				inR.Close() // the daemon's copy must be the only reader left, and gone
				if n, err := inW.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
					t.Errorf("the handed stdin after the socket's end: wrote %d, %v; want EPIPE: the daemon still holds it", n, err)
				}
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				st, err := AskStatus(socket, hello)
				if err != nil {
					t.Fatal(err)
				}
				if st.Connections == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("status after the %s's end counts %d connections, want 0", end, st.Connections)
				}
			}
		})
	}
}

// panicLog is a slog.Handler that panics on the message panicOn, as a bug
// in serving a connection would, and keeps the other messages.
type panicLog struct {
	panicOn string
	mu      *sync.Mutex
	msgs    *[]string
}

func (panicLog) Enabled(context.Context, slog.Level) bool { return true }

func (h panicLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.panicOn {
		panic("test: a bug at " + h.panicOn)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.msgs = append(*h.msgs, r.Message)
	return nil
}

func (h panicLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h panicLog) WithGroup(string) slog.Handler      { return h }

// TestServerDropsAConnectionWhoseServingPanics: a panic on a connection's
// goroutine (here, in the log line that opens an ACP connection) drops
// that connection only: the client sees it closed, the panic is logged,
// the connection is forgotten (Status counts none), and the daemon goes
// on serving. Before the recover, the panic ended the daemon and every
// session with it (issue 22).
func TestServerDropsAConnectionWhoseServingPanics(t *testing.T) {
	var mu sync.Mutex
	var msgs []string
	socket := serve(t, &Server{
		Supervisor: supervisor.New(supervisor.Config{Detached: supervisor.KeepDetached}),
		Build:      "test",
		Log:        slog.New(panicLog{panicOn: "connected", mu: &mu, msgs: &msgs}),
	})

	hello := Hello{Shellagent: RelayVersion, Build: "test", Pid: os.Getpid()}
	c, err := Dial(socket, hello, Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if b, err := io.ReadAll(c.R); len(b) > 0 || err != nil {
		t.Errorf("the dropped connection read %q, %v; want its end", b, err)
	}
	// The connection is forgotten just after it is closed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := AskStatus(socket, hello)
		if err != nil {
			t.Fatalf("status after the panic: %v", err)
		}
		if st.Connections == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after the panic counts %d connections, want 0", st.Connections)
		}
	}
	// Logged by the recover, which runs after serveACP's own deferred
	// closes: the client may see the end first.
	logged := func() (bool, []string) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(msgs, "dropped a connection: serving it panicked"), slices.Clone(msgs)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok, log := logged()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the panic was not logged; the log: %q", log)
		}
	}
}

// serve runs srv on a socket of its own, in a short directory (a unix
// socket's path is short) that the test's end removes, until the test
// ends; Serve must then return context.Canceled. It returns the socket's
// path.
func serve(t *testing.T, srv *Server) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv.Socket = filepath.Join(dir, "s", "d.sock")
	l, err := Listen(srv.Socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v, want context.Canceled", err)
		}
	})
	return srv.Socket
}

// TestServerHoldsFewDescriptorsOfAHello: a hello comes with at most two
// descriptors (the client's stdout and stdin). A peer that sends its
// hello a byte at a time, each byte with descriptors, is refused as soon
// as more come: before, the daemon kept every one of them until the
// hello ended or timed out (4 per byte, 16,000 for one connection's
// 4 KiB), and a few such peers used up its descriptors, so that it could
// accept no connection and start no command.
func TestServerHoldsFewDescriptorsOfAHello(t *testing.T) {
	socket := serve(t, &Server{
		Supervisor: supervisor.New(supervisor.Config{}),
		Build:      "test",
		Log:        slog.New(slog.DiscardHandler),
	})
	open := func() int {
		e, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(e)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	nc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := bufio.NewReader(nc).ReadString('\n'); err != nil { // the daemon's hello
		t.Fatal(err)
	}
	before := open()
	rights := unix.UnixRights(int(pr.Fd()), int(pr.Fd()), int(pr.Fd()), int(pr.Fd()))
	for range 200 {
		if _, _, err := nc.WriteMsgUnix([]byte("{"), rights, nil); err != nil {
			break // refused and closed already
		}
	}
	deadline := time.Now().Add(time.Second)
	for open() > before+8 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := open() - before; n > 8 {
		t.Errorf("the daemon holds %d more descriptors while a hello comes in pieces", n)
	}
}

// TestServerHoldsAConnectionWhileFrozen: a relay that connects while an
// upgrade in place hands the daemon over (frozen) waits for the end of
// the upgrade before any hello; an upgrade that then fails leaves the
// daemon as it was, and the connection is served ACP. (If the new image
// takes over, the connection closes at the exec, before any hello, and
// the relay dials the new image: Connect.) Before, it had its hello at
// once and was then closed, and the relay gave up.
func TestServerHoldsAConnectionWhileFrozen(t *testing.T) {
	srv := &Server{
		Supervisor: supervisor.New(supervisor.Config{}),
		Build:      "test",
		Log:        slog.New(slog.DiscardHandler),
	}
	socket := serve(t, srv)
	srv.mu.Lock()
	srv.frozen, srv.thawed = true, make(chan struct{})
	srv.mu.Unlock()

	type dialled struct {
		c   *Client
		err error
	}
	got := make(chan dialled, 1)
	go func() {
		c, err := Dial(socket, Hello{Shellagent: RelayVersion, Build: "test", Pid: os.Getpid()}, Stdio{})
		got <- dialled{c, err}
	}()
	select {
	case d := <-got:
		if d.c != nil {
			d.c.Close()
		}
		t.Fatalf("a connection made while frozen was answered before the upgrade ended (%v)", d.err)
	case <-time.After(300 * time.Millisecond):
	}

	srv.mu.Lock() // the upgrade failed: as its deferred end does
	close(srv.thawed)
	srv.frozen = false
	srv.mu.Unlock()
	d := <-got
	if d.err != nil {
		t.Fatalf("dial after the thaw: %v", d.err)
	}
	defer d.c.Close()
	if _, err := io.WriteString(d.c.Conn, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	d.c.Conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if line, err := d.c.R.ReadString('\n'); err != nil || !strings.HasPrefix(line, `{"id":1,"result":`) {
		t.Fatalf("the connection made while frozen, after the thaw: %q, %v; want it served", line, err)
	}
}
