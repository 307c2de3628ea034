package daemon

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBindGoesThroughTheCheckedDirectory: the socket is bound in the
// directory that was checked, through its descriptor, even when the
// directory's path names another directory by the time of the bind.
func TestBindGoesThroughTheCheckedDirectory(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "s")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	d, err := openDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	// The swap: the checked directory moves away, another takes its path.
	moved := filepath.Join(base, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: d.name("d.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	defer l.Close()
	if fi, err := os.Lstat(filepath.Join(moved, "d.sock")); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("no socket in the checked directory: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "d.sock")); err == nil {
		t.Errorf("the socket was bound in the directory swapped in after the check")
	}
	// The same through the descriptor for connect.
	nc, err := net.Dial("unix", d.name("d.sock"))
	if err != nil {
		t.Fatalf("connect through the descriptor: %v", err)
	}
	nc.Close()
}

// TestListenUnderADirectorySwap: while another process swaps the socket
// directory's path between a private directory and an open one (mode
// 0755, which CheckDir refuses), no Listen binds a socket in the open
// one. Issue 22's repro: the socket directory was checked by path, then
// bound by path: under a world-writable, non-sticky parent, a directory
// swap got root's socket or lock created in another user's directory in
// 4 of 200 starts.
func TestListenUnderADirectorySwap(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir, open := filepath.Join(base, "s"), filepath.Join(base, "open")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	swapped := make(chan error, 1)
	go func() {
		for !stop.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, open, unix.RENAME_EXCHANGE); err != nil {
				swapped <- err
				return
			}
		}
		swapped <- nil
	}()
	const starts = 1000
	var socks []io.Closer
	for i := range starts {
		s, err := Listen(filepath.Join(dir, "d"+strconv.Itoa(i)+".sock"))
		if err == nil {
			socks = append(socks, s)
		}
	}
	stop.Store(true)
	if err := <-swapped; err != nil {
		t.Skipf("RENAME_EXCHANGE: %v", err)
	}
	var mode unix.Stat_t
	if err := unix.Stat(dir, &mode); err != nil {
		t.Fatal(err)
	}
	if mode.Mode&0o777 != 0o700 {
		dir, open = open, dir // where the swaps left them
	}
	ents, _ := os.ReadDir(open)
	for _, e := range ents {
		t.Errorf("%s was bound in the directory of mode 0755", e.Name())
	}
	t.Logf("%d of %d Listens found the private directory", len(socks), starts)
	for _, s := range socks {
		s.Close()
	}
}
