package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestHeld: Held sees a lock that another open file holds, and nothing
// where there is no lock file or no one holds it; it creates no lock
// file and leaves the lock free for the next TryLock.
func TestHeld(t *testing.T) {
	t.Parallel()
	socket := filepath.Join(t.TempDir(), "s", "d.sock")
	if err := PrepareDir(socket); err != nil {
		t.Fatal(err)
	}
	if held, err := Held(socket); held || err != nil {
		t.Fatalf("Held with no lock file: %v, %v; want false, nil", held, err)
	}
	if _, err := os.Lstat(lockPath(socket)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Held created %s: %v", lockPath(socket), err)
	}
	lock, ok, err := TryLock(socket)
	if err != nil || !ok {
		t.Fatalf("TryLock: %v, %v", ok, err)
	}
	if held, err := Held(socket); !held || err != nil {
		t.Errorf("Held while locked: %v, %v; want true, nil", held, err)
	}
	lock.Close()
	if held, err := Held(socket); held || err != nil {
		t.Errorf("Held once let go: %v, %v; want false, nil", held, err)
	}
	again, ok, err := TryLock(socket)
	if err != nil || !ok {
		t.Fatalf("TryLock after Held: %v, %v", ok, err)
	}
	again.Close()
}
