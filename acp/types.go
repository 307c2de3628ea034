// Package acp is the vocabulary of the Agent Client Protocol v2 as
// shellagent speaks it: the wire types of requests, responses and session
// updates, the JSON-RPC errors an agent answers with, and the checks a
// request's params pass before an agent sees them. It imports nothing of
// shellagent: the connection that carries these types is package protocol,
// the agent that fills them is package supervisor.
//
// Only the parts of the schema (testdata/acp/schema.v2.json) that shellagent
// reads or writes are modelled. Field comments give the wire rule where it
// is not obvious; the schema's descriptions are the reference.
//
// Files: types.go (the wire types), errors.go (JSON-RPC errors and their
// codes), validate.go (what each request must carry).
package acp

import "encoding/json"

// ProtocolVersion is ACP v2, the version shellagent is built around; a
// client that asks for v1 gets a v1 front (package protocol).
const ProtocolVersion = 2

// Implementation names a client or an agent.
type Implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// InitializeRequest is the params of "initialize".
type InitializeRequest struct {
	// ProtocolVersion is the schema's ProtocolVersion, a uint16.
	ProtocolVersion *uint16         `json:"protocolVersion"`
	Info            *Implementation `json:"info"`
	Capabilities    json.RawMessage `json:"capabilities,omitempty"`
}

// InitializeResponse is the result of "initialize".
type InitializeResponse struct {
	ProtocolVersion int               `json:"protocolVersion"`
	Info            Implementation    `json:"info"`
	Capabilities    AgentCapabilities `json:"capabilities"`
	// Meta's "shellagent" object carries containment (the containment
	// mode) and methods (the extension methods served).
	Meta map[string]any `json:"_meta,omitempty"`
}

// AgentCapabilities says what the agent serves.
type AgentCapabilities struct {
	// Session {} advertises the v2 session baseline.
	Session *SessionCapabilities `json:"session,omitempty"`
}

// SessionCapabilities are the session methods served beyond the baseline.
type SessionCapabilities struct {
	// Delete {} advertises session/delete.
	Delete *struct{} `json:"delete,omitempty"`
}

// NewSessionRequest is the params of "session/new".
type NewSessionRequest struct {
	Cwd                   string            `json:"cwd"`
	AdditionalDirectories []string          `json:"additionalDirectories,omitempty"`
	McpServers            []json.RawMessage `json:"mcpServers,omitempty"`
}

// NewSessionResponse is the result of "session/new".
type NewSessionResponse struct {
	SessionID         string             `json:"sessionId"`
	ConfigOptions     []ConfigOption     `json:"configOptions,omitempty"`
	AvailableCommands []AvailableCommand `json:"availableCommands,omitempty"`
}

// ListSessionsRequest is the params of "session/list".
type ListSessionsRequest struct {
	Cwd    *string `json:"cwd,omitempty"`
	Cursor *string `json:"cursor,omitempty"`
}

// ListSessionsResponse is the result of "session/list".
type ListSessionsResponse struct {
	Sessions   []SessionInfo `json:"sessions"`
	NextCursor *string       `json:"nextCursor,omitempty"`
}

// SessionInfo describes one session in a list.
type SessionInfo struct {
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
	Title     string `json:"title,omitempty"`
	UpdatedAt string `json:"updatedAt,omitempty"` // RFC 3339
	// Meta is the entry's _meta: shellagent's state (attached, detached
	// or past) and its live terminals.
	Meta map[string]any `json:"_meta,omitempty"`
}

// ResumeSessionRequest is the params of "session/resume".
type ResumeSessionRequest struct {
	SessionID             string            `json:"sessionId"`
	Cwd                   string            `json:"cwd"`
	AdditionalDirectories []string          `json:"additionalDirectories,omitempty"`
	McpServers            []json.RawMessage `json:"mcpServers,omitempty"`
	ReplayFrom            json.RawMessage   `json:"replayFrom,omitempty"`
}

