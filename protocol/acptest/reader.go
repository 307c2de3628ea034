package acptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// The reader is the Client's goroutine that reads the agent's stdout: it
// inspects each line (decoding and validating it against the schemas,
// matching a response to its request), records it in the Client's
// transcript, and dispatches it. It alone uses the schemas' memo.
type reader struct {
	c       *Client
	out     io.Reader
	done    chan struct{} // closed when the loop has returned
	schemas *schemaSet
	memo    map[string]string // validation results; see memoValidate
}

// loop reads the agent's stdout line by line until EOF or an error.
func (r *reader) loop() {
	c := r.c
	defer close(r.done)
	br := bufio.NewReaderSize(r.out, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			at := time.Now()
			if line[len(line)-1] == '\n' {
				r.line(line[:len(line)-1], at, true)
			} else {
				r.line(line, at, false)
			}
		}
		if err != nil {
			c.mu.Lock()
			if err != io.EOF && !errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, os.ErrClosed) {
				c.readErr = err
			}
			c.eof = true
			r.broadcast()
			c.mu.Unlock()
			return
		}
	}
}

// wait waits up to d for the loop to end, and reports whether it did.
func (r *reader) wait(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-r.done:
		return true
	case <-timer.C:
		return false
	}
}

// broadcast wakes every waiter. c.mu must be held.
func (r *reader) broadcast() {
	close(r.c.changed)
	r.c.changed = make(chan struct{})
}

// line inspects one line, appends it to the transcript, reconstructs
// terminal output, reports violations and answers permission requests.
func (r *reader) line(line []byte, at time.Time, terminated bool) {
	c := r.c
	m := &Msg{At: at, Raw: line}
	problems := r.inspect(m, line)
	if !terminated {
		problems = append(problems, "the last line is not terminated by a newline")
	}

	c.mu.Lock()
	m.Seq = len(c.msgs)
	m.invalid = len(problems) > 0
	problems = append(problems, c.terms.reconstruct(m, c.version)...)
	if c.dropChunks && m.Kind == "terminal_output_chunk" {
		m.Raw, m.Params = nil, nil
		delete(m.Update, "data")
	}
	var found []Violation
	for _, p := range problems {
		v := Violation{Rule: 0, Seq: m.Seq, SessionID: m.SessionID, Text: p}
		c.wire = append(c.wire, v)
		found = append(found, v)
	}
	c.msgs = append(c.msgs, m)
	r.broadcast()
	quiet := c.quiet
	c.mu.Unlock()

	if !quiet {
		for _, v := range found {
			if c.tolerated == nil || !c.tolerated(v) {
				c.t.Errorf("%s\n    line: %s", v, truncate(line, rawLimit))
			}
		}
	}
	if m.Method == "session/request_permission" && m.ID != nil && c.permission != nil && !quiet {
		if res := c.permission(*m); res != nil {
			c.Respond(m.ID, res)
		}
	}
}

// inspect decodes a line into m and returns what is wrong with it.
func (r *reader) inspect(m *Msg, line []byte) []string {
	if len(bytes.TrimSpace(line)) == 0 {
		return []string{"blank line"}
	}
	d, err := decodeLine(line)
	if err != nil {
		return []string{fmt.Sprintf("not a JSON value: %v", err)}
	}
	tree, fields := d.tree, d.fields
	obj, ok := tree.(map[string]any)
	if !ok {
		return []string{"not a JSON object"}
	}
	var problems []string
	version, _ := obj["jsonrpc"].(string)
	if version != "2.0" {
		problems = append(problems, fmt.Sprintf(`"jsonrpc" must be "2.0", got %s`, orMissing(fields["jsonrpc"])))
	}
	m.ID, m.Params, m.Result = fields["id"], fields["params"], fields["result"]
	if raw, ok := fields["method"]; ok {
		if m.Method, ok = obj["method"].(string); !ok || m.Method == "" {
			problems = append(problems, fmt.Sprintf(`"method" must be a non-empty string, got %s`, raw))
			return problems
		}
	}
	if raw := fields["error"]; raw != nil {
		m.Error = decodeError(raw)
	}

	var def string // the definition that value must match
	var value any
	switch {
	case m.Method != "" && m.ID != nil:
		def, value, problems = r.inspectRequest(m, obj, problems)
	case m.Method != "":
		def, value, problems = r.inspectNotification(m, obj, problems)
	default:
		def, value, problems = r.inspectResponse(m, obj, problems)
	}
	if version != "2.0" {
		return problems // the root schema would only repeat it
	}
	problems = r.validate(m, d, def, value, problems)
	if m.Method == "session/update" {
		// Only now: validation must see the numbers as they were written.
		params, _ := obj["params"].(map[string]any)
		if u, ok := params["update"].(map[string]any); ok {
			m.Update = plainNumbers(u).(map[string]any)
		}
	}
	return problems
}

