package v1front

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"shellagent/acp"
)

// ACP v1 wire types (testdata/acp/schema.v1.json), for the v1 front: only
// what shellagent reads or writes. Where v1 and v2 agree (session/list,
// session/close, session/cancel, the params of session/new,
// session/resume and session/prompt), the v2 types serve both.

// ProtocolVersion is ACP v1, the version the front serves.
const ProtocolVersion = 1

// v1InitializeRequest is the params of a v1 "initialize".
type v1InitializeRequest struct {
	ProtocolVersion    *uint16             `json:"protocolVersion"`
	ClientCapabilities json.RawMessage     `json:"clientCapabilities,omitempty"`
	ClientInfo         *acp.Implementation `json:"clientInfo,omitempty"`
}

// terminalOutput reports whether the client capabilities advertise
// _meta.terminal_output: true, the convention under which Zed shows an
// agent's own terminals (see v1Encoding). Like the schema's
// x-deserialize-default-on-error, a malformed value means false.
func (p *v1InitializeRequest) terminalOutput() bool {
	var caps struct {
		Meta struct {
			TerminalOutput json.RawMessage `json:"terminal_output"`
		} `json:"_meta"`
	}
	if json.Unmarshal(p.ClientCapabilities, &caps) != nil {
		return false
	}
	return string(caps.Meta.TerminalOutput) == "true"
}

// v1InitializeResponse is the result of a v1 "initialize".
type v1InitializeResponse struct {
	ProtocolVersion   int                 `json:"protocolVersion"`
	AgentCapabilities v1AgentCapabilities `json:"agentCapabilities"`
	AuthMethods       []struct{}          `json:"authMethods"` // always []
	AgentInfo         *acp.Implementation `json:"agentInfo,omitempty"`
	Meta              map[string]any      `json:"_meta,omitempty"` // as the Agent answered for v2
}

// v1AgentCapabilities says what the agent serves over v1.
type v1AgentCapabilities struct {
	LoadSession         bool                  `json:"loadSession"`
	PromptCapabilities  v1PromptCapabilities  `json:"promptCapabilities"`
	McpCapabilities     v1McpCapabilities     `json:"mcpCapabilities"`
	SessionCapabilities v1SessionCapabilities `json:"sessionCapabilities"`
}

// v1PromptCapabilities: text and resource_link blocks only (the baseline).
type v1PromptCapabilities struct {
	Image           bool `json:"image"`
	Audio           bool `json:"audio"`
	EmbeddedContext bool `json:"embeddedContext"`
}

// v1McpCapabilities: shellagent connects to no MCP server.
type v1McpCapabilities struct {
	HTTP bool `json:"http"`
	SSE  bool `json:"sse"`
}

// v1SessionCapabilities advertises the optional session methods served.
type v1SessionCapabilities struct {
	List   *struct{} `json:"list,omitempty"`
	Resume *struct{} `json:"resume,omitempty"`
	Close  *struct{} `json:"close,omitempty"`
}

// v1ConfigOption is a v1 SessionConfigOption of type select.
type v1ConfigOption struct {
	Type         string             `json:"type"` // "select"
	ID           string             `json:"id"`
	Name         string             `json:"name"`
	Description  string             `json:"description,omitempty"`
	CurrentValue string             `json:"currentValue"`
	Options      []acp.ConfigChoice `json:"options"`
}

func v1ConfigOptions(opts []acp.ConfigOption) []v1ConfigOption {
	out := make([]v1ConfigOption, len(opts))
	for i, o := range opts {
		out[i] = v1ConfigOption{Type: o.Type, ID: o.ConfigID, Name: o.Name, Description: o.Description, CurrentValue: o.CurrentValue, Options: o.Options}
	}
	return out
}

// v1NewSessionResponse is the result of a v1 "session/new".
type v1NewSessionResponse struct {
	SessionID     string           `json:"sessionId"`
	ConfigOptions []v1ConfigOption `json:"configOptions,omitempty"`
}

