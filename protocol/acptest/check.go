package acptest

import (
	"fmt"
	"strings"
)

// Rules checked by Check. Rule 0 (Wire) covers what the reader finds in
// each line on its own.
const (
	Wire            = 0  // a line is not valid JSON-RPC, fails the schema, or answers no request
	RuleBackground  = 1  // every state_update carries background as an array
	RuleAnnounced   = 2  // an item is announced before the first snapshot that lists it
	RuleLive        = 3  // a listed terminal has no exitStatus; a listed tool call is not final
	RuleFinalized   = 4  // an item's exitStatus or final status precedes the snapshot that removes it
	RuleListedOnce  = 5  // no item twice; no tool call listed with a terminal it references
	RuleTerminal    = 6  // one exitStatus per terminal, with capabilities null; no output outside its life
	RuleToolStatus  = 7  // no return to pending; no change after a final status
	RuleFollowUp    = 8  // no idle [] snapshot that removes items followed by running
	RuleMessageID   = 9  // user messages have ids; prompt responses name a user message
	RuleAfterClose  = 10 // nothing for a session after its successful session/close response
	RuleV1ToolCall  = 11 // ACP v1: a tool_call_update names a tool call that a tool_call announced
	RuleV1Terminal  = 12 // ACP v1: the _meta terminal_info/terminal_output/terminal_exit flow
	RuleResume      = 13 // a state_update of the session between session/resume and its response
	RuleToolCancel  = 14 // a tool call that advertised cancel clears it with its final status
	numberedRuleMax = RuleToolCancel
)

// ruleNames are short names for failure messages.
var ruleNames = [numberedRuleMax + 1]string{
	"wire",
	"background array",
	"announced before listed",
	"listed work is live",
	"finalized before removed",
	"listed once",
	"terminal lifecycle",
	"tool call status",
	"follow-up reported with removal",
	"message ids",
	"silence after close",
	"v1 tool call announced",
	"v1 terminal meta",
	"state before resume response",
	"tool call cancel cleared",
}

// Violation is one broken rule.
type Violation struct {
	Rule      int    // Wire (0) or one of the numbered rules checked by Check
	Seq       int    // transcript position of the offending message, or -1
	SessionID string // "" when not session-specific
	Text      string
}

// String renders the violation for failure messages.
func (v Violation) String() string {
	var sb strings.Builder
	name := "?"
	if v.Rule >= 0 && v.Rule < len(ruleNames) {
		name = ruleNames[v.Rule]
	}
	fmt.Fprintf(&sb, "acptest: rule %d (%s)", v.Rule, name)
	if v.SessionID != "" {
		fmt.Fprintf(&sb, ", session %s", v.SessionID)
	}
	if v.Seq >= 0 {
		fmt.Fprintf(&sb, ", #%d", v.Seq)
	}
	sb.WriteString(": ")
	sb.WriteString(v.Text)
	return sb.String()
}

// Violations returns the wire violations found so far followed by the
// violations of the numbered rules in the transcript so far, without
// reporting anything.
func (c *Client) Violations() []Violation {
	c.mu.Lock()
	wire := append([]Violation(nil), c.wire...)
	msgs, sent, version := c.msgs, append([]*request(nil), c.sent...), c.version
	c.mu.Unlock()
	return append(wire, checkTranscript(msgs, sent, version)...)
}

