package fswatch

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// makeDirs makes n directories under dir.
func makeDirs(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		if err := os.MkdirAll(filepath.Join(dir, strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// A watch whose tree grows past its share stops, and says why.
func TestWatchStopsPastItsShare(t *testing.T) {
	old := MaxDirs
	MaxDirs = 20
	t.Cleanup(func() { MaxDirs = old })
	share, _ := Share()
	dir := t.TempDir()
	makeDirs(t, dir, share-1) // and dir itself: the share exactly
	failed := make(chan error, 1)
	w, _, err := Watch(dir, func() {}, func(err error) { failed <- err })
	if err != nil {
		t.Fatalf("a tree of %d directories: %v", share, err)
	}
	defer w.Close()
	makeDirs(t, filepath.Join(dir, "new"), 1)
	select {
	case err := <-failed:
		if want := fmt.Sprintf("it has more than %d directories", share); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("failed with %v, want %s…", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch went on past its share")
	}
}

// The share is an eighth of the user's limit, at most MaxDirs.
func TestWatchShare(t *testing.T) {
	b, err := os.ReadFile(maxUserWatches)
	if err != nil {
		t.Fatal(err)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	share, over := Share()
	if want := max(min(limit/8, 16384), 1); share != want {
		t.Errorf("Share() = %d with a limit of %d, want %d", share, limit, want)
	}
	if want := fmt.Sprintf("an eighth of this user's %d (fs.inotify.max_user_watches)", limit); !strings.Contains(over.Error(), want) {
		t.Errorf("the refusal %q does not say %q", over, want)
	}
}
