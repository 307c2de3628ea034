package protocol

import (
	"fmt"
	"testing"

	"shellagent/acp"
)

// TestEverySwitchCoversEveryUpdate runs each kind of update through every
// switch over updates: the queue, clone, and the v2 encoding
// (protocol/v1front's TestEveryUpdateEncodes, the v1 one). A variant
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
			if _, err := (acpV2{}).appendUpdate(nil, "s", u); err != nil {
				t.Errorf("acpV2.appendUpdate(%T): %v", u, err)
			}
		})
	}
}