// Check reports with t.Errorf every violation of the numbered rules in the
// transcript so far that an earlier Check has not reported. (Wire
// violations are reported as they are read.) The rules, per session:
//
//  1. every state_update carries background as an array, never omitted or null;
//  2. an item is announced before the first snapshot that lists it: a
//     terminal by a terminal_update, a tool call by a tool_call_update;
//  3. a listed terminal has no exitStatus yet, a listed tool call has a
//     non-final status (final: completed, failed, cancelled);
//  4. when a snapshot drops an item the previous snapshot listed, the
//     terminal's exitStatus or the tool call's final status came before it
//     (or, for a tool call, a terminal its content references is listed in
//     its place: it is live, as the RFD says);
//  5. no item is listed twice in one snapshot, and a tool call whose content
//     references a terminal listed in the same snapshot is not listed;
//  6. a terminal gets at most one non-null exitStatus, in an update that
//     also sets capabilities to null; no output chunk or snapshot comes
//     after its exitStatus or before its first terminal_update;
//  7. a tool call never returns to pending and never changes a final status;
//  8. an idle snapshot with an empty list that removed items is not followed
//     by a running snapshot without a user_message in between (running
//     belongs in the snapshot that removes the item);
//  9. every user_message has a messageId, and every successful
//     session/prompt response names a user_message of its session;
//  10. nothing is sent for a session after the successful response to its
//     session/close (until the client resumes or, in v1, loads it);
//  13. a successful session/resume response comes after a state_update of
//     the session sent since the request (the schema's ResumeSessionResponse:
//     "a current state_update after any requested history replay and before
//     this response, even without replay");
//  14. a tool call that advertises capabilities.cancel clears it (null, or
//     an object without cancel) in the update that gives it its final
//     status (the schema's ToolCallCapabilities.cancel: "stop advertising
//     it once the tool call reaches a final status"), as rule 6 asks of a
//     terminal's exitStatus.
//
// Sending session/resume with a replayFrom (or, in v1, session/load)
// starts the session's tracking over, since the replay re-sends its
// history.
//
// As a client must, the checker takes a state_update whose list is
// malformed (a line that fails the schema, reported as a wire violation)
// as one that does not report background work: until a list comes again,
// nothing is listed, and nothing is checked as removed. A state_update
// that a shellagent scenario marks as its own (Msg.Probe) shows a client
// a rule by bending one on purpose: it may leave the list out (rule 1) or
// report running right after the list emptied (rule 8).
//
// In ACP v1 (WithProtocolV1) rules 7 and 10 apply as above (tool_call and
// tool_call_update both set a status), and, per session:
//
//  11. every tool_call_update names a tool call that an earlier tool_call
//     announced (tool_call may come again for the same id: it replaces);
//  12. the _meta terminal flow of clients that advertised
//     clientCapabilities._meta.terminal_output, and nothing of it for
//     others: terminal_info {terminal_id, cwd?} only on a tool_call; a
//     terminal content item only for a terminal that terminal_info
//     announced (a client fails the whole update otherwise);
//     terminal_output {terminal_id, data: string} and terminal_exit
//     {terminal_id, exit_code: integer|null, signal: string|null} only on
//     the tool call that announced the terminal, between its terminal_info
//     and its one terminal_exit.
func (c *Client) Check() {
	c.t.Helper()
	c.mu.Lock()
	msgs, sent, version := c.msgs, append([]*request(nil), c.sent...), c.version
	c.mu.Unlock()
	for _, v := range checkTranscript(msgs, sent, version) {
		key := v.String()
		c.mu.Lock()
		dup := c.reported[key]
		c.reported[key] = true
		c.mu.Unlock()
		if dup || c.tolerated != nil && c.tolerated(v) {
			continue
		}
		if v.Seq >= 0 && v.Seq < len(msgs) {
			c.t.Errorf("%s\n    line: %s", v, msgs[v.Seq])
		} else {
			c.t.Errorf("%s", v)
		}
	}
}

// checker evaluates the numbered rules over a transcript.
type checker struct {
	v1       bool // ACP v1 rules
	meta     bool // v1: the latest successful initialize advertised _meta.terminal_output
	out      []Violation
	sessions map[string]*sessionState
	userMsgs map[string]map[string]bool // session → user message ids
	prompts  []*Msg                     // successful session/prompt responses
}

// sessionState is what the checker tracks for one session.
type sessionState struct {
	id    string
	terms map[string]*termState
	tools map[string]*toolState
	prev  *snapshot // the last state_update with a background array

	follow     *snapshot // an idle [] snapshot that removed items (rule 8)
	followUser bool      // a user_message came after follow

	closedAt       int // seq of the successful close response, -1 if open
	closedReported bool

	resuming    bool // a session/resume was sent and is not answered (rule 13)
	resumeState bool // a state_update came since it was sent
}

// termState tracks a terminal.
type termState struct {
	announced     bool   // a terminal_update was seen
	exitSeq       int    // -1 until exitStatus
	earlyReported bool   // a chunk before the announcement was reported
	lateReported  bool   // a chunk after exitStatus was reported
	call          string // v1: the tool call whose terminal_info announced it
}

// toolState tracks a tool call.
type toolState struct {
	status      string
	leftPending bool
	finalSeq    int
	terminals   []string // terminals referenced by its content
	cancelAd    bool     // capabilities.cancel is advertised (rule 14)
}

