package handover

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Blocked is a session that holds work an upgrade cannot hand over:
// Refuse names work that stays so; Wait, work that ends by itself within
// a kill grace (a session closing, a service being stopped).
type Blocked struct {
	Session, Cwd string
	Refuse, Wait []string
}

// Err is the refusal of the upgrade, naming the session and its work.
func (b *Blocked) Err() error {
	return fmt.Errorf("cannot be upgraded in place: session %s (%s) holds work that cannot be handed over yet: %s; end it (or wait for it), then upgrade again",
		b.Session, b.Cwd, strings.Join(append(slices.Clone(b.Refuse), b.Wait...), ", "))
}

// Await looks (look) until no session is blocked, and returns nil then.
// A session blocked by work that stays is refused at once (Blocked.Err);
// one blocked by work that ends by itself is looked at again every
// awaitEvery, and refused once it still is after grace (the longest
// kill grace of the first look) and awaitSlack. look returns the first
// session blocked, or nil, and the longest kill grace of the sessions
// it looked at.
func Await(look func() (*Blocked, time.Duration)) error {
	var deadline time.Time
	for {
		blocked, grace := look()
		switch {
		case blocked == nil:
			return nil
		case len(blocked.Refuse) > 0:
			return blocked.Err()
		case deadline.IsZero():
			deadline = time.Now().Add(grace + awaitSlack)
		case time.Now().After(deadline):
			return blocked.Err()
		}
		time.Sleep(awaitEvery)
	}
}

// awaitSlack is how long Await waits past the kill grace: work stopping
// after its grace still has its SIGKILL to take, its containment to end
// (up to contain.CloseTimeout) and its output to drain, and a loaded
// machine can take a few seconds for that.
const awaitSlack = 5 * time.Second

// awaitEvery is how often Await looks again at work it waits for.
const awaitEvery = 50 * time.Millisecond

// ErrUpgraded is the answer an open request for permission gets at an
// upgrade in place: none, as when its connection closes.
var ErrUpgraded = errors.New("its connection closed for the daemon's upgrade in place")
