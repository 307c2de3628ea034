package lineclient

import (
	"encoding/json"
	"time"

	"shellagent/acp"
	"shellagent/internal/clientview"
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

// sessionNotification is the params of session/update; its update is
// read as a client reads it (clientview.Update).
type sessionNotification struct {
	SessionID string            `json:"sessionId"`
	Update    clientview.Update `json:"update"`
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
