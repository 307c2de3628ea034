package journal

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"shellagent/acp"
)

// TestHammerPruneAndReopen: Reopen of a session that this Store's own
// pruner looks at over and over (never closed, its file touched lately)
// is never ErrLive: no other process holds it. Under the race detector,
// it found prune reading whether a candidate is live (entry.live)
// without Store.mu, which Reopen sets. Not parallel: its churn of
// descriptors would trouble the tests that count the process's.
func TestHammerPruneAndReopen(t *testing.T) {
	dir := t.TempDir()
	writeGood(t, dir, "sess_dead")
	path := filepath.Join(dir, "sessions", "sess_dead.jsonl")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	settle := 200 * time.Millisecond
	s := open(t, Options{Dir: dir, Max: 1, hooks: &hooks{settle: &settle}, Log: slog.New(slog.DiscardHandler)})
	time.Sleep(settle)
	s.Create("sess_busy", Meta{Cwd: "/p"})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.Chtimes(path, time.Now(), time.Now())
			s.Update("sess_busy", "", msg(acp.KindAgentMessage, "msg_1", "x"))
		}
	})
	defer func() { close(stop); wg.Wait() }()
	deadline := time.Now().Add(3 * time.Second)
	n := 0
	for ; time.Now().Before(deadline); n++ {
		tmp := path + ".w"
		os.WriteFile(tmp, orig, 0o600)
		os.Rename(tmp, path)
		s.Refresh()
		_, err := s.Reopen("sess_dead")
		if errors.Is(err, ErrLive) {
			t.Fatalf("after %d tries: Reopen: %v (this process is pid %d)", n, err, os.Getpid())
		}
		s.Closed("sess_dead")
		s.Flush()
	}
	t.Logf("%d tries", n)
}
