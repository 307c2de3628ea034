package lineclient

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// handleInput handles a line of input or its end.
func (c *client) handleInput(ev inputEvent) {
	if ev.eof {
		if ev.err != nil {
			c.p.note(fmt.Sprintf("reading input: %v", ev.err))
		}
		c.quit()
		return
	}
	if c.cfg.Permissions == PermissionsAsk && len(c.perms) > 0 {
		c.answer(ev.line)
		return
	}
	line := strings.TrimSpace(ev.line)
	if line == "" {
		return
	}
	if !c.cfg.Interactive {
		c.p.text("> " + line)
	}
	c.prompt(line)
}

// prompt sends a line as a prompt. In script mode, the next line waits for
// its turn to end.
func (c *client) prompt(line string) {
	c.interrupts = 0
	c.lastLine = line
	params := map[string]any{
		"sessionId": c.sess.id,
		"prompt":    []map[string]string{{"type": "text", "text": line}},
	}
	var w *turnWait
	if !c.cfg.Interactive {
		w = &turnWait{}
		if id, ok := strings.CutPrefix(line, "/stop "); ok && c.commands["stop"] && c.sess.listed(strings.TrimSpace(id)) {
			w.stopID = strings.TrimSpace(id)
		}
		c.wait = w
	}
	id := c.request("session/prompt", params, func(m *message) {
		if m.Error != nil {
			c.p.note("prompt refused: " + m.Error.Error())
			if c.wait == w {
				c.wait = nil
			}
			return
		}
		if w == nil {
			return
		}
		var res struct {
			MessageID string `json:"messageId"`
		}
		_ = json.Unmarshal(m.Result, &res) // Safe: without an id, the turn end is awaited from here on.
		w.answered, w.respSeq, w.messageID = true, c.seq, res.MessageID
	})
	if w != nil {
		w.requestID = id
	}
}

// paceState moves a script on when a snapshot ends the awaited turn, and
// once a stopped item has left the list.
func (c *client) paceState(stopReason string) {
	w := c.wait
	if w == nil {
		return
	}
	if !w.ended && w.answered && c.sess.state == "idle" && stopReason != "" && c.seq > w.respSeq && c.seq > w.userSeq {
		w.ended = true
		if w.stopID != "" {
			c.stopTimer = time.After(stopWaitTimeout)
		}
	}
	if w.ended && (w.stopID == "" || !c.sess.listed(w.stopID)) {
		c.wait = nil
		c.stopTimer = nil
	}
}

// interrupt handles a Ctrl-C: the first sends session/cancel, the second
// closes the session, the third (while closing) gives up waiting.
func (c *client) interrupt() {
	switch c.phase {
	case starting:
		c.fail(fmt.Errorf("lineclient: interrupted while starting"))
		c.quit()
		return
	case closing:
		c.p.note("interrupted again: not waiting for the close")
		c.fail(fmt.Errorf("lineclient: interrupted while closing the session"))
		c.phase = finished
		return
	case finished:
		return
	}
	if c.cfg.Interactive {
		c.p.write([]byte("\n")) // the terminal echoed ^C where the cursor was
	}
	c.interrupts++
	if c.interrupts > 1 {
		c.quit()
		return
	}
	c.notify("session/cancel", map[string]string{"sessionId": c.sess.id})
	// Permission requests for the cancelled foreground work are answered
	// cancelled; those for listed work stay open.
	c.perms = slices.DeleteFunc(c.perms, func(p *permission) bool {
		if slices.ContainsFunc(p.req.Subject.refs(), c.sess.listed) {
			return false
		}
		c.cancelPermission(p)
		return true
	})
	c.p.note("session/cancel sent: the foreground command stops, background work runs on; Ctrl-C again closes the session")
}

// quit says what closing will stop, then closes the session.
func (c *client) quit() {
	if c.phase == closing || c.phase == finished {
		return
	}
	if c.sess == nil {
		c.phase = finished
		return
	}
	if warning := c.sess.closeWarning(); warning != "" {
		c.p.note(warning)
	}
	for _, p := range c.perms {
		c.cancelPermission(p)
	}
	c.perms = nil
	c.wait = nil
	c.phase = closing
	c.closeTimer = time.After(closeTimeout)
	c.request("session/close", map[string]string{"sessionId": c.sess.id}, func(m *message) {
		c.phase = finished
		if m.Error != nil {
			c.p.note("session/close failed: " + m.Error.Error())
			c.fail(fmt.Errorf("lineclient: session/close: %w", m.Error))
			return
		}
		for _, note := range c.sess.closed() {
			c.p.note(note)
		}
		c.p.note("session closed")
	})
}

