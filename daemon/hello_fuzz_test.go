package daemon

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helloSeeds are hellos as a peer may send them: right, cut short,
// garbage, too long, and more than one line at once.
var helloSeeds = [][]byte{
	[]byte(`{"shellagent":1,"build":"test","pid":42,"want":"acp"}` + "\n"),
	[]byte(`{"shellagent":1,"build":"test","pid":42}` + "\n" + `{"jsonrpc":"2.0","id":1,"method":"initialize"}` + "\n"),
	[]byte(`{"shellagent":1,"build":"test","pid":42,"want":"status"}`),
	[]byte(`{"shellagent":0}` + "\n"),
	[]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n"),
	[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
	[]byte("\x00\xff\n"),
	[]byte("\n"),
	{},
	bytes.Repeat([]byte("x"), maxHello+10),
	append(bytes.Repeat([]byte(" "), maxHello-2), '{', '\n'),
}

// socketPair returns the two ends of a connected unix stream socket pair,
// as net conns; the test closes them.
func socketPair(t testing.TB) (a, b *net.UnixConn) {
	// No SOCK_CLOEXEC (macOS has none): FileConn's dup is close-on-exec,
	// and the originals are closed at once.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close() // FileConn dups it
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b = conn(fds[0]), conn(fds[1])
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// FuzzHello feeds bytes to the daemon's side of the hello (readClientHello)
// through a real socket pair, as a peer sends them: then closes its end,
// either in order (shutdown of its writes) or with a reset (a close with
// the daemon's hello unread, which is how a probe that connects and goes
// away ends: the reset that crashed the daemon, issue 22). The reader must
// never panic; what it accepts must be the first line, a hello; what
// follows the line must be left to read, byte for byte.
func FuzzHello(f *testing.F) {
	for _, s := range helloSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, reset bool) {
		daemon, peer := socketPair(t)
		if reset {
			// The daemon's hello, which the peer leaves unread: its close
			// resets the connection.
			if _, err := daemon.Write([]byte("{\"shellagent\":1}\n")); err != nil {
				t.Fatal(err)
			}
		}
		wrote := make(chan error, 1)
		go func() {
			_, err := peer.Write(data)
			if reset {
				peer.Close()
			} else {
				peer.CloseWrite()
			}
			wrote <- err
		}()
		daemon.SetDeadline(time.Now().Add(10 * time.Second))
		h, fds, rest, err := readClientHello(daemon)
		if len(fds) > 0 {
			t.Errorf("%d descriptors received, none sent", len(fds))
		}
		first, after, hasLine := bytes.Cut(data, []byte("\n"))
		if err == nil {
			if !hasLine || len(first)+1 > maxHello {
				t.Fatalf("accepted %+v from %q, which has no hello line within %d bytes", h, data, maxHello)
			}
			if h.Shellagent == 0 {
				t.Errorf("accepted %+v, which is not a hello", h)
			}
			if want, werr := parseHello(data[:len(first)+1]); werr != nil || want != h {
				t.Errorf("read %+v, the line parses as %+v, %v", h, want, werr)
			}
		}
		if rest != nil && !reset {
			got, rerr := io.ReadAll(rest)
			if rerr != nil || !bytes.Equal(got, after) {
				t.Errorf("after the line: %q, %v; want %q", got, rerr, after)
			}
		}
		daemon.Close() // ends a write of more than the socket holds
		<-wrote
	})
}

// FuzzRelayHello feeds bytes to the client's side of the handshake, the
// relay's (Dial), as a daemon's answer to its hello on a real socket: a
// listener reads the client's hello, writes the bytes, and closes, in
// order or (reset) without reading the client's hello. Dial must never
// panic; what it accepts must be the first line, a daemon's hello, with
// what follows it left to read.
func FuzzRelayHello(f *testing.F) {
	for _, s := range helloSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	dir, err := os.MkdirTemp("", "sa")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Mkdir(filepath.Join(dir, "s"), 0o700); err != nil {
		f.Fatal(err)
	}
	socket := filepath.Join(dir, "s", "d.sock")
	// A plain listener: the fake daemon sets deadlines on it, which a
	// Socket (Listen) does not offer.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })

	f.Fuzz(func(t *testing.T, data []byte, reset bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		served := make(chan error, 1)
		go func() { served <- fakeDaemon(ctx, l, data, reset) }()
		defer func() {
			if err := <-served; err != nil {
				t.Error(err)
			}
		}()
		c, err := Dial(socket, Hello{Shellagent: RelayVersion, Build: "test", Pid: os.Getpid()}, Stdio{})
		if err != nil {
			return
		}
		defer c.Close() // before the fake daemon's end is awaited: ends its write
		first, after, hasLine := bytes.Cut(data, []byte("\n"))
		if !hasLine || len(first)+1 > maxHello {
			t.Fatalf("accepted %+v from %q, which has no hello line within %d bytes", c.Daemon, data, maxHello)
		}
		if want, werr := parseHello(data[:len(first)+1]); werr != nil || want != c.Daemon {
			t.Errorf("read %+v, the line parses as %+v, %v", c.Daemon, want, werr)
		}
		if !reset {
			c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, rerr := io.ReadAll(c.R)
			if rerr != nil || !bytes.Equal(got, after) {
				t.Errorf("after the line: %q, %v; want %q", got, rerr, after)
			}
		}
	})
}

// fakeDaemon accepts one connection on l, reads the client's hello
// unless reset, writes data and closes.
func fakeDaemon(ctx context.Context, l *net.UnixListener, data []byte, reset bool) error {
	deadline, _ := ctx.Deadline()
	l.SetDeadline(deadline)
	nc, err := l.AcceptUnix()
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(deadline)
	if !reset {
		if _, err := bufio.NewReader(nc).ReadBytes('\n'); err != nil {
			return err
		}
	}
	if _, err := nc.Write(data); err != nil && !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
		return err
	}
	return nil
}
