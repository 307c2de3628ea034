package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHolderUnderChurn: holder names the process that holds a lock while
// other locks are taken and dropped beside it, in a /proc/locks longer
// than the page the kernel serves it by, which a single read of it can
// skip a line of (one read in a few hundred, here).
func TestHolderUnderChurn(t *testing.T) {
	dir := t.TempDir()
	flock := func(name string) *os.File {
		t.Helper()
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		return f
	}
	var others []*os.File
	for i := range 150 {
		others = append(others, flock(fmt.Sprint("other", i)))
	}
	held := flock("held")
	if b, err := os.ReadFile("/proc/locks"); err != nil || len(b) <= os.Getpagesize() {
		t.Fatalf("/proc/locks has %d bytes (%v), want more than a page", len(b), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			fd := int(others[i%len(others)].Fd())
			unix.Flock(fd, unix.LOCK_UN)
			unix.Flock(fd, unix.LOCK_EX)
		}
	})
	defer wg.Wait()
	defer cancel()
	for i := range 1000 {
		if pid := holder(held.Name()); pid != os.Getpid() {
			t.Fatalf("call %d: holder says pid %d, want %d", i, pid, os.Getpid())
		}
	}
}
