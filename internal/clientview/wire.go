package clientview

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// An Update is the update of a session/update notification as far as a
// client reads it. Pointer and raw fields tell omitted from empty where
// the protocol gives that a meaning.
type Update struct {
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
	Output     *TerminalOutput `json:"output"`
	ExitStatus *ExitStatus     `json:"exitStatus"`

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

// Chunk returns the bytes of a terminal_output_chunk: its data decoded;
// an error names the terminal.
func (u *Update) Chunk() ([]byte, error) {
	return decode(u.TerminalID, u.Data)
}

// TerminalOutput is a terminal_update's output: a replacement snapshot of
// the terminal's output, and how many bytes the agent dropped before it
// (_meta.shellagent.droppedBytes).
type TerminalOutput struct {
	Data string `json:"data"`
	Meta struct {
		Shellagent struct {
			DroppedBytes int64 `json:"droppedBytes"`
		} `json:"shellagent"`
	} `json:"_meta"`
}

// Dropped returns how many bytes of output the agent dropped before the
// snapshot; the terminal's output goes on from the snapshot's end.
func (o *TerminalOutput) Dropped() int64 { return o.Meta.Shellagent.DroppedBytes }

// Decode returns the snapshot's bytes; an error names the terminal.
func (o *TerminalOutput) Decode(terminalID string) ([]byte, error) {
	return decode(terminalID, o.Data)
}

// decode decodes a terminal's base64 output.
func decode(terminalID, data string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("%s: output that is not base64: %w", terminalID, err)
	}
	return b, nil
}

// ExitStatus is how a terminal's process ended; an empty one is an exit
// with no known status.
type ExitStatus struct {
	ExitCode *int   `json:"exitCode"`
	Signal   string `json:"signal"`
}

// String says how the process ended: "exit 1", "signal SIGTERM",
// "exit status unknown".
func (e *ExitStatus) String() string {
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

// An Item is an entry of a state_update's background list.
type Item struct {
	Type       string `json:"type"`
	TerminalID string `json:"terminalId"`
	ToolCallID string `json:"toolCallId"`
	SessionID  string `json:"sessionId"`
}

// ID is what the item references: a terminal, a tool call or a session;
// for an item of a type the client does not know, the type.
func (it Item) ID() string {
	switch it.Type {
	case "terminal":
		return it.TerminalID
	case "tool_call":
		return it.ToolCallID
	case "subagent":
		return it.SessionID
	}
	return it.Type
}

// DecodeBackground reads a background list. reported is false when the
// list is omitted, null or malformed: background work is then unknown.
// Items of unknown types are kept: they still count as work.
func DecodeBackground(raw json.RawMessage) (items []Item, reported bool) {
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

// ContentText returns the text of a content block, an array of content
// blocks, or tool call content items that wrap content blocks.
func ContentText(raw json.RawMessage) string {
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
			buf.WriteString(ContentText(b.Content))
		}
	}
	return buf.String()
}

// TerminalRefs returns the terminal ids a tool call's content references.
func TerminalRefs(raw json.RawMessage) []string {
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

// Final reports whether a tool call status is final: completed, failed
// or cancelled.
func Final(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}
