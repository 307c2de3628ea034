package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/internal/fswatch"
	"shellagent/protocol/acptest"
)

// A watch of a tree with more directories than its share of the user's
// inotify watches is refused, and says how many. Issue 22: "/watch /"
// took 44k of the user's watches (23 % of the limit), four took 90 %.
// The test lowers fswatch.MaxDirs, so it must not be parallel (a test
// that runs in parallel waits until no other test runs but the parallel
// ones).
func TestWatchRefusesATreeOverItsShare(t *testing.T) {
	old := fswatch.MaxDirs
	fswatch.MaxDirs = 20
	t.Cleanup(func() { fswatch.MaxDirs = old })
	share, _ := fswatch.Share()
	if share != 20 {
		t.Fatalf("fswatch.Share() = %d, want 20 (see /proc/sys/fs/inotify/max_user_watches)", share)
	}
	h := newHarness(t, Config{})
	for i := range share { // and big itself: one more than the share
		if err := os.MkdirAll(filepath.Join(h.cwd, "big", strconv.Itoa(i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sid := h.newSession()
	h.run(sid, "/watch big true")
	want := fmt.Sprintf("Cannot watch big: it has more than %d directories, and one watch takes at most %d inotify watches (the smaller of %d and an eighth of this user's ", share, share, fswatch.MaxDirs)
	said := h.update(nil, sid, acp.KindAgentMessage, "the refusal", func(m *acptest.Msg) bool {
		return strings.HasPrefix(m.Text(), "Cannot watch")
	})
	if !strings.HasPrefix(said.Text(), want) || !strings.HasSuffix(said.Text(), "(fs.inotify.max_user_watches)); watch a smaller tree.") {
		t.Errorf("refused with %q, want %q…", said.Text(), want)
	}
	h.idle(said, sid, "end_turn")
	h.never(sid, "a refused watch made a tool call", func(m *acptest.Msg) bool { return m.Kind == acp.KindToolCall })
}