// ResumeSessionResponse is the result of "session/resume".
type ResumeSessionResponse struct {
	ConfigOptions     []ConfigOption     `json:"configOptions,omitempty"`
	AvailableCommands []AvailableCommand `json:"availableCommands,omitempty"`
}

// CloseSessionRequest is the params of "session/close".
type CloseSessionRequest struct {
	SessionID string `json:"sessionId"`
}

// DeleteSessionRequest is the params of "session/delete".
type DeleteSessionRequest struct {
	SessionID string `json:"sessionId"`
}

// PromptRequest is the params of "session/prompt".
type PromptRequest struct {
	SessionID string         `json:"sessionId"`
	Prompt    []ContentBlock `json:"prompt"`
	// IdempotencyKey (ACP v2 Preview): a prompt whose key the session has
	// accepted already is not inserted again; the answer carries the
	// original messageId.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// PromptResponse is the result of "session/prompt": the inserted message.
type PromptResponse struct {
	MessageID string `json:"messageId"`
}

// CancelSessionNotification is the params of "session/cancel".
type CancelSessionNotification struct {
	SessionID string `json:"sessionId"`
}

// CancelTerminalRequest is the params of "terminal/cancel".
type CancelTerminalRequest struct {
	SessionID  string `json:"sessionId"`
	TerminalID string `json:"terminalId"`
}

// The shellagent extension methods (the schema reserves names that start
// with "_" for them); initialize advertises them in
// _meta.shellagent.methods.
const (
	MethodWriteTerminal  = "_shellagent/terminal/write"
	MethodResizeTerminal = "_shellagent/terminal/resize"
	MethodLookSession    = "_shellagent/session/look"
	MethodReadService    = "_shellagent/service/read"
)

// The _meta.shellagent.event of shellagent's notices that a client acts
// on.
const (
	// EventWaitingForInput: the terminal _meta.shellagent.terminalId
	// waits for input (once per wait).
	EventWaitingForInput = "waiting_for_input"
	// EventSessionTaken: another client took the session
	// (session/resume); it tells this client nothing more.
	EventSessionTaken = "session_taken"
	// EventSessionClosed: another client closed the session
	// (session/close) or deleted it (session/delete); it tells this
	// client nothing more but its work's final statuses.
	EventSessionClosed = "session_closed"
)

// LookSessionRequest is the params of "_shellagent/session/look": Command
// is a slash command that only reads (/ps, /tail, /status, /logs), to be
// answered in the live session SessionID without taking it from the
// client that has it.
type LookSessionRequest struct {
	SessionID string `json:"sessionId"`
	Command   string `json:"command"`
}

// LookSessionResponse is the result of "_shellagent/session/look": Text
// is what the command would have said in an agent_message.
type LookSessionResponse struct {
	Text string `json:"text"`
}

// ReadServiceRequest is the params of "_shellagent/service/read": the
// output of service Name of the live session SessionID's stack, read
// without taking the session from the client that has it. Without
// TerminalID it reads the latest run from the start of its last Lines
// lines (0: from its end); with it, that run from Offset (or, if the
// session no longer keeps that run, the latest from its start).
type ReadServiceRequest struct {
	SessionID  string `json:"sessionId"`
	Name       string `json:"name"`
	TerminalID string `json:"terminalId,omitempty"`
	Offset     int64  `json:"offset,omitempty"`
	Lines      int    `json:"lines,omitempty"`
}

// ReadServiceResponse is the result of "_shellagent/service/read": Data
// is the base64 of the output of a run of the service, in terminal
// TerminalID, from byte Offset (counted from the terminal's first byte:
// more than asked when the terminal no longer holds the bytes between) to
// Next, where the following read starts. Once the run's command has ended
// and Next is its last byte, Ended says how (as /ps does), and
// NextTerminalID is the terminal of the run that followed it, if the
// session keeps one. A service that has not run yet has no TerminalID.
type ReadServiceResponse struct {
	TerminalID     string `json:"terminalId"`
	Offset         int64  `json:"offset"`
	Next           int64  `json:"next"`
	Data           string `json:"data"`
	Ended          string `json:"ended,omitempty"`
	NextTerminalID string `json:"nextTerminalId,omitempty"`
}

// WriteTerminalRequest is the params of "_shellagent/terminal/write": Data
// is the base64 of bytes to write to the terminal's input, as typing
// would.
type WriteTerminalRequest struct {
	SessionID  string `json:"sessionId"`
	TerminalID string `json:"terminalId"`
	Data       string `json:"data"`

	bytes []byte // Data decoded, by Validate
}

// Bytes returns the decoded Data of a request that passed Validate.
func (p *WriteTerminalRequest) Bytes() []byte { return p.bytes }

// ResizeTerminalRequest is the params of "_shellagent/terminal/resize".
type ResizeTerminalRequest struct {
	SessionID  string        `json:"sessionId"`
	TerminalID string        `json:"terminalId"`
	Size       *TerminalSize `json:"size"`
}

// CancelToolCallRequest is the params of "tool_call/cancel".
type CancelToolCallRequest struct {
	SessionID  string `json:"sessionId"`
	ToolCallID string `json:"toolCallId"`
}

// SetConfigOptionRequest is the params of "session/set_config_option".
type SetConfigOptionRequest struct {
	SessionID string          `json:"sessionId"`
	ConfigID  string          `json:"configId"`
	Type      string          `json:"type"`
	Value     json.RawMessage `json:"value"`
}

// SetConfigOptionResponse is the result of "session/set_config_option".
type SetConfigOptionResponse struct {
	ConfigOptions []ConfigOption `json:"configOptions"`
}

// ConfigOption is a select-type session setting with its current value.
type ConfigOption struct {
	Type         string         `json:"type"` // "select"
	ConfigID     string         `json:"configId"`
	Name         string         `json:"name"`
	Description  string         `json:"description,omitempty"`
	CurrentValue string         `json:"currentValue"`
	Options      []ConfigChoice `json:"options"`
}

// ConfigChoice is one value of a select option.
type ConfigChoice struct {
	Value       string `json:"value"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// AvailableCommand is a slash command the client may offer.
type AvailableCommand struct {
	Type        string        `json:"type"` // "command"
	Name        string        `json:"name"` // without the leading "/"
	Description string        `json:"description"`
	Input       *CommandInput `json:"input,omitempty"`
}

// CommandInput says a command takes free text after its name.
type CommandInput struct {
	Type string `json:"type"` // "text"
	Hint string `json:"hint"`
}

// ContentBlock is a prompt or message content block. Only text and
// resource_link are interpreted; Raw keeps the block as the client sent it.
type ContentBlock struct {
	Type string          `json:"type"`
	Text string          `json:"text,omitempty"`
	URI  string          `json:"uri,omitempty"`
	Name string          `json:"name,omitempty"`
	Raw  json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the raw block besides the fields shellagent reads.
// It accepts any JSON value: the request's validation then names what is
// wrong with the block (see checkBlock), and the fields are left empty.
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	type plain ContentBlock
	var p plain
	if json.Unmarshal(data, &p) != nil {
		p = plain{}
	}
	*b = ContentBlock(p)
	b.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// MarshalJSON writes the block as received, or a text block.
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	if b.Raw != nil {
		return b.Raw, nil
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{"text", b.Text})
}

// TextBlock returns a text content block.
func TextBlock(s string) ContentBlock { return ContentBlock{Type: "text", Text: s} }

// Session updates. Each has the sessionUpdate discriminator set by its
// constructor-free literal: use the Kind constants.
const (
	KindUserMessage    = "user_message"
	KindAgentMessage   = "agent_message"
	KindState          = "state_update"
	KindToolCall       = "tool_call_update"
	KindTerminal       = "terminal_update"
	KindTerminalOutput = "terminal_output_chunk"
	KindNotice         = "notice"
)

// Update is the update of a session/update notification: one of
// *Message, *StateUpdate, *ToolCallUpdate, *TerminalUpdate and *Notice,
// and nothing else (the set is closed by an unexported method). Code that
// switches on an Update covers those five; Variants lists them for the
// tests that check it.
type Update interface{ isUpdate() }

func (*Message) isUpdate()        {}
func (*StateUpdate) isUpdate()    {}
func (*ToolCallUpdate) isUpdate() {}
func (*TerminalUpdate) isUpdate() {}
func (*Notice) isUpdate()         {}

// Variants returns one empty value of each Update type. Tests use it to
// check that a switch over updates forgets none.
func Variants() []Update {
	return []Update{&Message{}, &StateUpdate{}, &ToolCallUpdate{}, &TerminalUpdate{}, &Notice{}}
}

// Message is a user_message or agent_message update.
type Message struct {
	SessionUpdate string         `json:"sessionUpdate"`
	MessageID     string         `json:"messageId"`
	Content       []ContentBlock `json:"content"`
}

// States and stop reasons of a state_update.
const (
	StateRunning        = "running"
	StateIdle           = "idle"
	StateRequiresAction = "requires_action"

	StopEndTurn   = "end_turn"
	StopCancelled = "cancelled"
	StopError     = "error"
)

// StateUpdate is a snapshot of foreground state and background work.
type StateUpdate struct {
	SessionUpdate string `json:"sessionUpdate"`
	State         string `json:"state"`
	StopReason    string `json:"stopReason,omitempty"`
	// Background is always sent: nil marshals as [].
	Background Background `json:"background"`
	// Error is the failure that ended foreground work, with StopError.
	Error *Error `json:"error,omitempty"`
	// Meta is the update's _meta.
	Meta map[string]any `json:"_meta,omitempty"`
}

// stateUpdate makes a StateUpdate, and a type that embeds one, a state
// snapshot (StateOf).
func (u *StateUpdate) stateUpdate() *StateUpdate { return u }

// StateOf returns the snapshot of foreground state and background work
// that u reports, or nil if it reports none: u itself if it is a
// *StateUpdate, or the StateUpdate it embeds. An Update that embeds one
// is the client developers' kit's (package scenario): a snapshot sent as
// it marshals itself (with its list left out, or a malformed one), which
// a connection queues as the snapshot it embeds.
func StateOf(u Update) *StateUpdate {
	if s, ok := u.(interface{ stateUpdate() *StateUpdate }); ok {
		return s.stateUpdate()
	}
	return nil
}

// Background is the background list of a state_update.
type Background []BackgroundItem

// MarshalJSON writes [] for an empty list: an omitted list means "not
// reported", which is not what an empty one means.
func (b Background) MarshalJSON() ([]byte, error) {
	if b == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]BackgroundItem(b))
}

// BackgroundItem references one piece of background work.
type BackgroundItem struct {
	Type       string `json:"type"` // "terminal" or "tool_call"
	TerminalID string `json:"terminalId,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
}

// Capabilities is a nullable patch: nil leaves the capabilities unchanged,
// CapsNone clears them, CapsCancel advertises cancellation.
type Capabilities = json.RawMessage

// Capability patches.
var (
	CapsCancel = Capabilities(`{"cancel":{}}`)
	CapsNone   = Capabilities(`null`)
)

// Tool call statuses.
const (
	StatusPending    = "pending"
	StatusInProgress = "in_progress"
	StatusPaused     = "paused"
	StatusCompleted  = "completed"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// FinalStatus reports whether a tool call status is final (completed,
// failed or cancelled): no status follows it.
func FinalStatus(status string) bool {
	return status == StatusCompleted || status == StatusFailed || status == StatusCancelled
}

// ToolCallUpdate creates or patches a tool call; empty fields are omitted
// (left unchanged).
type ToolCallUpdate struct {
	SessionUpdate string            `json:"sessionUpdate"`
	ToolCallID    string            `json:"toolCallId"`
	Title         string            `json:"title,omitempty"`
	Kind          string            `json:"kind,omitempty"`
	Status        string            `json:"status,omitempty"`
	Content       []ToolCallContent `json:"content,omitempty"`
	RawInput      any               `json:"rawInput,omitempty"`
	RawOutput     any               `json:"rawOutput,omitempty"`
	Capabilities  Capabilities      `json:"capabilities,omitempty"`
}

// ToolCallContent is a tool call content item: a terminal reference or a
// content block.
type ToolCallContent struct {
	Type       string        `json:"type"` // "terminal" or "content"
	TerminalID string        `json:"terminalId,omitempty"`
	Content    *ContentBlock `json:"content,omitempty"`
}

// TerminalContent references a terminal from tool call content.
func TerminalContent(id string) ToolCallContent {
	return ToolCallContent{Type: "terminal", TerminalID: id}
}

// TextContent is a text block in tool call content.
func TextContent(s string) ToolCallContent {
	b := TextBlock(s)
	return ToolCallContent{Type: "content", Content: &b}
}

// TerminalSize is a terminal size in cells.
type TerminalSize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// ExitStatus is how a terminal's process ended. Its presence marks the
// terminal as exited.
type ExitStatus struct {
	ExitCode *int   `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
	// Meta is the status's _meta: shellagent's "left", the pids of the
	// processes a SIGKILL had not ended when the terminal was reported
	// ended without them (docs/terminals.md).
	Meta map[string]any `json:"_meta,omitempty"`
}

// TerminalUpdate creates or patches a terminal; empty fields are omitted.
// Its output (streamed chunks, or the output field of a replacement) is
// the connection's business: send it with protocol.Client.UpdateTerminal.
type TerminalUpdate struct {
	SessionUpdate string        `json:"sessionUpdate"`
	TerminalID    string        `json:"terminalId"`
	Command       string        `json:"command,omitempty"`
	Cwd           string        `json:"cwd,omitempty"`
	Size          *TerminalSize `json:"size,omitempty"`
	ExitStatus    *ExitStatus   `json:"exitStatus,omitempty"`
	Capabilities  Capabilities  `json:"capabilities,omitempty"`
}

// Notice severities.
const (
	NoticeInfo    = "info"
	NoticeWarning = "warning"
	NoticeError   = "error"
)

// Notice is fire-and-forget information for the user: a live event, not
// part of the session's history (a replay does not repeat it), that a
// client may ignore. Title is plain text that stands alone and must not
// be empty.
type Notice struct {
	SessionUpdate string         `json:"sessionUpdate"` // KindNotice
	Severity      string         `json:"severity"`
	Title         string         `json:"title"`
	Description   string         `json:"description,omitempty"`
	Meta          map[string]any `json:"_meta,omitempty"`
}

// PermissionRequest is the params of "session/request_permission".
type PermissionRequest struct {
	SessionID   string             `json:"sessionId"`
	Title       string             `json:"title"`
	Description string             `json:"description,omitempty"`
	Subject     *PermissionSubject `json:"subject,omitempty"`
	Options     []PermissionOption `json:"options"`
}

// PermissionSubject says what a permission request is for: a command.
type PermissionSubject struct {
	Type       string `json:"type"` // "command"
	Command    string `json:"command"`
	Cwd        string `json:"cwd"`
	ToolCallID string `json:"toolCallId,omitempty"`
	TerminalID string `json:"terminalId,omitempty"`
}

// PermissionOption is one answer the user may choose.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once, reject_once, ...
}

// PermissionResponse is the result of "session/request_permission".
type PermissionResponse struct {
	Outcome struct {
		Outcome  string `json:"outcome"` // "selected" or "cancelled"
		OptionID string `json:"optionId,omitempty"`
	} `json:"outcome"`
}
