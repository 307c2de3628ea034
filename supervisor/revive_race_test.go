package supervisor

import (
	"testing"

	"shellagent/internal/journal"
	"shellagent/protocol/acptest"
)

// Two clients that resume one past session at once both get it: it is
// made live once, and the later resume attaches to it as a resume of a
// live session does. Before, the history's lock of the session's file was
// taken by each resume on its own, and the one that lost was refused
// -32600: "live in another shellagent process", naming this one.
func TestTwoResumesOfAPastSessionAtOnce(t *testing.T) {
	t.Parallel()
	store, err := journal.Open(journal.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h := newHarness(t, Config{History: store})
	for range 8 {
		sid := h.newSession()
		h.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
		var sent []int64
		clients := []*acptest.Client{h.connect(), h.connect()}
		for _, c := range clients {
			sent = append(sent, c.Send("session/resume", map[string]string{"sessionId": sid, "cwd": h.cwd}))
		}
		for i, c := range clients {
			if m := c.Wait(sent[i]); m.Error != nil {
				t.Fatalf("resume %d of past session %s: %v", i+1, sid, m.Error)
			}
		}
	}
}
