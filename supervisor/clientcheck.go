package supervisor

import (
	"encoding/json"
	"slices"
	"time"

	"shellagent/acp"
	"shellagent/protocol"
)

// Client checks: while a session's client_checks setting is on, what its
// client does against a client-side rule of the schema or the RFD is
// reported to that client as a warning notice, besides being answered as
// it always is. Some violations only the connection sees: the
// protocol.ClientChecks that each connection is made with (Checks)
// reports them to violations.report. The others are seen here, where the
// request is served.

// Client rule ids: the notice's _meta.shellagent.clientCheck, and the
// rows of docs/client-checklist.md.
const (
	ruleTerminalCancel    = "terminal-cancel-not-advertised"
	ruleToolCallCancel    = "tool-call-cancel-not-advertised"
	ruleUnsupportedBlock  = "unsupported-content"
	ruleClosedSession     = "closed-session"
	ruleResumeCwd         = "resume-cwd"
	ruleListedPermission  = "listed-permission-cancelled"
	ruleUnsentResponse    = protocol.UnsentResponse
	ruleSecondResponse    = protocol.SecondResponse
	ruleWithdrawnAnswer   = protocol.WithdrawnAnswer
	ruleReusedID          = protocol.ReusedID
	ruleEmptyPrompt       = protocol.EmptyPrompt
	keepClosed            = 256 // closed session ids remembered, to tell them from unknown ones
	cancelRace            = 2 * time.Second
	noticeTitlePrefix     = "Client check: "
	noticeAnsweredAsUsual = "shellagent answered as it always does; this notice is sent because the session's client_checks option is on."
)

// clientRule is a client-side rule as a notice quotes it.
type clientRule struct {
	title  string // what the client did, as the notice's title says it
	quote  string // the rule, quoted
	source string // where the rule is written
}

// clientRules are the rules shellagent checks, by id.
var clientRules = map[string]clientRule{
	ruleTerminalCancel: {"terminal/cancel for a terminal that does not advertise cancel",
		"Clients MUST NOT send it unless the terminal currently advertises capabilities.cancel.",
		"schema CancelTerminalRequest; RFD \"Cancellable terminals\""},
	ruleToolCallCancel: {"tool_call/cancel for a tool call that does not advertise cancel",
		"Clients MUST NOT send it unless the tool call currently advertises capabilities.cancel.",
		"schema CancelToolCallRequest; RFD \"Cancellable tool calls\""},
	ruleUnsupportedBlock: {"a prompt with a content block the agent did not advertise",
		"The Client MUST adapt its interface according to PromptCapabilities.",
		"schema PromptRequest.prompt (shellagent advertises no promptCapabilities: text and resource_link only)"},
	ruleClosedSession: {"a request for a session that was closed",
		"After the close response, the Agent sends no other messages for the session on that connection.",
		"schema CloseSessionRequest (a closed session is gone: its requests can only fail with -32002)"},
	ruleResumeCwd: {"session/resume with another working directory",
		"Clients MUST send the session's working directory.",
		"schema ResumeSessionRequest.cwd"},
	ruleListedPermission: {"a permission request for listed work answered cancelled after session/cancel",
		"Pending permission requests for listed work stay open. [...] On session/cancel, the Client answers with cancelled every pending request whose subject does not reference work in the latest background list.",
		"RFD \"Cancellation, close, and resume\" (a user who dismissed the request after the cancel may also cause this)"},
	ruleUnsentResponse: {"a response to a request the agent never sent",
		"The receiver MUST reply with the same value in the response.",
		"schema RequestId; JSON-RPC 2.0 \"Response object\" (id: it MUST be the same as the value of the id member in the Request Object)"},
	ruleSecondResponse: {"a second response to a request of the agent",
		"When a rpc call is made, the Server MUST reply with a Response [one Response per Request].",
		"JSON-RPC 2.0 \"Response object\""},
	ruleWithdrawnAnswer: {"a withdrawn permission request answered with a selected option",
		"The client answers a request the agent cancels with $/cancel_request with this [cancelled] outcome.",
		"schema RequestPermissionOutcome (cancelled); schema AgentRequest"},
	ruleReusedID: {"a request id that a request still waiting for its answer uses",
		"A sender MUST NOT reuse an ID while a request with it is still awaiting a response.",
		"schema RequestId"},
	ruleEmptyPrompt: {"session/prompt with an empty prompt",
		"Clients MUST NOT send an empty array.",
		"schema PromptRequest.prompt"},
}