// snapshot is a state_update's background list.
type snapshot struct {
	seq   int
	state string
	items []Item
}

// checkTranscript returns the violations of the numbered rules in msgs;
// sent are the requests the client sent, in order.
func checkTranscript(msgs []*Msg, sent []*request, version int) []Violation {
	ck := &checker{v1: version == 1, sessions: make(map[string]*sessionState), userMsgs: make(map[string]map[string]bool)}
	next := 0
	for i, m := range msgs {
		for ; next < len(sent) && sent[next].after <= i; next++ {
			ck.sent(sent[next])
		}
		ck.message(m)
	}
	ck.matchPrompts()
	return ck.out
}

// violate records a violation.
func (ck *checker) violate(rule int, m *Msg, session, format string, args ...any) {
	seq := -1
	if m != nil {
		seq = m.Seq
	}
	ck.out = append(ck.out, Violation{Rule: rule, Seq: seq, SessionID: session, Text: fmt.Sprintf(format, args...)})
}

// session returns the state of a session, creating it.
func (ck *checker) session(id string) *sessionState {
	s := ck.sessions[id]
	if s == nil {
		s = &sessionState{id: id, closedAt: -1}
		s.reset()
		ck.sessions[id] = s
	}
	return s
}

// reset forgets the session's entities and snapshots.
func (s *sessionState) reset() {
	s.terms = make(map[string]*termState)
	s.tools = make(map[string]*toolState)
	s.prev, s.follow, s.followUser = nil, nil, false
}

// sent applies a request the client sent: resuming a session reopens it,
// and a replay starts its history over.
func (ck *checker) sent(r *request) {
	if r.method != "session/resume" && r.method != "session/load" || r.sessionID == "" {
		return
	}
	s := ck.session(r.sessionID)
	s.closedAt, s.closedReported = -1, false
	if r.replay {
		s.reset()
	}
	s.resuming, s.resumeState = r.method == "session/resume" && !ck.v1, false
}

// message applies one received message.
func (ck *checker) message(m *Msg) {
	switch {
	case m.IsResponse():
		ck.response(m)
	case m.SessionID != "":
		s := ck.session(m.SessionID)
		if s.closedAt >= 0 && !s.closedReported {
			s.closedReported = true
			ck.violate(RuleAfterClose, m, s.id, "message for the session after the successful session/close response #%d", s.closedAt)
		}
		if m.Method == "session/update" {
			ck.update(s, m)
		}
	}
}

// response applies a response to a request the client sent.
func (ck *checker) response(m *Msg) {
	if m.req == nil || m.Result == nil || m.Error != nil {
		return
	}
	switch m.req.method {
	case "initialize": // the latest successful one is authoritative
		ck.meta = m.req.termOutput
	case "session/prompt":
		ck.prompts = append(ck.prompts, m)
	case "session/close":
		if m.req.sessionID != "" {
			s := ck.session(m.req.sessionID)
			s.closedAt, s.closedReported = m.Seq, false
		}
	case "session/resume":
		if s := ck.sessions[m.req.sessionID]; s != nil && s.resuming {
			if !s.resumeState {
				ck.violate(RuleResume, m, s.id, "the session/resume response comes before any state_update of the session since the request")
			}
			s.resuming = false
		}
	}
}

// update applies one session/update.
func (ck *checker) update(s *sessionState, m *Msg) {
	switch m.Kind {
	case "user_message":
		ck.userMessage(s, m)
	case "terminal_update":
		ck.terminalUpdate(s, m)
	case "terminal_output_chunk":
		ck.outputChunk(s, m)
	case "tool_call", "tool_call_update":
		if ck.v1 {
			ck.v1ToolCall(s, m)
			return
		}
		ck.toolCallUpdate(s, m)
	case "state_update":
		ck.stateUpdate(s, m)
	}
}

// userMessage checks rule 9 and notes user messages for rule 8.
func (ck *checker) userMessage(s *sessionState, m *Msg) {
	id := m.MessageID()
	if id == "" {
		ck.violate(RuleMessageID, m, s.id, "user_message without a messageId")
	} else {
		if ck.userMsgs[s.id] == nil {
			ck.userMsgs[s.id] = make(map[string]bool)
		}
		ck.userMsgs[s.id][id] = true
	}
	if s.follow != nil {
		s.followUser = true
	}
}

