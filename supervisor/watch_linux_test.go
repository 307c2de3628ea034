package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/protocol/acptest"
)

// smallShare lowers maxWatchDirs to n for the test, which must not be
// parallel (a test that runs in parallel waits until no other test runs
// but the parallel ones).
func smallShare(t *testing.T, n int) {
	old := maxWatchDirs
	maxWatchDirs = n
	t.Cleanup(func() { maxWatchDirs = old })
}

// makeDirs makes n directories under dir.
func makeDirs(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		if err := os.MkdirAll(filepath.Join(dir, strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// A watch of a tree with more directories than its share of the user's
// inotify watches is refused, and says how many. Issue 22: "/watch /"
// took 44k of the user's watches (23 % of the limit), four took 90 %.
func TestWatchRefusesATreeOverItsShare(t *testing.T) {
	smallShare(t, 20)
	share, _ := watchShare()
	if share != 20 {
		t.Fatalf("watchShare() = %d, want 20 (the user's limit is %s)", share, readLimit(t))
	}
	h := newHarness(t, Config{})
	makeDirs(t, filepath.Join(h.cwd, "big"), share) // and big itself: one more than the share
	sid := h.newSession()
	h.run(sid, "/watch big true")
	want := fmt.Sprintf("Cannot watch big: it has more than %d directories, and one watch takes at most %d inotify watches (the smaller of %d and an eighth of this user's ", share, share, maxWatchDirs)
	said := h.update(nil, sid, acp.KindAgentMessage, "the refusal", func(m *acptest.Msg) bool {
		return strings.HasPrefix(m.Text(), "Cannot watch")
	})
	if !strings.HasPrefix(said.Text(), want) || !strings.HasSuffix(said.Text(), "(fs.inotify.max_user_watches)); watch a smaller tree.") {
		t.Errorf("refused with %q, want %q…", said.Text(), want)
	}
	h.idle(said, sid, "end_turn")
	h.never(sid, "a refused watch made a tool call", func(m *acptest.Msg) bool { return m.Kind == acp.KindToolCall })
}

// A watch whose tree grows past its share stops, and says why.
func TestWatchStopsPastItsShare(t *testing.T) {
	smallShare(t, 20)
	share, _ := watchShare()
	dir := t.TempDir()
	makeDirs(t, dir, share-1) // and dir itself: the share exactly
	failed := make(chan error, 1)
	w, _, err := watchTree(dir, func() {}, func(err error) { failed <- err })
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

// readLimit returns the user's inotify watch limit as the file says it.
func readLimit(t *testing.T) string {
	b, err := os.ReadFile(maxUserWatches)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The share is an eighth of the user's limit, at most maxWatchDirs.
func TestWatchShare(t *testing.T) {
	t.Parallel()
	limit, err := strconv.Atoi(readLimit(t))
	if err != nil {
		t.Fatal(err)
	}
	share, over := watchShare()
	if want := max(min(limit/8, 16384), 1); share != want {
		t.Errorf("watchShare() = %d with a limit of %d, want %d", share, limit, want)
	}
	if want := fmt.Sprintf("an eighth of this user's %d (fs.inotify.max_user_watches)", limit); !strings.Contains(over.Error(), want) {
		t.Errorf("the refusal %q does not say %q", over, want)
	}
}
