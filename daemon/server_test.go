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
