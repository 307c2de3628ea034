package acptest

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Msg is one line the agent wrote, as recorded in the transcript.
//
// A Msg is immutable once it is in the transcript; the Update map and the
// raw slices must not be modified by callers.
type Msg struct {
	Seq    int             // position in the transcript, from 0
	At     time.Time       // when the line was read
	Raw    json.RawMessage // the line, without its newline (nil for dropped output chunks, see WithoutRaw)
	ID     json.RawMessage // nil for notifications; "null" for id-null errors
	Method string          // for requests and notifications
	Params json.RawMessage // for requests and notifications
	Result json.RawMessage // for successful responses
	Error  *RPCError       // for error responses

	// ReqMethod is, for a response, the method of the client request it
	// answers ("" when the id matches no request the client sent).
	ReqMethod string

	// SessionID is params.sessionId of a session/update notification or of an
	// agent request that carries one.
	SessionID string
	// Kind is update.sessionUpdate of a session/update notification.
	Kind string
	// Update is the decoded update object of a session/update notification.
	// JSON numbers are float64.
	Update map[string]any

	req     *request // the request a response answers
	invalid bool     // the reader found something wrong with the line
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int
	Message string
	Data    json.RawMessage
}

// Error implements error.
func (e *RPCError) Error() string {
	if len(e.Data) > 0 && string(e.Data) != "null" {
		return fmt.Sprintf("jsonrpc error %d: %s (data %s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// Item is one entry of a state_update's background list.
type Item struct {
	Type string // "terminal", "tool_call", or another item type
	ID   string // terminalId, toolCallId, or sessionId (for "subagent")
}

// String renders the item as type:id.
func (it Item) String() string { return it.Type + ":" + it.ID }

// IsResponse reports whether m is a response (it has no method).
func (m *Msg) IsResponse() bool { return m.Method == "" && m.ID != nil }

// IsRequest reports whether m is a request from the agent.
func (m *Msg) IsRequest() bool { return m.Method != "" && m.ID != nil }

// IsNotification reports whether m is a notification.
func (m *Msg) IsNotification() bool { return m.Method != "" && m.ID == nil }

// str returns the string field k of the update, or "".
func (m *Msg) str(k string) string {
	s, _ := m.Update[k].(string)
	return s
}

// HasKey reports whether the update object has the key k, even with a null value.
func (m *Msg) HasKey(k string) bool {
	_, ok := m.Update[k]
	return ok
}

// State returns the state of a state_update ("" for other messages).
func (m *Msg) State() string {
	if m.Kind != "state_update" {
		return ""
	}
	return m.str("state")
}

// StopReason returns the stopReason of a state_update ("" when absent or null).
func (m *Msg) StopReason() string {
	if m.Kind != "state_update" {
		return ""
	}
	return m.str("stopReason")
}

// Background returns the background list of a state_update: nil when it is
// omitted, null or not an array, and a non-nil (possibly empty) slice
// otherwise.
func (m *Msg) Background() []Item {
	if m.Kind != "state_update" {
		return nil
	}
	arr, ok := m.Update["background"].([]any)
	if !ok {
		return nil
	}
	items := make([]Item, 0, len(arr))
	for _, v := range arr {
		obj, _ := v.(map[string]any)
		it := Item{}
		it.Type, _ = obj["type"].(string)
		for _, k := range []string{"terminalId", "toolCallId", "sessionId"} {
			if id, ok := obj[k].(string); ok {
				it.ID = id
				break
			}
		}
		items = append(items, it)
	}
	return items
}

// Probe returns the name of the shellagent scenario that sent this
// update to show a client one of its rules (_meta.shellagent.scenario),
// or "": such an update may bend an agent-side rule on purpose (see
// Client.Check).
func (m *Msg) Probe() string {
	meta, _ := m.Update["_meta"].(map[string]any)
	sa, _ := meta["shellagent"].(map[string]any)
	name, _ := sa["scenario"].(string)
	return name
}

// Meta returns the object at key in the update's _meta (as ACP v1 tool
// calls carry terminal_info, terminal_output and terminal_exit), or nil.
func (m *Msg) Meta(key string) map[string]any {
	meta, _ := m.Update["_meta"].(map[string]any)
	v, _ := meta[key].(map[string]any)
	return v
}

// TerminalID returns the update's terminalId ("" when absent).
func (m *Msg) TerminalID() string { return m.str("terminalId") }

// ToolCallID returns the update's toolCallId ("" when absent).
func (m *Msg) ToolCallID() string { return m.str("toolCallId") }

// Status returns the update's tool call status ("" when absent or null).
func (m *Msg) Status() string { return m.str("status") }

// ExitStatus returns the update's exitStatus object, or nil when it is
// absent or null.
func (m *Msg) ExitStatus() map[string]any {
	es, _ := m.Update["exitStatus"].(map[string]any)
	return es
}

// MessageID returns the update's messageId, or the messageId of a
// session/prompt result ("" when there is none).
func (m *Msg) MessageID() string {
	if m.Update != nil {
		return m.str("messageId")
	}
	if m.Result != nil {
		var r struct {
			MessageID string `json:"messageId"`
		}
		if json.Unmarshal(m.Result, &r) == nil {
			return r.MessageID
		}
	}
	return ""
}

// Text returns the concatenated text of the update's text content: the
// content block of a chunk, or the content array of a message or tool call.
func (m *Msg) Text() string {
	var sb strings.Builder
	switch c := m.Update["content"].(type) {
	case map[string]any:
		appendText(&sb, c)
	case []any:
		for _, b := range c {
			if obj, ok := b.(map[string]any); ok {
				appendText(&sb, obj)
			}
		}
	}
	return sb.String()
}

// appendText appends the text of a content block, or of the content block
// wrapped in a tool call's {"type":"content","content":{...}} item.
func appendText(sb *strings.Builder, block map[string]any) {
	if inner, ok := block["content"].(map[string]any); ok && block["type"] == "content" {
		block = inner
	}
	if t, ok := block["text"].(string); ok && block["type"] == "text" {
		sb.WriteString(t)
	}
}

// rawLimit bounds how much of a line failure messages and dumps show.
const rawLimit = 300

// String renders the message for failure output: the line, truncated.
func (m *Msg) String() string {
	if m.Raw != nil {
		return truncate(m.Raw, rawLimit)
	}
	if m.Kind != "" {
		return fmt.Sprintf("session/update %s %s terminal %s (line dropped by WithoutRaw)", m.SessionID, m.Kind, m.TerminalID())
	}
	return "(line dropped)"
}

// truncate returns b as a string of at most n bytes plus a size note.
func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return fmt.Sprintf("%s… (%d bytes)", b[:n], len(b))
}
