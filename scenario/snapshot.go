package scenario

import (
	"encoding/json"

	"shellagent/acp"
)

// Crafted is a state_update that a Snapshot asks for and that no session
// sends of its own: one that leaves the background list out, or carries a
// malformed list in its place. It embeds the snapshot it stands for (the
// session's state and list), which is what a connection queues and
// follows (acp.StateOf), and goes out as it marshals itself.
type Crafted struct {
	acp.StateUpdate
	// Unreported omits background: the snapshot does not report
	// background work, which a client reads as "unknown", not as "none".
	Unreported bool
	// Raw, if not nil, is sent as background in place of the list, as it
	// is: only the malformed-list scenario (Invalid) uses it.
	Raw json.RawMessage
}

// MarshalJSON writes the snapshot without its list when it is
// Unreported, or with Raw in its place.
func (u *Crafted) MarshalJSON() ([]byte, error) {
	var bg json.RawMessage // omitted
	if !u.Unreported {
		bg = u.Raw
	}
	return json.Marshal(struct {
		SessionUpdate string          `json:"sessionUpdate"`
		State         string          `json:"state"`
		StopReason    string          `json:"stopReason,omitempty"`
		Background    json.RawMessage `json:"background,omitempty"`
		Error         *acp.Error      `json:"error,omitempty"`
		Meta          map[string]any  `json:"_meta,omitempty"`
	}{u.SessionUpdate, u.State, u.StopReason, bg, u.Error, u.Meta})
}

// Update returns the update that sends s over u, the snapshot of the
// session's state and list: u itself, unless s leaves the list out or
// replaces it, which a *Crafted does.
func (s Snapshot) Update(u *acp.StateUpdate) acp.Update {
	if !s.Unreported && s.Raw == nil {
		return u
	}
	return &Crafted{StateUpdate: *u, Unreported: s.Unreported, Raw: s.Raw}
}
