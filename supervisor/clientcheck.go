package supervisor

import (
	"shellagent/acp"
	"shellagent/internal/clientcheck"
	"shellagent/protocol"
)

// When a session reports a client check, and to whom: only while its
// client_checks setting is on, as a notice to the client that broke the
// rule (the rules and their notices are internal/clientcheck's). What
// only the connection sees comes from the protocol.ClientChecks each
// connection is made with (Checks); the rest is checked where the request
// is served (session.go), or where the answer to a permission request
// comes in (askClient, checkAnswer).

// keepClosed is how many closed session ids the Supervisor remembers, to
// tell them from unknown ones (clientcheck.ClosedSession).
const keepClosed = 256

// checkClient reports to c (the attached client if c is nil) that it
// broke rule, if the session's client_checks option is on and it is open.
// A notice is no part of the history.
func checkClient(st *state, c protocol.Client, rule, detail string) {
	if !st.settings.ClientChecks || st.life != sessionOpen {
		return
	}
	if c == nil {
		c = st.out.client
	}
	if c != nil {
		c.Update(st.s.id, clientcheck.Notice(rule, detail))
	}
}

// checkCancel checks a terminal/cancel (terminal) or tool_call/cancel of
// id from c against what the session told its client (clientcheck.Ads):
// the item must advertise cancel.
func checkCancel(st *state, c protocol.Client, terminal bool, id string) {
	if rule, detail, broken := st.out.ads.Cancel(terminal, id); broken {
		checkClient(st, c, rule, detail)
	}
}

// checkAnswer checks the answer of client c to permission request q
// (resp, or err if it gets none) against what session/cancel left open
// (clientcheck.Asks), and forgets q.
func checkAnswer(st *state, c protocol.Client, q *clientcheck.Ask, resp *acp.PermissionResponse, err error) {
	if rule, detail, broken := st.out.asks.Answered(q, resp, err); broken && !st.out.lost(c) {
		checkClient(st, c, rule, detail)
	}
}

// Checks returns the Observer to make a new connection with: it reports
// what its client does against the rules only the connection sees to
// violations.report.
func (sv *Supervisor) Checks() protocol.Observer {
	return protocol.NewClientChecks(violations{sv}.report)
}

// violations reports to the Supervisor's sessions the violations of a
// client that the connection, or a request for no live session, shows.
type violations struct{ sv *Supervisor }

// report reports a violation that only the connection saw to its
// session, or, when it names none, to every session attached to c.
func (v violations) report(c protocol.Client, cv protocol.ClientViolation) {
	if cv.SessionID == "" {
		v.connection(c, cv.Rule, cv.Detail)
		return
	}
	if s, err := v.sv.live.get(cv.SessionID); err == nil {
		s.do(func(st *state) { checkClient(st, c, cv.Rule, cv.Detail) })
	}
}

// connection reports a violation that names no session that can hear of
// it to each session attached to c.
func (v violations) connection(c protocol.Client, rule, detail string) {
	for _, s := range v.sv.live.list() {
		s.do(func(st *state) {
			if st.out.client == c {
				checkClient(st, c, rule, detail)
			}
		})
	}
}

// closed reports a request from c for session id, which failed, if id
// is that of a session that closed.
func (v violations) closed(c protocol.Client, method, id string) {
	if v.sv.live.wasClosed(id) {
		v.connection(c, clientcheck.ClosedSession, method+" for "+id+", which was closed")
	}
}