// v1ResumeSessionResponse is the result of a v1 "session/resume".
type v1ResumeSessionResponse struct {
	ConfigOptions []v1ConfigOption `json:"configOptions,omitempty"`
}

// v1SetConfigOptionResponse is the result of a v1
// "session/set_config_option".
type v1SetConfigOptionResponse struct {
	ConfigOptions []v1ConfigOption `json:"configOptions"`
}

// v1PromptResponse is the result of a v1 "session/prompt": sent when the
// turn ends.
type v1PromptResponse struct {
	StopReason string `json:"stopReason"`
}

// v1AvailableCommands is an available_commands_update.
type v1AvailableCommands struct {
	SessionUpdate     string               `json:"sessionUpdate"`
	AvailableCommands []v1AvailableCommand `json:"availableCommands"`
}

// v1AvailableCommand is a slash command as v1 describes it.
type v1AvailableCommand struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Input       *v1CommandInput `json:"input,omitempty"`
}

// v1CommandInput says a command takes the text after its name.
type v1CommandInput struct {
	Hint string `json:"hint"`
}

func v1Commands(cmds []acp.AvailableCommand) *v1AvailableCommands {
	u := &v1AvailableCommands{SessionUpdate: "available_commands_update", AvailableCommands: make([]v1AvailableCommand, len(cmds))}
	for i, c := range cmds {
		u.AvailableCommands[i] = v1AvailableCommand{Name: c.Name, Description: c.Description}
		if c.Input != nil {
			u.AvailableCommands[i].Input = &v1CommandInput{Hint: c.Input.Hint}
		}
	}
	return u
}

// v1ContentChunk is an agent_message_chunk.
type v1ContentChunk struct {
	SessionUpdate string           `json:"sessionUpdate"`
	Content       acp.ContentBlock `json:"content"`
	MessageID     string           `json:"messageId,omitempty"`
}

// v1ToolCall is a tool_call (which creates or, sent again, replaces a
// tool call) or a tool_call_update (which patches one): the members of a
// tool call after the session update's kind.
type v1ToolCall struct {
	SessionUpdate string `json:"sessionUpdate"` // "tool_call" or "tool_call_update"
	v1ToolCallUpdate
}

// v1ToolCallUpdate is a v1 ToolCallUpdate: what a permission request says
// of its tool call (toolCall), and the members of a tool_call or
// tool_call_update (v1ToolCall). Empty fields are omitted (left
// unchanged).
type v1ToolCallUpdate struct {
	ToolCallID string                `json:"toolCallId"`
	Title      string                `json:"title,omitempty"`
	Kind       string                `json:"kind,omitempty"`
	Status     string                `json:"status,omitempty"`
	Content    []acp.ToolCallContent `json:"content,omitempty"`
	RawInput   any                   `json:"rawInput,omitempty"`
	RawOutput  any                   `json:"rawOutput,omitempty"`
	Meta       *v1TerminalMeta       `json:"_meta,omitempty"`
}

// v1TerminalMeta is the _meta by which a tool call shows one of the
// agent's own terminals to a client that advertised terminal_output.
type v1TerminalMeta struct {
	Info *v1TerminalInfo `json:"terminal_info,omitempty"`
	Exit *v1TerminalExit `json:"terminal_exit,omitempty"`
}

// v1TerminalInfo introduces a terminal; read only from a tool_call.
type v1TerminalInfo struct {
	TerminalID string `json:"terminal_id"`
	Cwd        string `json:"cwd,omitempty"`
}

// v1TerminalExit ends a terminal.
type v1TerminalExit struct {
	TerminalID string  `json:"terminal_id"`
	ExitCode   *int    `json:"exit_code"`
	Signal     *string `json:"signal"`
}