// validate checks value against the definition def (if any) and, when
// nothing else is wrong with the line, the whole message against the root
// of the schema.
func (r *reader) validate(m *Msg, d decoded, def string, value any, problems []string) []string {
	if def != "" {
		if why := r.memoValidate(d, def, value); why != "" {
			return append(problems, fmt.Sprintf("schema: %s does not match #/$defs/%s: %s", describe(m), def, why))
		}
	}
	if len(problems) > 0 {
		return problems // the root schema would mostly repeat them
	}
	if why := r.memoValidate(d, "", d.tree); why != "" {
		problems = append(problems, fmt.Sprintf("schema: %s does not match the ACP v%d message schema: %s", describe(m), r.schemas.spec.version, why))
	}
	return problems
}

// memoMax bounds the validation memo.
const memoMax = 1024

// memoValidate is schemas.validate, memoized for lines with long strings
// (terminal output) by their elided form: since the schema constrains no
// string's contents (see stringFree), lines that differ only in long
// strings validate alike. Only the reader goroutine uses the memo.
func (r *reader) memoValidate(d decoded, def string, value any) string {
	if d.reduced == nil || !r.schemas.stringFree {
		return r.schemas.validate(def, value)
	}
	key := def + "\x00" + string(d.reduced)
	if why, ok := r.memo[key]; ok {
		return why
	}
	why := r.schemas.validate(def, value)
	if len(r.memo) >= memoMax {
		clear(r.memo)
	}
	r.memo[key] = why
	return why
}

// inspectRequest handles a request from the agent.
func (r *reader) inspectRequest(m *Msg, obj map[string]any, problems []string) (string, any, []string) {
	params, _ := obj["params"].(map[string]any)
	m.SessionID, _ = params["sessionId"].(string)
	if !validRequestID(obj["id"]) {
		// The root schema would take it for a notification with an extra member.
		problems = append(problems, fmt.Sprintf("request id must be an integer or a string, got %s", m.ID))
	}
	if m.Method != "session/request_permission" {
		return "", nil, append(problems, fmt.Sprintf("unexpected request %q from the agent", m.Method))
	}
	// Its params and a v1 toolCall (a ToolCallUpdate) have only the
	// members their definitions declare.
	def := r.schemas.defs["RequestPermissionRequest"]
	problems = append(problems, undeclared(def, params, "params")...)
	if def != nil {
		problems = append(problems, undeclared(def.Properties["toolCall"], params["toolCall"], "params.toolCall")...)
	}
	return "RequestPermissionRequest", obj["params"], problems
}

// inspectNotification handles a notification from the agent.
func (r *reader) inspectNotification(m *Msg, obj map[string]any, problems []string) (string, any, []string) {
	switch {
	case m.Method == "session/update":
		if params, ok := obj["params"].(map[string]any); ok {
			m.SessionID, _ = params["sessionId"].(string)
			if u, ok := params["update"].(map[string]any); ok {
				m.Kind, _ = u["sessionUpdate"].(string)
			}
		}
		return r.schemas.spec.update, obj["params"], problems
	case m.Method == "$/cancel_request":
		return "CancelRequestNotification", obj["params"], problems
	case strings.HasPrefix(m.Method, "$/"):
		return "", nil, problems
	default:
		return "", nil, append(problems, fmt.Sprintf("unexpected notification %q from the agent (only session/update is expected)", m.Method))
	}
}

