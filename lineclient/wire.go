package lineclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"shellagent/acp"
)

// message is one JSON-RPC 2.0 message in either direction.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *acp.Error      `json:"error,omitempty"`
}

func (m *message) isResponse() bool { return m.Method == "" && len(m.ID) > 0 }
func (m *message) isRequest() bool  { return m.Method != "" && len(m.ID) > 0 }

// Session update payloads, as far as the client reads them. Pointer and
// raw fields tell omitted from empty where the protocol gives that a
// meaning.
type sessionNotification struct {
	SessionID string `json:"sessionId"`
	Update    update `json:"update"`
}

type update struct {
	SessionUpdate string `json:"sessionUpdate"`

	// user_message, agent_message, *_chunk
	MessageID string          `json:"messageId"`
	Content   json.RawMessage `json:"content"`

	// state_update
	State      string          `json:"state"`
	StopReason *string         `json:"stopReason"`
	Background json.RawMessage `json:"background"`

	// terminal_update, terminal_output_chunk
	TerminalID string          `json:"terminalId"`
	Command    *string         `json:"command"`
	Data       string          `json:"data"`
	Output     *terminalOutput `json:"output"`
	ExitStatus *exitStatus     `json:"exitStatus"`

	// tool_call_update; Title for a notice too
	ToolCallID string  `json:"toolCallId"`
	Title      *string `json:"title"`
	Kind       *string `json:"kind"`
	Status     *string `json:"status"`

	// notice (and its title, above)
	Severity    string `json:"severity"`
	Description string `json:"description"`
	Meta        struct {
		Shellagent struct {
			TerminalID string `json:"terminalId"`
			Event      string `json:"event"`
		} `json:"shellagent"`
	} `json:"_meta"`
}

type terminalOutput struct {
	Data string `json:"data"`
	Meta struct {
		Shellagent struct {
			DroppedBytes int64 `json:"droppedBytes"`
		} `json:"shellagent"`
	} `json:"_meta"`
}

// exitStatus is how a terminal's process ended; an empty one is an exit
// with no known status.
type exitStatus struct {
	ExitCode *int   `json:"exitCode"`
	Signal   string `json:"signal"`
}

func (e *exitStatus) String() string {
	switch {
	case e.ExitCode != nil && e.Signal != "":
		return fmt.Sprintf("signal %s, exit %d", e.Signal, *e.ExitCode)
	case e.ExitCode != nil:
		return "exit " + strconv.Itoa(*e.ExitCode)
	case e.Signal != "":
		return "signal " + e.Signal
	}
	return "exit status unknown"
}

// bgItem is an entry of a state_update's background list.
type bgItem struct {
	Type       string `json:"type"`
	TerminalID string `json:"terminalId"`
	ToolCallID string `json:"toolCallId"`
	SessionID  string `json:"sessionId"`
}

// id is what the item references.
func (b bgItem) id() string {
	switch b.Type {
	case "terminal":
		return b.TerminalID
	case "tool_call":
		return b.ToolCallID
	case "subagent":
		return b.SessionID
	}
	return b.Type
}

// decodeBackground reads a background list. reported is false when the
// list is omitted, null or malformed: background work is then unknown.
// Items of unknown types are kept: they still count as work.
func decodeBackground(raw json.RawMessage) (items []bgItem, reported bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false
	}
	for _, it := range items {
		known := map[string]string{"terminal": it.TerminalID, "tool_call": it.ToolCallID, "subagent": it.SessionID}
		if id, ok := known[it.Type]; ok && id == "" {
			return nil, false // a damaged item of a known type: treat the list as unreported
		}
	}
	return items, true
}

// contentText returns the text of a content block, an array of content
// blocks, or tool call content items that wrap content blocks.
func contentText(raw json.RawMessage) string {
	type block struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		var one block
		if json.Unmarshal(raw, &one) != nil {
			return ""
		}
		blocks = []block{one}
	}
	var buf bytes.Buffer
	for _, b := range blocks {
		switch b.Type {
		case "text":
			buf.WriteString(b.Text)
		case "content":
			buf.WriteString(contentText(b.Content))
		}
	}
	return buf.String()
}

// terminalRefs returns the terminal ids a tool call's content references.
func terminalRefs(raw json.RawMessage) []string {
	var items []struct {
		Type       string `json:"type"`
		TerminalID string `json:"terminalId"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	var ids []string
	for _, it := range items {
		if it.Type == "terminal" && it.TerminalID != "" {
			ids = append(ids, it.TerminalID)
		}
	}
	return ids
}

// permissionRequest is the params of session/request_permission.
type permissionRequest struct {
	SessionID   string             `json:"sessionId"`
	Title       string             `json:"title"`
	Description *string            `json:"description"`
	Subject     *permissionSubject `json:"subject"`
	Options     []permissionOption `json:"options"`
}

type permissionSubject struct {
	Type       string `json:"type"`
	Command    string `json:"command"`
	Cwd        string `json:"cwd"`
	ToolCallID string `json:"toolCallId"`
	TerminalID string `json:"terminalId"`
	ToolCall   *struct {
		ToolCallID string `json:"toolCallId"`
	} `json:"toolCall"`
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// refs returns the ids of the work a permission subject references.
func (s *permissionSubject) refs() []string {
	if s == nil {
		return nil
	}
	var ids []string
	for _, id := range []string{s.ToolCallID, s.TerminalID} {
		if id != "" {
			ids = append(ids, id)
		}
	}
	if s.ToolCall != nil && s.ToolCall.ToolCallID != "" {
		ids = append(ids, s.ToolCall.ToolCallID)
	}
	return ids
}

// killGraceOf returns the kill grace that a list of config options gives
// as kill_grace's current value or, when the list does not say, set (the
// value the client set, "" for none).
func killGraceOf(options json.RawMessage, set string) (time.Duration, bool) {
	var list []struct {
		ConfigID     string `json:"configId"`
		CurrentValue string `json:"currentValue"`
	}
	value := set
	if json.Unmarshal(options, &list) == nil {
		for _, o := range list {
			if o.ConfigID == "kill_grace" {
				value = o.CurrentValue
			}
		}
	}
	d, err := time.ParseDuration(value)
	return d, err == nil && d >= 0
}
