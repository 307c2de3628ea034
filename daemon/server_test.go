package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/supervisor"
)

// TestServerClosesAStdoutItDoesNotServe: a descriptor sent along with a
// hello that is not served ACP to it (status, an unknown want, a client
// of another build) is closed by the daemon at once; it keeps none.
func TestServerClosesAStdoutItDoesNotServe(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "s", "d.sock")
	l, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{
		Supervisor: supervisor.New(supervisor.Config{}),
		Build:      "test",
		Socket:     socket,
		Log:        slog.New(slog.DiscardHandler),
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	defer func() {
		cancel()
		if err := <-served; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v, want context.Canceled", err)
		}
	}()

	tests := []struct{ want, build string }{
		{WantStatus, "test"},
		{"bogus", "test"},
		{WantACP, "other"},
	}
	for _, tt := range tests {
		t.Run(tt.want+"/"+tt.build, func(t *testing.T) {
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
			line, _ := json.Marshal(Hello{Shellagent: RelayVersion, Build: tt.build, Pid: os.Getpid(), Want: tt.want, Stdout: true})
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
	dir, err := os.MkdirTemp("", "sa")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "s", "d.sock")
	l, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var msgs []string
	srv := &Server{
		Supervisor: supervisor.New(supervisor.Config{Detached: supervisor.KeepDetached}),
		Build:      "test",
		Socket:     socket,
		Log:        slog.New(panicLog{panicOn: "connected", mu: &mu, msgs: &msgs}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	defer func() {
		cancel()
		if err := <-served; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v, want context.Canceled", err)
		}
	}()

	hello := Hello{Shellagent: RelayVersion, Build: "test", Pid: os.Getpid()}
	c, err := Dial(socket, hello, nil)
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