// inspectResponse handles a response: it must answer a request the client
// sent, exactly once, with a result or an error.
func (r *reader) inspectResponse(m *Msg, obj map[string]any, problems []string) (string, any, []string) {
	_, hasResult := obj["result"]
	_, hasError := obj["error"]
	switch {
	case m.ID == nil:
		return "", nil, append(problems, "response without an id (and no method)")
	case hasResult && hasError:
		problems = append(problems, "response has both result and error")
	case !hasResult && !hasError:
		return "", nil, append(problems, "response has neither result nor error")
	}
	problems = append(problems, r.match(m, hasError)...)
	if hasError {
		return "Error", obj["error"], problems
	}
	if m.req != nil && m.req.method == "initialize" {
		problems = append(problems, r.negotiated(obj["result"])...)
	}
	if m.req != nil {
		if def, ok := r.schemas.spec.results[m.req.method]; ok {
			return def, obj["result"], problems
		}
	}
	return "", nil, problems
}

// negotiated follows the version a successful initialize answered with
// (result.protocolVersion): the client speaks it from this answer on, as
// the latest successful initialize is authoritative, so the answer and
// what follows are validated against its schema. A version with no
// schema leaves the client's as it was (the validation reports it).
func (r *reader) negotiated(result any) []string {
	res, _ := result.(map[string]any)
	n, _ := res["protocolVersion"].(json.Number)
	v, err := n.Int64()
	if err != nil || specs[int(v)] == nil || int(v) == r.schemas.spec.version {
		return nil
	}
	s, err := loadSchemas(int(v))
	if err != nil {
		return []string{err.Error()}
	}
	r.schemas, r.memo = s, make(map[string]string)
	r.c.mu.Lock()
	r.c.version = int(v)
	r.c.mu.Unlock()
	return nil
}

// match links a response to the request it answers.
func (r *reader) match(m *Msg, isError bool) []string {
	c := r.c
	if string(m.ID) == "null" {
		if isError && m.Error != nil && (m.Error.Code == -32700 || m.Error.Code == -32600) {
			return nil
		}
		return []string{"response with id null (allowed only for -32700 and -32600 errors)"}
	}
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	c.mu.Lock()
	defer c.mu.Unlock()
	req := c.requests[id]
	if err != nil || req == nil {
		return []string{fmt.Sprintf("response to id %s, which the client never sent", m.ID)}
	}
	m.ReqMethod = req.method
	if req.answered {
		return []string{fmt.Sprintf("second response to request %d (%s)", id, req.method)}
	}
	req.answered = true
	m.req = req
	return nil
}

// validRequestID reports whether a decoded id is a JSON-RPC request id
// allowed by ACP: an integer or a string, never null.
func validRequestID(id any) bool {
	switch v := id.(type) {
	case string:
		return true
	case json.Number:
		_, err := strconv.ParseInt(v.String(), 10, 64)
		return err == nil
	}
	return false
}

// describe names a message for schema failures.
func describe(m *Msg) string {
	switch {
	case m.Kind != "":
		return "session/update " + m.Kind
	case m.Method != "":
		return m.Method
	case m.Error != nil:
		return "the error response"
	case m.ReqMethod != "":
		return "the " + m.ReqMethod + " response"
	}
	return "the message"
}

// orMissing renders a raw field value, or "nothing" when it is absent.
func orMissing(raw json.RawMessage) string {
	if raw == nil {
		return "nothing"
	}
	return string(raw)
}

// decodeError decodes an error object leniently (the schema judges it).
func decodeError(raw json.RawMessage) *RPCError {
	var e struct {
		Code    json.Number     `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(raw, &e)              // lenient: what does not decode stays zero, and the schema says why
	code, _ := strconv.Atoi(e.Code.String()) // likewise
	return &RPCError{Code: code, Message: e.Message, Data: e.Data}
}

// plainNumbers replaces, in place, the json.Numbers of a decoded tree with
// float64s, as encoding/json decodes numbers into an any.
func plainNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64() // json.Number holds a valid number; float64 is what encoding/json would give
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = plainNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = plainNumbers(e)
		}
	}
	return v
}