// handleRequest answers a request from the agent.
func (c *client) handleRequest(m *message) {
	if m.Method != "session/request_permission" {
		c.send(&message{ID: m.ID, Error: &rpcError{Code: -32601, Message: "method not found: " + m.Method}})
		return
	}
	p := &permission{id: m.ID}
	if err := json.Unmarshal(m.Params, &p.req); err != nil || len(p.req.Options) == 0 {
		c.send(&message{ID: m.ID, Error: &rpcError{Code: -32602, Message: "session/request_permission: params need a title and options"}})
		return
	}
	c.p.note(describePermission(&p.req))
	switch c.cfg.Permissions {
	case PermissionsAllow:
		c.choose(p, "allow", "by --permissions allow")
	case PermissionsReject:
		c.choose(p, "reject", "by --permissions reject")
	default:
		c.perms = append(c.perms, p)
		c.p.note("answer with one of: " + optionNames(p.req.Options))
	}
}

// describePermission says what a permission request asks.
func describePermission(r *permissionRequest) string {
	text := "permission requested: " + r.Title
	if s := r.Subject; s != nil && s.Type == "command" {
		text += fmt.Sprintf(" (run %q in %s", s.Command, s.Cwd)
		if refs := s.refs(); len(refs) > 0 {
			text += " for " + strings.Join(refs, ", ")
		}
		text += ")"
	}
	return text
}

// optionNames lists the options of a request: "allow, reject".
func optionNames(opts []permissionOption) string {
	names := make([]string, len(opts))
	for i, o := range opts {
		names[i] = o.OptionID
	}
	return strings.Join(names, ", ")
}

// answer takes an input line as the answer to the oldest pending
// permission request: an option id, or allow/yes/y, reject/no/n.
func (c *client) answer(line string) {
	p := c.perms[0]
	word := strings.ToLower(strings.TrimSpace(line))
	switch word {
	case "y", "yes":
		word = "allow"
	case "n", "no":
		word = "reject"
	}
	for _, o := range p.req.Options {
		if o.OptionID == word {
			c.perms = c.perms[1:]
			c.selectOption(p, o, "")
			return
		}
	}
	if word == "allow" || word == "reject" {
		c.perms = c.perms[1:]
		c.choose(p, word, "")
		return
	}
	c.p.note(fmt.Sprintf("%q is not an answer; answer with one of: %s", line, optionNames(p.req.Options)))
}

// choose answers with the first option of the wanted kind (allow_once,
// then allow_always; likewise for reject), or cancelled if there is none.
func (c *client) choose(p *permission, want, why string) {
	for _, kind := range []string{want + "_once", want + "_always"} {
		for _, o := range p.req.Options {
			if o.Kind == kind {
				c.selectOption(p, o, why)
				return
			}
		}
	}
	c.cancelPermission(p)
}

func (c *client) selectOption(p *permission, o permissionOption, why string) {
	c.respond(p.id, map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": o.OptionID}})
	note := "answered " + o.OptionID
	if why != "" {
		note += " " + why
	}
	c.p.note(note)
}

func (c *client) cancelPermission(p *permission) {
	c.respond(p.id, map[string]any{"outcome": map[string]string{"outcome": "cancelled"}})
	c.p.note("permission request answered cancelled: " + p.req.Title)
}

// withdrawn handles $/cancel_request: the agent no longer needs the
// answer; it is answered cancelled.
func (c *client) withdrawn(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	for i, perm := range c.perms {
		if string(perm.id) == string(p.RequestID) {
			c.perms = slices.Delete(c.perms, i, i+1)
			c.p.note("the agent withdrew its permission request: " + perm.req.Title)
			c.respond(perm.id, map[string]any{"outcome": map[string]string{"outcome": "cancelled"}})
			return
		}
	}
}
