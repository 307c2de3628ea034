package clientcheck

import (
	"encoding/json"
	"time"

	"shellagent/acp"
)

// cancelRace is how long after an item stopped advertising cancel a
// cancel for it is taken for one sent before the client heard of it (a
// cancel that races the end of the work), and not reported.
const cancelRace = 2 * time.Second

// Ads is what a session last told its client about the cancel capability
// of each terminal and tool call: which advertise it, and, for
// cancelRace, which stopped advertising it. The zero value is ready to
// use; it is not safe for concurrent use (the session's actor owns it).
type Ads struct {
	on  map[item]bool      // advertises cancel
	off map[item]time.Time // stopped advertising it, when
	was map[item]bool      // advertised it once; dropped with the work (Drop)
}

// item names a terminal or a tool call.
type item struct {
	terminal bool
	id       string
}

// NoteUpdate records what an update sent to the client tells it about
// cancel: a tool_call_update's or terminal_update's capabilities patch.
func (a *Ads) NoteUpdate(u acp.Update) {
	switch u := u.(type) {
	case *acp.ToolCallUpdate:
		a.note(item{false, u.ToolCallID}, u.Capabilities)
	case *acp.TerminalUpdate:
		a.note(item{true, u.TerminalID}, u.Capabilities)
	}
}

// Drop forgets the terminal (or tool call) id: retired work, or a
// scenario's made-up item.
func (a *Ads) Drop(terminal bool, id string) {
	k := item{terminal, id}
	delete(a.on, k)
	delete(a.off, k)
	delete(a.was, k)
}

// Cancel checks a terminal/cancel (terminal) or tool_call/cancel of id
// against what the client was told: the item must advertise cancel. It
// returns the rule broken (TerminalCancel or ToolCallCancel) and what the
// client did, or ok false. One whose cancel was withdrawn less than
// cancelRace ago is not reported.
func (a *Ads) Cancel(terminal bool, id string) (ruleID, detail string, broken bool) {
	k := item{terminal, id}
	on, recent := a.advertised(k)
	if on || recent {
		return "", "", false
	}
	ruleID, method := ToolCallCancel, "tool_call/cancel for "
	if terminal {
		ruleID, method = TerminalCancel, "terminal/cancel for "
	}
	why := ", which never advertised cancel"
	if a.ever(k) {
		why = ", which no longer advertises cancel"
	}
	return ruleID, method + id + why, true
}

// note records the capabilities patch an update sent for k: nil leaves
// them unchanged, null or an object without cancel withdraws cancel.
func (a *Ads) note(k item, caps acp.Capabilities) {
	if caps == nil {
		return
	}
	if a.on == nil {
		a.on, a.off, a.was = make(map[item]bool), make(map[item]time.Time), make(map[item]bool)
	}
	var c struct {
		Cancel json.RawMessage `json:"cancel"`
	}
	if json.Unmarshal(caps, &c) == nil && c.Cancel != nil && string(c.Cancel) != "null" {
		a.on[k], a.was[k] = true, true
		delete(a.off, k)
		return
	}
	if a.on[k] {
		delete(a.on, k)
		now := time.Now()
		for old, at := range a.off {
			if now.Sub(at) > cancelRace {
				delete(a.off, old)
			}
		}
		a.off[k] = now
	}
}

// advertised reports whether k advertises cancel, and whether it stopped
// less than cancelRace ago.
func (a *Ads) advertised(k item) (on, recent bool) {
	at, ok := a.off[k]
	return a.on[k], ok && time.Since(at) <= cancelRace
}

// ever reports whether k advertised cancel at some point.
func (a *Ads) ever(k item) bool { return a.was[k] }