// terminalUpdate checks rule 6 for a terminal_update and tracks the terminal.
func (ck *checker) terminalUpdate(s *sessionState, m *Msg) {
	id := m.TerminalID()
	ts := s.term(id)
	ts.announced = true
	exitSet := m.ExitStatus() != nil
	if ts.exitSeq >= 0 {
		switch {
		case exitSet:
			ck.violate(RuleTerminal, m, s.id, "terminal %s: second exitStatus (the first was #%d)", id, ts.exitSeq)
		case m.HasKey("exitStatus"):
			ck.violate(RuleTerminal, m, s.id, "terminal %s: exitStatus cleared after it was reported at #%d", id, ts.exitSeq)
		}
		if out, _ := m.Update["output"].(map[string]any); out != nil {
			ck.violate(RuleTerminal, m, s.id, "terminal %s: output snapshot after its exitStatus (#%d)", id, ts.exitSeq)
		}
		return
	}
	if !exitSet {
		return
	}
	ts.exitSeq = m.Seq
	if caps, ok := m.Update["capabilities"]; !ok || caps != nil {
		ck.violate(RuleTerminal, m, s.id, "terminal %s: the update with exitStatus must also set capabilities to null", id)
	}
}

// outputChunk checks rule 6 for a terminal_output_chunk.
func (ck *checker) outputChunk(s *sessionState, m *Msg) {
	id := m.TerminalID()
	ts := s.term(id)
	switch {
	case !ts.announced && !ts.earlyReported:
		ts.earlyReported = true
		ck.violate(RuleTerminal, m, s.id, "terminal %s: output chunk before its first terminal_update", id)
	case ts.exitSeq >= 0 && !ts.lateReported:
		ts.lateReported = true
		ck.violate(RuleTerminal, m, s.id, "terminal %s: output chunk after its exitStatus (#%d)", id, ts.exitSeq)
	}
}

// term returns the state of a terminal, creating it.
func (s *sessionState) term(id string) *termState {
	ts := s.terms[id]
	if ts == nil {
		ts = &termState{exitSeq: -1}
		s.terms[id] = ts
	}
	return ts
}

// finalStatus reports whether a tool call status is final.
func finalStatus(s string) bool {
	return s == "completed" || s == "failed" || s == "cancelled"
}

// toolCallUpdate checks rule 7 and tracks the tool call.
func (ck *checker) toolCallUpdate(s *sessionState, m *Msg) {
	id := m.ToolCallID()
	tc := s.tools[id]
	if tc == nil {
		tc = &toolState{status: "pending", finalSeq: -1}
		s.tools[id] = tc
	}
	if m.HasKey("status") {
		next := m.Status()
		if next == "" {
			next = "pending" // null resets the status to pending
		}
		switch {
		case finalStatus(tc.status) && next != tc.status:
			ck.violate(RuleToolStatus, m, s.id, "tool call %s: status %s after the final status %s (#%d)", id, next, tc.status, tc.finalSeq)
		case next == "pending" && tc.leftPending:
			ck.violate(RuleToolStatus, m, s.id, "tool call %s: status went back to pending", id)
		}
		if next != "pending" {
			tc.leftPending = true
		}
		if finalStatus(next) && !finalStatus(tc.status) {
			tc.finalSeq = m.Seq
		}
		if !finalStatus(tc.status) {
			tc.status = next
		}
	}
	if m.HasKey("content") {
		tc.terminals = terminalRefs(m.Update["content"])
	}
	if ck.v1 {
		return
	}
	if m.HasKey("capabilities") {
		caps, _ := m.Update["capabilities"].(map[string]any)
		tc.cancelAd = caps["cancel"] != nil
	}
	if tc.cancelAd && tc.finalSeq == m.Seq {
		ck.violate(RuleToolCancel, m, s.id, "tool call %s: the update with the final status %s must also clear capabilities.cancel", id, tc.status)
	}
}

// referencesListed reports whether one of refs is a terminal listed.
func referencesListed(refs []string, listed map[Item]bool) bool {
	for _, ref := range refs {
		if listed[Item{Type: "terminal", ID: ref}] {
			return true
		}
	}
	return false
}

