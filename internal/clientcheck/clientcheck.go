// Package clientcheck holds the client checks' rules and what the agent
// needs to apply them without a session: while a session's client_checks
// setting is on, what its client does against a client-side rule of the
// schema or the RFD is reported to that client as a warning notice,
// besides being answered as it always is.
//
// Each rule has an id (the notice's _meta.shellagent.clientCheck, and the
// rows of docs/client-checklist.md), what the client did as the notice's
// title says it, and the rule quoted with its source. Some violations
// only the connection sees (protocol.ClientChecks, whose rules are
// protocol.UnsentResponse and the others); the session sees the rest,
// where it serves the request (package supervisor decides when to report
// and to whom: clientcheck.go there).
//
// Files: clientcheck.go (the rules and their notice, the content a prompt
// may hold), ads.go (what a session told its client about cancelling
// each terminal and tool call, and the cancels it did not advertise),
// asks.go (a session's open permission requests, and which of them
// session/cancel leaves open for listed work).
package clientcheck

import (
	"shellagent/acp"
	"shellagent/protocol"
)

// The rules the session checks (the connection checks the protocol ones).
const (
	TerminalCancel     = "terminal-cancel-not-advertised"  // terminal/cancel while the terminal does not advertise cancel
	ToolCallCancel     = "tool-call-cancel-not-advertised" // tool_call/cancel while the tool call does not advertise cancel
	UnsupportedContent = "unsupported-content"             // a prompt block that is neither text nor a resource link
	ClosedSession      = "closed-session"                  // a request for a session that was closed
	ResumeCwd          = "resume-cwd"                      // session/resume with another working directory
	ListedPermission   = "listed-permission-cancelled"     // a request for listed work answered cancelled after session/cancel
)

const (
	noticeTitlePrefix     = "Client check: "
	noticeAnsweredAsUsual = "shellagent answered as it always does; this notice is sent because the session's client_checks option is on."
)

// rule is a client-side rule as a notice quotes it.
type rule struct {
	title  string // what the client did, as the notice's title says it
	quote  string // the rule, quoted
	source string // where the rule is written
}

// rules are the rules shellagent checks, by id.
var rules = map[string]rule{
	TerminalCancel: {"terminal/cancel for a terminal that does not advertise cancel",
		"Clients MUST NOT send it unless the terminal currently advertises capabilities.cancel.",
		"schema CancelTerminalRequest; RFD \"Cancellable terminals\""},
	ToolCallCancel: {"tool_call/cancel for a tool call that does not advertise cancel",
		"Clients MUST NOT send it unless the tool call currently advertises capabilities.cancel.",
		"schema CancelToolCallRequest; RFD \"Cancellable tool calls\""},
	UnsupportedContent: {"a prompt with a content block the agent did not advertise",
		"The Client MUST adapt its interface according to PromptCapabilities.",
		"schema PromptRequest.prompt (shellagent advertises no promptCapabilities: text and resource_link only)"},
	ClosedSession: {"a request for a session that was closed",
		"After the close response, the Agent sends no other messages for the session on that connection.",
		"schema CloseSessionRequest (a closed session is gone: its requests can only fail with -32002)"},
	ResumeCwd: {"session/resume with another working directory",
		"Clients MUST send the session's working directory.",
		"schema ResumeSessionRequest.cwd"},
	ListedPermission: {"a permission request for listed work answered cancelled after session/cancel",
		"Pending permission requests for listed work stay open. [...] On session/cancel, the Client answers with cancelled every pending request whose subject does not reference work in the latest background list.",
		"RFD \"Cancellation, close, and resume\" (a user who dismissed the request after the cancel may also cause this)"},
	protocol.UnsentResponse: {"a response to a request the agent never sent",
		"The receiver MUST reply with the same value in the response.",
		"schema RequestId; JSON-RPC 2.0 \"Response object\" (id: it MUST be the same as the value of the id member in the Request Object)"},
	protocol.SecondResponse: {"a second response to a request of the agent",
		"When a rpc call is made, the Server MUST reply with a Response [one Response per Request].",
		"JSON-RPC 2.0 \"Response object\""},
	protocol.WithdrawnAnswer: {"a withdrawn permission request answered with a selected option",
		"The client answers a request the agent cancels with $/cancel_request with this [cancelled] outcome.",
		"schema RequestPermissionOutcome (cancelled); schema AgentRequest"},
	protocol.ReusedID: {"a request id that a request still waiting for its answer uses",
		"A sender MUST NOT reuse an ID while a request with it is still awaiting a response.",
		"schema RequestId"},
	protocol.EmptyPrompt: {"session/prompt with an empty prompt",
		"Clients MUST NOT send an empty array.",
		"schema PromptRequest.prompt"},
}

// Notice returns the notice that reports a violation of the rule with id
// ruleID: what the client did (detail), and the rule quoted with its
// source. It is a warning whose _meta.shellagent.clientCheck is ruleID.
func Notice(ruleID, detail string) *acp.Notice {
	r := rules[ruleID]
	return &acp.Notice{
		SessionUpdate: acp.KindNotice, Severity: acp.NoticeWarning,
		Title:       noticeTitlePrefix + r.title,
		Description: detail + ".\n" + r.source + ": \"" + r.quote + "\"\n" + noticeAnsweredAsUsual,
		Meta:        map[string]any{"shellagent": map[string]any{"clientCheck": ruleID}},
	}
}

// UnsupportedBlock returns the type of the first block of a prompt that
// is neither text nor a resource link (UnsupportedContent), or "".
func UnsupportedBlock(blocks []acp.ContentBlock) string {
	for _, b := range blocks {
		if b.Type != "text" && b.Type != "resource_link" {
			return b.Type
		}
	}
	return ""
}