// clientNotice is the notice that reports a violation of rule: what the
// client did (detail), and the rule quoted with its source.
func clientNotice(rule, detail string) *acp.Notice {
	r := clientRules[rule]
	return &acp.Notice{
		SessionUpdate: acp.KindNotice, Severity: acp.NoticeWarning,
		Title:       noticeTitlePrefix + r.title,
		Description: detail + ".\n" + r.source + ": \"" + r.quote + "\"\n" + noticeAnsweredAsUsual,
		Meta:        map[string]any{"shellagent": map[string]any{"clientCheck": rule}},
	}
}

// checkClient reports to c (the attached client if c is nil) that it
// broke rule, if the session's client_checks option is on and it is open.
// A notice is no part of the history.
func checkClient(st *state, c protocol.Client, rule, detail string) {
	if !st.settings.clientChecks || st.life != sessionOpen {
		return
	}
	if c == nil {
		c = st.out.client
	}
	if c != nil {
		c.Update(st.s.id, clientNotice(rule, detail))
	}
}

// checkCancel checks a terminal/cancel (terminal) or tool_call/cancel of
// id from c against what the session told its client: the item must
// advertise cancel. One whose cancel was withdrawn less than cancelRace
// ago was likely sent before the client heard of it (a cancel that races
// the end of the work), and is not reported.
func checkCancel(st *state, c protocol.Client, terminal bool, id string) {
	on, recent := st.out.ads.advertised(adKey{terminal, id})
	if on || recent {
		return
	}
	rule, method := ruleToolCallCancel, "tool_call/cancel for "
	if terminal {
		rule, method = ruleTerminalCancel, "terminal/cancel for "
	}
	why := ", which never advertised cancel"
	if st.out.ads.ever(adKey{terminal, id}) {
		why = ", which no longer advertises cancel"
	}
	checkClient(st, c, rule, method+id+why)
}

// unsupportedBlock returns the type of the first block of a prompt that
// is neither text nor a resource link, or "".
func unsupportedBlock(blocks []acp.ContentBlock) string {
	for _, b := range blocks {
		if b.Type != "text" && b.Type != "resource_link" {
			return b.Type
		}
	}
	return ""
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
	if s, err := v.sv.session(cv.SessionID); err == nil {
		s.do(func(st *state) { checkClient(st, c, cv.Rule, cv.Detail) })
	}
}

// connection reports a violation that names no session that can hear of
// it to each session attached to c.
func (v violations) connection(c protocol.Client, rule, detail string) {
	for _, s := range v.sv.list() {
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
	v.sv.mu.Lock()
	closed := slices.Contains(v.sv.closed, id)
	v.sv.mu.Unlock()
	if closed {
		v.connection(c, ruleClosedSession, method+" for "+id+", which was closed")
	}
}

// cancelAds is what a session last told its client about the cancel
// capability of each terminal and tool call: which advertise it, and,
// for cancelRace, which stopped advertising it. It is part of the outbox.
type cancelAds struct {
	on  map[adKey]bool      // advertises cancel
	off map[adKey]time.Time // stopped advertising it, when
	was map[adKey]bool      // advertised it once; dropped with the work (forget)
}

// adKey names a terminal or a tool call.
type adKey struct {
	terminal bool
	id       string
}

// note records the capabilities patch an update sent for k: nil leaves
// them unchanged, null or an object without cancel withdraws cancel.
func (a *cancelAds) note(k adKey, caps acp.Capabilities) {
	if caps == nil {
		return
	}
	if a.on == nil {
		a.on, a.off, a.was = make(map[adKey]bool), make(map[adKey]time.Time), make(map[adKey]bool)
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
func (a *cancelAds) advertised(k adKey) (on, recent bool) {
	at, ok := a.off[k]
	return a.on[k], ok && time.Since(at) <= cancelRace
}

// ever reports whether k advertised cancel at some point.
func (a *cancelAds) ever(k adKey) bool { return a.was[k] }

// drop forgets k: retired work, or a scenario's made-up item.
func (a *cancelAds) drop(k adKey) {
	delete(a.on, k)
	delete(a.off, k)
	delete(a.was, k)
}

// noteUpdate records what an update tells the client about cancel.
func (a *cancelAds) noteUpdate(u acp.Update) {
	switch u := u.(type) {
	case *acp.ToolCallUpdate:
		a.note(adKey{false, u.ToolCallID}, u.Capabilities)
	case *acp.TerminalUpdate:
		a.note(adKey{true, u.TerminalID}, u.Capabilities)
	}
}