// v1Status maps a v2 tool call status onto v1's four: v1 has no
// cancelled, so a cancelled tool call failed (its content says why), and
// no paused, so a paused one is still in progress, as v2's schema tells a
// client to treat any status it does not know.
func v1Status(s string) string {
	switch s {
	case "", acp.StatusPending, acp.StatusInProgress, acp.StatusCompleted, acp.StatusFailed:
		return s
	case acp.StatusCancelled:
		return acp.StatusFailed
	}
	// paused, and any status v1 does not have: v2's schema says a client
	// treats a status it does not know as still in progress.
	return acp.StatusInProgress
}

// v1StopReasons are the stop reasons of a v1 session/prompt response.
var v1StopReasons = map[string]bool{
	acp.StopEndTurn: true, "max_tokens": true, "max_turn_requests": true, "refusal": true, acp.StopCancelled: true,
}

// v1PermissionRequest is the params of a v1 session/request_permission.
type v1PermissionRequest struct {
	SessionID string                 `json:"sessionId"`
	ToolCall  v1ToolCallUpdate       `json:"toolCall"`
	Options   []acp.PermissionOption `json:"options"`
}

// v1Permission reshapes a permission request for a v1 client: the tool
// call it is about takes the place of the subject.
func v1Permission(p *acp.PermissionRequest) *v1PermissionRequest {
	out := &v1PermissionRequest{SessionID: p.SessionID, Options: p.Options}
	out.ToolCall.Title = p.Title
	if s := p.Subject; s != nil {
		// The same title as the tool call the request is about.
		out.ToolCall.ToolCallID, out.ToolCall.Title = s.ToolCallID, s.Command
		out.ToolCall.Kind = "execute"
		out.ToolCall.RawInput = map[string]string{"command": s.Command, "cwd": s.Cwd}
	}
	if p.Description != "" {
		out.ToolCall.Content = []acp.ToolCallContent{acp.TextContent(p.Description)}
	}
	return out
}

// v1UserChunks returns a user message as v1 user_message_chunks, one per
// content block, for a replay (v1 clients show the prompts they send
// themselves, so live user messages are not echoed).
func v1UserChunks(m *acp.Message) []*v1ContentChunk {
	out := make([]*v1ContentChunk, len(m.Content))
	for i, b := range m.Content {
		out[i] = &v1ContentChunk{SessionUpdate: "user_message_chunk", Content: b, MessageID: m.MessageID}
	}
	return out
}

// v1ExitText is what a client without terminal_output reads when a
// terminal whose tool call completed earlier, when it left the
// foreground, exits: the terminal, its command and how it ended. (v1 has
// no other way to tell it: the tool call is final already.)
func v1ExitText(terminal, command string, es *acp.ExitStatus) string {
	how := "exit status unknown"
	switch {
	case es.Signal != "" && es.ExitCode != nil:
		how = fmt.Sprintf("signal %s, exit %d", es.Signal, *es.ExitCode)
	case es.Signal != "":
		how = "signal " + es.Signal
	case es.ExitCode != nil:
		how = "exit " + strconv.Itoa(*es.ExitCode)
	}
	return fmt.Sprintf("%s (%s) ended: %s.", terminal, command, how)
}

// v1DetachText is what a v1 client reads when a command leaves the
// foreground: v1 has no background list, so the text names the terminal
// and the slash commands that reach it. why is the supervisor's reason,
// whose own pointer to terminal/cancel (a v2 method) is dropped.
func v1DetachText(why, terminal string) string {
	cause, _, _ := strings.Cut(why, " It runs on in terminal ")
	cause = strings.TrimSuffix(strings.TrimSpace(cause), ".")
	cause, _, _ = strings.Cut(cause, ": moved to the background")
	switch cause {
	case "Moved to the background by /bg":
		cause = "Detached by /bg"
	case "The shell returned; processes it started keep running in the background":
		cause = "The shell returned while processes it started run on"
	case "Started in the background":
		cause = "Started by /bg"
	}
	note := "moved to the background as " + terminal + "; /ps lists it, /stop " + terminal + " stops it."
	if cause == "" {
		return "M" + note[1:]
	}
	return cause + ": " + note
}
