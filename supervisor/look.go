package supervisor

import (
	"encoding/base64"
	"slices"
	"strings"

	"shellagent/acp"
	"shellagent/protocol"
	"shellagent/termtext"
)

// Looking at a session without taking it (protocol.SessionLooker):
// _shellagent/session/look, what a command that only reads says, and
// _shellagent/service/read, a service's output from an offset, which the
// command line's status, logs and logs -f use so that an editor keeps the
// session they look at.

var _ protocol.SessionLooker = (*Supervisor)(nil)

// LookSession implements protocol.SessionLooker. It answers any client
// with what p.Command, a slash command that only reads (a command with a
// look: /ps, /tail, /status, /logs), says in the live session
// p.SessionID, in the session's turn, as a prompt's entry would. Nothing
// of it reaches the session's client or its history, and the session
// stays with the client that has it. A session that is not live (a past
// one, or none) is not found: looking makes nothing live.
func (sv *Supervisor) LookSession(_ protocol.Client, p *acp.LookSessionRequest, reply protocol.Reply) {
	s, err := sv.live.get(p.SessionID)
	if err != nil {
		reply(nil, err)
		return
	}
	in := parseInput(strings.TrimSpace(p.Command))
	switch {
	case in.cmd == malformed:
		reply(nil, acp.InvalidParams("command: %s", in.problem))
		return
	case in.cmd.look == nil:
		reply(nil, acp.InvalidParams("command: %q changes the session or runs work; a look takes a command that only reads: %s", p.Command, lookNames()))
		return
	}
	s.do(func(st *state) {
		reply(&acp.LookSessionResponse{Text: in.cmd.look(st, in)}, nil)
	})
}

// lookNames lists the commands a look takes: "/ps, /tail, …".
func lookNames() string {
	var names []string
	for _, c := range commands {
		if c.look != nil {
			names = append(names, "/"+c.name)
		}
	}
	return strings.Join(names, ", ")
}

// readChunk bounds the output one _shellagent/service/read answers with.
const readChunk = 64 << 10

// ReadService implements protocol.SessionLooker. It answers any client
// with the output of a service of the live session p.SessionID from
// where p says (acp.ReadServiceRequest), at most readChunk bytes, as the
// terminal's ring holds it: what the session's client receives is not
// touched, and the session stays with the client that has it.
func (sv *Supervisor) ReadService(_ protocol.Client, p *acp.ReadServiceRequest, reply protocol.Reply) {
	s, err := sv.live.get(p.SessionID)
	if err != nil {
		reply(nil, err)
		return
	}
	s.do(func(st *state) {
		var ids []string
		ok := false
		if st.stack != nil {
			ids, ok = st.stack.RunTerminals(p.Name)
		}
		if !ok {
			reply(nil, acp.InvalidParams("name: no service %q has run in session %s", p.Name, p.SessionID))
			return
		}
		reply(st.work.readRuns(ids, p))
	})
}

// readRuns reads the runs ids, a service's terminals, oldest first, from
// where p says (acp.ReadServiceRequest).
func (r *registry) readRuns(ids []string, p *acp.ReadServiceRequest) (*acp.ReadServiceResponse, error) {
	if len(ids) == 0 {
		return &acp.ReadServiceResponse{}, nil // no run yet
	}
	i := slices.Index(ids, p.TerminalID)
	if i < 0 { // the first read, or a run the session no longer keeps
		i = len(ids) - 1
	}
	t, off := r.terminals[ids[i]], int64(0)
	switch {
	case p.TerminalID == "" && p.Lines == 0:
		off = t.ring.Total()
	case p.TerminalID == "":
		data, end := t.ring.Snapshot()
		off = end - int64(len(data)) + int64(termtext.LastLinesStart(data, p.Lines))
	case t.id == p.TerminalID:
		off = p.Offset
		if total := t.ring.Total(); off > total {
			return nil, acp.InvalidParams("offset: %d is past the %d bytes of %s", off, total, t.id)
		}
	}
	buf := make([]byte, min(readChunk, max(0, t.ring.Total()-off)))
	n, start := t.ring.ReadAt(buf, off)
	res := &acp.ReadServiceResponse{
		TerminalID: t.id, Offset: start, Next: start + int64(n),
		Data: base64.StdEncoding.EncodeToString(buf[:n]),
	}
	if t.exit != nil && res.Next == t.ring.Total() {
		res.Ended = exitText(t.exit)
		if i+1 < len(ids) {
			res.NextTerminalID = ids[i+1]
		}
	}
	return res, nil
}
