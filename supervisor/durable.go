package supervisor

import (
	"shellagent/acp"
	"shellagent/protocol"
	"shellagent/supervisor/record"
)

// A session's history on disk (Config.History) is kept by its
// record.Recorder (Session.disk, the outbox's too), and the Supervisor's
// side of every session's history by a record.Histories. What is here
// touches a session: the live sessions as session/list lists them,
// session/delete of a live one; revive.go rebuilds a session from its
// history.

// listed is each of the live sessions as session/list lists it, in
// their order.
func listed(sessions []*Session) []record.Live {
	live := make([]record.Live, 0, len(sessions))
	for _, s := range sessions {
		v := s.peek()
		live = append(live, record.Live{ID: s.id, Cwd: s.cwd, Title: v.title, UpdatedAt: v.updatedAt, Attached: v.attached, Terminals: v.terminals})
	}
	return live
}

// DeleteSession implements protocol.SessionDeleter: a live session is
// closed first, as session/close does (a client attached on another
// connection told so first); then its history is removed for good, and
// session/list no longer lists it. A past session's history is removed,
// and so is the corrupt file of one set aside; a session with neither is
// -32002. A connection the session was taken from deletes nothing: it is
// answered errTaken.
func (sv *Supervisor) DeleteSession(c protocol.Client, p *acp.DeleteSessionRequest, reply protocol.Reply) {
	erase := func(live bool) {
		switch found, err := sv.histories.Delete(p.SessionID); {
		case err != nil:
			reply(nil, err)
		case !found && !live:
			reply(nil, acp.SessionNotFound(p.SessionID))
		default:
			reply(struct{}{}, nil)
		}
	}
	if s, err := sv.live.get(p.SessionID); err == nil {
		s.closeFrom(c, true, func() { erase(true) }, func() { reply(nil, errTaken(p.SessionID)) })
		return
	}
	erase(false)
}

var _ protocol.SessionDeleter = (*Supervisor)(nil)
