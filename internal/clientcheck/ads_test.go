package clientcheck

import (
	"testing"
	"time"

	"shellagent/acp"
)

// TestAds: what the session told its client about cancelling an item,
// patch by patch.
func TestAds(t *testing.T) {
	var a Ads
	k := item{terminal: true, id: "term_1"}
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
		a.NoteUpdate(&acp.TerminalUpdate{TerminalID: k.id, Capabilities: step.caps})
		on, recent := a.advertised(k)
		if on != step.on || recent != step.recent || a.ever(k) != step.ever {
			t.Fatalf("after %s: on %v, recent %v, ever %v; want %+v", step.caps, on, recent, a.ever(k), step)
		}
	}
	a.off[k] = time.Now().Add(-cancelRace - time.Second)
	if _, recent := a.advertised(k); recent {
		t.Error("a withdrawal older than cancelRace still counts as recent")
	}
	a.Drop(true, k.id)
	if a.ever(k) {
		t.Error("a dropped item is remembered")
	}
}

// TestAdsCancel: a cancel is reported unless its item advertises cancel or
// stopped less than cancelRace ago, with the rule of its kind and whether
// the item ever advertised it.
func TestAdsCancel(t *testing.T) {
	now := acp.CapsCancel
	for _, tc := range []struct {
		name     string
		terminal bool
		caps     []acp.Capabilities // the patches sent, in order
		stale    bool               // the withdrawal is older than cancelRace
		rule     string             // "" when not reported
		detail   string
	}{
		{"terminal never advertised", true, nil, false, TerminalCancel, "terminal/cancel for x, which never advertised cancel"},
		{"tool call never advertised", false, []acp.Capabilities{acp.CapsNone}, false, ToolCallCancel, "tool_call/cancel for x, which never advertised cancel"},
		{"advertises", true, []acp.Capabilities{now}, false, "", ""},
		{"advertises, patch without caps", false, []acp.Capabilities{now, nil}, false, "", ""},
		{"withdrawn just now", false, []acp.Capabilities{now, acp.CapsNone}, false, "", ""},
		{"withdrawn long ago", true, []acp.Capabilities{now, acp.CapsNone}, true, TerminalCancel, "terminal/cancel for x, which no longer advertises cancel"},
		{"withdrawn long ago, tool call", false, []acp.Capabilities{now, acp.Capabilities(`{}`)}, true, ToolCallCancel, "tool_call/cancel for x, which no longer advertises cancel"},
	} {
		var a Ads
		for _, c := range tc.caps {
			if tc.terminal {
				a.NoteUpdate(&acp.TerminalUpdate{TerminalID: "x", Capabilities: c})
			} else {
				a.NoteUpdate(&acp.ToolCallUpdate{ToolCallID: "x", Capabilities: c})
			}
		}
		if tc.stale {
			a.off[item{tc.terminal, "x"}] = time.Now().Add(-cancelRace - time.Second)
		}
		rule, detail, broken := a.Cancel(tc.terminal, "x")
		if broken != (tc.rule != "") || rule != tc.rule || detail != tc.detail {
			t.Errorf("%s: Cancel = %q, %q, %v; want %q, %q", tc.name, rule, detail, broken, tc.rule, tc.detail)
		}
	}
}
