package replay

import (
	"encoding/json"
	"fmt"
)

// kind is what a line is as a JSON-RPC message.
type kind int

const (
	malformed    kind = iota // not JSON
	other                    // JSON, but not a request, notification or response
	request                  // an object with a string method and an id
	notification             // an object with a string method and no id
	response                 // an object with an id and no method
)

// A message is a line classified. Lines are classified by their shape
// only, so that a request the agent refuses (a bad jsonrpc, say) is still
// a request whose id is the client's.
type message struct {
	text   []byte // the line
	v      *value // nil if malformed
	kind   kind
	method string // requests and notifications
	id     *value // requests and responses
}

// classify classifies a line.
func classify(text []byte) message {
	v, err := parseValue(text)
	if err != nil {
		return message{text: text, kind: malformed}
	}
	m := message{text: text, v: v, kind: other}
	method, id := v.get("method"), v.get("id")
	if v.kind == opaque && text[0] == '{' {
		method, id = envelope(text)
	} else if v.kind != '{' {
		return m
	}
	switch {
	case method != nil && method.kind == '"':
		m.method, m.id, m.kind = method.str, id, notification
		if id != nil {
			m.kind = request
		}
	case method == nil && id != nil:
		m.id, m.kind = id, response
	}
	return m
}

// sameCall reports whether m is the message the transcript has in w's
// place, its contents aside: the same kind, the same method, or for a
// response an answer to the same request.
func sameCall(w, m message) bool {
	if w.kind != m.kind || w.method != m.method {
		return false
	}
	return w.kind != response || sameScalar(w.id.append(nil), m.id.append(nil))
}

// String describes m for a report: "a session/prompt request".
func (m message) String() string {
	switch m.kind {
	case request:
		return fmt.Sprintf("a %s request", m.method)
	case notification:
		return fmt.Sprintf("a %s notification", m.method)
	case response:
		return fmt.Sprintf("a response to request %s", m.id)
	case other:
		return "JSON that is not a JSON-RPC message: " + m.v.String()
	}
	return "a line that is not JSON: " + quote(string(m.text))
}

// envelope returns the method and id of a message too big for a tree.
func envelope(text []byte) (method, id *value) {
	var env struct {
		Method json.RawMessage `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(text, &env) != nil {
		return nil, nil
	}
	if env.Method != nil {
		method, _ = parseValue(env.Method)
	}
	if env.ID != nil {
		id, _ = parseValue(env.ID)
	}
	return method, id
}
