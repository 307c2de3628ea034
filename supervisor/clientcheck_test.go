package supervisor

import (
	"os"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
)

// TestClientRulesAreDocumented: docs/client-checklist.md has a row for
// every client check, which quotes its rule.
func TestClientRulesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/client-checklist.md")
	if err != nil {
		t.Fatal(err)
	}
	for id, r := range clientRules {
		n := clientNotice(id, "detail")
		if !strings.Contains(string(doc), "| `"+id+"` |") || !strings.Contains(string(doc), strings.Split(r.quote, " [")[0]) {
			t.Errorf("docs/client-checklist.md has no row for %s quoting %q", id, r.quote)
		}
		if n.Severity != acp.NoticeWarning || !strings.Contains(n.Description, r.quote) || n.Title == noticeTitlePrefix {
			t.Errorf("the notice of %s: %+v", id, n)
		}
	}
}

// TestCancelAds: what the session told its client about cancelling an
// item, patch by patch.
func TestCancelAds(t *testing.T) {
	var a cancelAds
	k := adKey{terminal: true, id: "term_1"}
	for _, step := range []struct {
		caps             acp.Capabilities
		on, recent, ever bool
	}{
		{nil, false, false, false},
		{acp.CapsCancel, true, false, true},
		{nil, true, false, true},
		{acp.Capabilities(`{}`), false, true, true},
		{acp.Capabilities(`{"cancel":{"_meta":{}}}`), true, false, true},
		{acp.CapsNone, false, true, true},
	} {
		a.note(k, step.caps)
		on, recent := a.advertised(k)
		if on != step.on || recent != step.recent || a.ever(k) != step.ever {
			t.Fatalf("after %s: on %v, recent %v, ever %v; want %+v", step.caps, on, recent, a.ever(k), step)
		}
	}
	a.off[k] = time.Now().Add(-cancelRace - time.Second)
	if _, recent := a.advertised(k); recent {
		t.Error("a withdrawal older than cancelRace still counts as recent")
	}
	a.drop(k)
	if a.ever(k) {
		t.Error("a dropped item is remembered")
	}
}
