package supervisor

import (
	"strings"

	"shellagent/acp"
	"shellagent/protocol"
)

// Looking at a session without taking it: _shellagent/session/look
// (protocol.SessionLooker), which the command line's status and logs use
// so that an editor keeps the session they look at.

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