// terminalRefs returns the terminal ids that tool call content references.
func terminalRefs(content any) []string {
	arr, _ := content.([]any)
	var ids []string
	for _, v := range arr {
		obj, _ := v.(map[string]any)
		if obj["type"] == "terminal" {
			if id, ok := obj["terminalId"].(string); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// stateUpdate checks rules 1–5 and 8 for a state_update.
func (ck *checker) stateUpdate(s *sessionState, m *Msg) {
	s.resumeState = true
	state := m.State()
	if s.follow != nil {
		if state == "running" && !s.followUser && m.Probe() == "" {
			ck.violate(RuleFollowUp, m, s.id, "running right after the idle snapshot #%d that emptied the background list; report running in the snapshot that removes the item", s.follow.seq)
		}
		s.follow = nil
	}
	if _, ok := m.Update["background"].([]any); !ok || m.invalid {
		what := "omitted"
		if m.HasKey("background") {
			what = "not an array"
		}
		if !m.invalid && m.Probe() == "" {
			ck.violate(RuleBackground, m, s.id, "state_update background is %s", what)
		}
		s.prev = nil // background work is unknown until a list is reported again
		return
	}
	items := m.Background()
	listed := ck.listed(s, m, items)
	removed := ck.removed(s, m, listed)
	s.prev = &snapshot{seq: m.Seq, state: state, items: items}
	if len(removed) > 0 && state == "idle" && len(items) == 0 {
		s.follow, s.followUser = s.prev, false
	}
}

// listed checks rules 2, 3 and 5 for the items of a snapshot and returns
// them as a set.
func (ck *checker) listed(s *sessionState, m *Msg, items []Item) map[Item]bool {
	set := make(map[Item]bool, len(items))
	for _, it := range items {
		if set[it] {
			ck.violate(RuleListedOnce, m, s.id, "%s listed twice", it)
		}
		set[it] = true
	}
	for _, it := range items {
		switch it.Type {
		case "terminal":
			ts := s.term(it.ID)
			switch {
			case !ts.announced:
				ck.violate(RuleAnnounced, m, s.id, "%s listed before any terminal_update announced it", it)
			case ts.exitSeq >= 0:
				ck.violate(RuleLive, m, s.id, "%s listed after its exitStatus (#%d)", it, ts.exitSeq)
			}
		case "tool_call":
			tc := s.tools[it.ID]
			if tc == nil {
				ck.violate(RuleAnnounced, m, s.id, "%s listed before any tool_call_update announced it", it)
				continue
			}
			if finalStatus(tc.status) {
				ck.violate(RuleLive, m, s.id, "%s listed with the final status %s (#%d)", it, tc.status, tc.finalSeq)
			}
			for _, ref := range tc.terminals {
				if set[Item{Type: "terminal", ID: ref}] {
					ck.violate(RuleListedOnce, m, s.id, "%s listed although it references the listed terminal %s", it, ref)
				}
			}
		}
	}
	return set
}

// removed checks rule 4: items dropped since the previous snapshot must have
// been finalized. It returns the dropped items.
func (ck *checker) removed(s *sessionState, m *Msg, listed map[Item]bool) []Item {
	if s.prev == nil {
		return nil
	}
	var removed []Item
	for _, it := range s.prev.items {
		if listed[it] {
			continue
		}
		removed = append(removed, it)
		switch it.Type {
		case "terminal":
			if ts := s.terms[it.ID]; ts == nil || ts.exitSeq < 0 {
				ck.violate(RuleFinalized, m, s.id, "%s removed from the list (listed at #%d) without an exitStatus", it, s.prev.seq)
			}
		case "tool_call":
			// A tool call that leaves the list for a terminal it references,
			// listed in its place, stays live (a service's next run).
			if tc := s.tools[it.ID]; tc == nil || !finalStatus(tc.status) && !referencesListed(tc.terminals, listed) {
				ck.violate(RuleFinalized, m, s.id, "%s removed from the list (listed at #%d) without a final status", it, s.prev.seq)
			}
		}
	}
	return removed
}

// matchPrompts checks that every successful prompt response names a user
// message of its session (rule 9; the order of the two is free).
func (ck *checker) matchPrompts() {
	for _, m := range ck.prompts {
		id := m.MessageID()
		if id == "" {
			continue // the schema check reports it
		}
		if !ck.userMsgs[m.req.sessionID][id] {
			ck.violate(RuleMessageID, m, m.req.sessionID, "the session/prompt response names messageId %q, but no user_message of the session has it", id)
		}
	}
}

// v1ToolCall checks rules 7, 11 and 12 for an ACP v1 tool_call or
// tool_call_update.
func (ck *checker) v1ToolCall(s *sessionState, m *Msg) {
	create := m.Kind == "tool_call"
	if id := m.ToolCallID(); !create && s.tools[id] == nil {
		ck.violate(RuleV1ToolCall, m, s.id, "tool_call_update for %s before any tool_call announced it", id)
	}
	ck.toolCallUpdate(s, m)
	info, out, exit := m.Meta("terminal_info"), m.Meta("terminal_output"), m.Meta("terminal_exit")
	refs := terminalRefs(m.Update["content"])
	if !ck.meta {
		if info != nil || out != nil || exit != nil || len(refs) > 0 {
			ck.violate(RuleV1Terminal, m, s.id, "terminal content or _meta terminal_* sent to a client that did not advertise clientCapabilities._meta.terminal_output")
		}
		return
	}
	if info != nil {
		id, _ := info["terminal_id"].(string)
		cwd, hasCwd := info["cwd"]
		_, cwdString := cwd.(string)
		switch {
		case !create:
			ck.violate(RuleV1Terminal, m, s.id, "terminal_info on a tool_call_update: clients read it only from a tool_call")
		case id == "":
			ck.violate(RuleV1Terminal, m, s.id, "terminal_info without a terminal_id string")
		case hasCwd && cwd != nil && !cwdString:
			ck.violate(RuleV1Terminal, m, s.id, "terminal_info cwd is not a string")
		default:
			ts := s.term(id)
			ts.announced, ts.call = true, m.ToolCallID()
		}
	}
	for _, ref := range refs {
		if ts := s.terms[ref]; ts == nil || !ts.announced {
			ck.violate(RuleV1Terminal, m, s.id, "content references terminal %s, which no terminal_info announced (a client fails the whole update)", ref)
		}
	}
	if out != nil {
		id, _ := out["terminal_id"].(string)
		if _, ok := out["data"].(string); !ok {
			ck.violate(RuleV1Terminal, m, s.id, "terminal_output for %q: data is not a string", id)
		}
		ts := s.term(id)
		switch {
		case !ts.announced && !ts.earlyReported:
			ts.earlyReported = true
			ck.violate(RuleV1Terminal, m, s.id, "terminal_output for %q before its terminal_info", id)
		case ts.exitSeq >= 0 && !ts.lateReported:
			ts.lateReported = true
			ck.violate(RuleV1Terminal, m, s.id, "terminal_output for %s after its terminal_exit (#%d)", id, ts.exitSeq)
		case ts.announced && ts.call != m.ToolCallID():
			ck.violate(RuleV1Terminal, m, s.id, "terminal_output for %s on tool call %s; terminal_info put it on %s", id, m.ToolCallID(), ts.call)
		}
	}
	if exit != nil {
		ck.v1Exit(s, m, exit)
	}
}

// v1Exit checks a _meta.terminal_exit.
func (ck *checker) v1Exit(s *sessionState, m *Msg, exit map[string]any) {
	id, _ := exit["terminal_id"].(string)
	code, hasCode := exit["exit_code"]
	sig, hasSig := exit["signal"]
	f, isNum := code.(float64)
	_, isStr := sig.(string)
	if !hasCode || !(code == nil || isNum && f == float64(int64(f)) && f >= 0) || !hasSig || !(sig == nil || isStr) {
		ck.violate(RuleV1Terminal, m, s.id, "terminal_exit for %q must have exit_code (a non-negative integer or null) and signal (a string or null)", id)
	}
	ts := s.term(id)
	switch {
	case !ts.announced:
		ck.violate(RuleV1Terminal, m, s.id, "terminal_exit for %q before its terminal_info", id)
	case ts.exitSeq >= 0:
		ck.violate(RuleV1Terminal, m, s.id, "terminal %s: second terminal_exit (the first was #%d)", id, ts.exitSeq)
	case ts.call != m.ToolCallID():
		ck.violate(RuleV1Terminal, m, s.id, "terminal_exit for %s on tool call %s; terminal_info put it on %s", id, m.ToolCallID(), ts.call)
	}
	if ts.exitSeq < 0 {
		ts.exitSeq = m.Seq
	}
}
