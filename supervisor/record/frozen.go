package record

import (
	"encoding/json"
	"fmt"
	"maps"

	"shellagent/internal/journal"
)

// Frozen is a Recorder as an upgrade in place hands it over
// (supervisor/handover, Session.Durable): what reopening the session's history would read
// back from the journal, which the new image then need not read and
// parse. Its JSON crosses the exec: its shape is the old image's and the
// new one's alike.
type Frozen struct {
	Items map[string]json.RawMessage // each tool call's and terminal's state as last recorded, by id
	Keys  map[string]string          // the idempotency keys of accepted prompts, with their messageIds
	File  *journal.Handed            `json:",omitempty"` // what the journal's writer knew of the session's file (Store.Handover), set by the supervisor at the end of the freeze
}

// Frozen returns d as the next image of an upgrade needs it, or nil with
// history off. It is safe for concurrent use.
func (d *Recorder) Frozen() (*Frozen, error) {
	if d.off() {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	f := &Frozen{Items: make(map[string]json.RawMessage, len(d.items)), Keys: maps.Clone(d.keys)}
	for id, u := range d.items {
		b, err := json.Marshal(u)
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		f.Items[id] = b
	}
	return f, nil
}

// Thaw is the Recorder of session id after an upgrade in place, from
// what the old image handed over (f), or, without it, from the journal,
// as Reopen does. With f, the journal does not read the file either,
// if f.File describes it as it is (journal.Store.Adopt). The session's
// history is live in this process again; if it cannot be made so (its
// file cannot be read, or another process holds it), the session keeps
// no more history, and the log says why.
func (hs Histories) Thaw(id string, f *Frozen) *Recorder {
	if f == nil || !hs.Has(id) {
		return hs.reopen(id)
	}
	d := New(hs.Store, id)
	for item, raw := range f.Items {
		if u, err := journal.DecodeUpdate(raw); err == nil {
			d.items[item] = u
		}
	}
	maps.Copy(d.keys, f.Keys)
	// Without f.File, or for a file changed since, Adopt reads the file.
	if err := hs.Store.Adopt(id, f.File); err != nil {
		hs.warnLost(id, err)
		d.store = nil
	}
	return d
}

// reopen is the Recorder of session id after an upgrade in place: what
// the journal holds of it seeds the latest state of each item and the
// idempotency keys (Seed), as a resume of a past session does, so that
// what the session records next patches what was recorded before. A
// session without a history, or whose history cannot be read, stays
// without one.
func (hs Histories) reopen(id string) *Recorder {
	d := New(hs.Store, id)
	if !hs.Has(id) {
		d.store = nil // nothing to add to: a session without history stays so
		return d
	}
	h, err := hs.Store.Reopen(id)
	if err != nil {
		hs.warnLost(id, err)
		d.store = nil
		return d
	}
	d.Seed(h)
	return d
}

// warnLost logs that session id keeps no more history after an upgrade
// in place, and why.
func (hs Histories) warnLost(id string, err error) {
	if hs.Log != nil {
		hs.Log.Warn("upgrade: the session's history cannot be taken up again; it keeps no more", "session", id, "err", err)
	}
}
