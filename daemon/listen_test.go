package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"shellagent/supervisor"
)

// TestSocketKeep: a kept socket whose file, lock file or directory is
// removed is bound again, with a lock file of its own, and the server
// behind it answers there; Close removes the socket file it bound.
func TestSocketKeep(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "s")
	socket := filepath.Join(dir, "d.sock")
	if err := PrepareDir(socket); err != nil {
		t.Fatal(err)
	}
	lock, ok, err := TryLock(socket)
	if err != nil || !ok {
		t.Fatalf("TryLock: %v, %v", ok, err)
	}
	defer lock.Close()
	sock, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	sock.Keep(lock, slog.New(slog.DiscardHandler))
	srv := &Server{Supervisor: supervisor.New(supervisor.Config{}), Build: "test", Socket: socket, Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, sock) }()

	removals := []struct {
		name   string
		remove func() error
	}{
		{"the socket", func() error { return os.Remove(socket) }},
		{"the lock file", func() error { return os.Remove(lockPath(socket)) }},
		{"the directory", func() error { return os.RemoveAll(dir) }},
	}
	for _, rm := range removals {
		if err := rm.remove(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			st, err := AskStatus(socket, Hello{Shellagent: RelayVersion, Build: "test", Pid: os.Getpid()})
			if err == nil && st.Pid == os.Getpid() && lock.current(socket) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after removing %s, not bound again with the lock held within 2 s: %v", rm.name, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		switch fi, err := os.Lstat(socket); {
		case err != nil:
			t.Errorf("after removing %s: %v", rm.name, err)
		case fi.Mode().Perm() != 0o600:
			t.Errorf("after removing %s, the socket bound again has mode %v, want 0600", rm.name, fi.Mode().Perm())
		}
		if l, ok, err := TryLock(socket); ok || err != nil {
			if ok {
				l.Close()
			}
			t.Errorf("after removing %s, the lock file is free to take (%v)", rm.name, err)
		}
	}
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve: %v", err)
	}
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket file is left after Close: %v", err)
	}
}
