package supervisor

import "shellagent/acp"

// An overlay is what a playing scenario lays over its session (stage.go):
// items it lists beside the session's own work, and cancels it takes. The
// session consults it in two places, the list it reports (kit.items) and
// the cancel it dispatches (kit.takes), and tells it of a resume and
// of the close. Otherwise the scenario drives the session only through the
// ways in that real events use (Session.do), and its commands, wakeups
// and watches are the session's own work.
type overlay interface {
	// listed returns what it lists after the session's own work.
	listed() []acp.BackgroundItem
	// cancel is asked first of each cancel of id: terminal/cancel (or
	// /stop) of a terminal if terminal, tool_call/cancel (or /stop) of a
	// tool call the session does not know otherwise. running says
	// whether id is a terminal of the session that has not exited. If it
	// takes the cancel, the session answers with err (nil: accepted) and
	// does nothing more.
	cancel(terminal bool, id string, running bool) (taken bool, err error)
	// resumed brings a client that resumes up to date on what the overlay
	// runs and made up.
	resumed(st *state, delivered map[any]bool)
	// closing says the session closes: the overlay lets go of it.
	closing()
}

// kit is the session's slot for an overlay: empty (nil) unless a
// scenario plays.
type kit struct{ overlay }

// items returns the items the overlay lists after the session's own
// work, if there is an overlay.
func (k kit) items() []acp.BackgroundItem {
	if k.overlay == nil {
		return nil
	}
	return k.listed()
}

// takes asks the overlay, if there is one, whether it takes a cancel of
// id (overlay.cancel).
func (k kit) takes(terminal bool, id string, running bool) (taken bool, err error) {
	if k.overlay == nil {
		return false, nil
	}
	return k.cancel(terminal, id, running)
}

// listed is the list as a state_update carries it: the session's work,
// then what the overlay lists.
func (st *state) listed() acp.Background {
	return append(st.list.wire(), st.kit.items()...)
}
