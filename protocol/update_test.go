package protocol

import (
	"fmt"
	"testing"

	"shellagent/acp"
)

// TestEverySwitchCoversEveryUpdate runs each kind of update through every
// switch over updates: the queue, clone, and both encodings. A variant
// added to acp.Update and forgotten in one of them panics here.
func TestEverySwitchCoversEveryUpdate(t *testing.T) {
	for _, u := range acp.Variants() {
		t.Run(fmt.Sprintf("%T", u), func(t *testing.T) {
			q := newControlQueue()
			q.addUpdate("s", u)
			if got := q.take(nil); len(got) == 0 {
				t.Errorf("addUpdate(%T) queued nothing", u)
			}
			if c := clone(u); fmt.Sprintf("%T", c) != fmt.Sprintf("%T", u) {
				t.Errorf("clone(%T) = %T", u, c)
			}
			for _, enc := range []encoding{acpV2{}, newACPV1(true), newACPV1(false)} {
				if _, err := enc.appendUpdate(nil, "s", u); err != nil {
					t.Errorf("%T.appendUpdate(%T): %v", enc, u, err)
				}
			}
		})
	}
}
