package scenario

import (
	"encoding/json"
	"testing"

	"shellagent/acp"
)

// TestSnapshotUpdate: a Snapshot that leaves the list out, or replaces it,
// is sent as a Crafted, which a connection still reads as the snapshot it
// stands for; any other is the session's own state_update.
func TestSnapshotUpdate(t *testing.T) {
	list := acp.Background{{Type: "terminal", TerminalID: "term_1"}}
	for _, tc := range []struct {
		s    Snapshot
		want string
	}{
		{Snapshot{}, `{"sessionUpdate":"state_update","state":"running","background":[{"type":"terminal","terminalId":"term_1"}],"_meta":{"k":1}}`},
		{Snapshot{Unreported: true}, `{"sessionUpdate":"state_update","state":"running","_meta":{"k":1}}`},
		{Snapshot{Raw: []byte(`[{"type":"terminal"}]`)}, `{"sessionUpdate":"state_update","state":"running","background":[{"type":"terminal"}],"_meta":{"k":1}}`},
	} {
		base := &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateRunning, Background: list, Meta: map[string]any{"k": 1}}
		u := tc.s.Update(base)
		got, err := json.Marshal(u)
		if err != nil || string(got) != tc.want {
			t.Errorf("json.Marshal(%+v.Update(...)) = %s, %v; want %s", tc.s, got, err, tc.want)
		}
		if st := acp.StateOf(u); st == nil || st.State != acp.StateRunning || len(st.Background) != 1 {
			t.Errorf("acp.StateOf(%+v.Update(...)) = %+v; want the snapshot it stands for", tc.s, st)
		}
		if _, plain := u.(*acp.StateUpdate); plain != (!tc.s.Unreported && tc.s.Raw == nil) {
			t.Errorf("%+v.Update(...) is %T", tc.s, u)
		}
	}
}
