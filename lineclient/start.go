package lineclient

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"shellagent/acp"
)

// startup is the client's start: initialize, then session/new, or, to
// reattach to a daemon's session (Config.Resume), session/list and
// session/resume; then the settings. Each request has StartTimeout to be
// answered. It belongs to the client's event loop.
type startup struct {
	c      *client
	timer  <-chan time.Time // the answer to method is late
	method string
	cwd    string // the session's
	again  bool   // reconnecting: resume the session the client has
	termed bool   // terminal mode or not has been decided (startTerminal), once
	// retryAt delivers when to send session/resume again (retry), after
	// the agent answered that the session is closing (closing).
	retryAt <-chan time.Time
	retry   func()
	retries int
}

// maxClosingRetries bounds how many times a resume is sent again while
// the agent answers that the session is closing.
const maxClosingRetries = 3

// closingSlack is added to the agent's retryAfterMs: the close ends a
// moment after the kill grace, once the last process is gone.
const closingSlack = 250 * time.Millisecond

// closing reports whether m, the answer to session/resume of id, says
// that the session is closing and can be resumed once closed (-32002 with
// data closing and retryAfterMs, as shellagent answers during another
// connection's session/close); then it says so, and the event loop calls
// again after retryAfterMs, at most maxClosingRetries times.
func (s *startup) closing(id string, m *message, again func()) bool {
	if m.Error == nil || m.Error.Code != acp.CodeNotFound || s.retries == maxClosingRetries {
		return false
	}
	data, _ := m.Error.Data.(map[string]any)
	closing, _ := data["closing"].(bool)
	ms, _ := data["retryAfterMs"].(float64)
	if !closing || ms <= 0 {
		return false
	}
	s.retries++
	wait := time.Duration(ms)*time.Millisecond + closingSlack
	s.c.p.note(fmt.Sprintf("%s is closing (another client closed it): resuming it again in %v, once it has closed", id, wait))
	s.retryAt, s.retry = time.After(wait), again
	return true
}

// retryNow sends what closing put off.
func (s *startup) retryNow() {
	retry := s.retry
	s.retryAt, s.retry = nil, nil
	retry()
}

// timeout returns Config.StartTimeout, or its default.
func (s *startup) timeout() time.Duration {
	if s.c.cfg.StartTimeout > 0 {
		return s.c.cfg.StartTimeout
	}
	return startTimeout
}

// late ends the start-up whose request went unanswered.
func (s *startup) late() {
	c := s.c
	c.abort(fmt.Sprintf("the agent %s did not answer %s within %v: stopping it", strings.Join(c.cfg.Agent, " "), s.method, s.timeout()),
		fmt.Errorf("lineclient: the agent %s did not answer %s within %v", c.cfg.Agent[0], s.method, s.timeout()))
}

// call sends a start-up request, to be answered within timeout.
func (s *startup) call(method string, params any, then func(*message)) {
	s.timer, s.method = time.After(s.timeout()), method
	s.c.rpc.call(method, params, func(m *message) {
		s.timer = nil
		then(m)
	})
}

// start sends initialize, then opens or resumes the session.
func (s *startup) start() {
	c := s.c
	init := map[string]any{
		"protocolVersion": 2,
		"info":            map[string]string{"name": "shellagent-client", "version": c.cfg.Version},
		"capabilities":    map[string]any{},
	}
	s.call("initialize", init, func(m *message) {
		var res struct {
			ProtocolVersion int `json:"protocolVersion"`
			Info            struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"info"`
			Meta json.RawMessage `json:"_meta"`
		}
		if !s.ok("initialize", m, &res) {
			return
		}
		if res.ProtocolVersion != 2 {
			c.fail(fmt.Errorf("lineclient: the agent speaks ACP v%d, not v2", res.ProtocolVersion))
			c.phase = finished
			return
		}
		c.p.note(fmt.Sprintf("agent: %s %s, ACP v2", res.Info.Name, res.Info.Version))
		if s.again {
			s.reattach()
			return
		}
		if c.cfg.Terminal != nil && !s.termed {
			s.termed = true
			c.startTerminal(hasInputMethods(res.Meta))
		}
		if c.cfg.Resume {
			s.resume()
			return
		}
		s.newSession()
	})
}

// ok decodes a response into result, or records its error and finishes.
func (s *startup) ok(method string, m *message, result any) bool {
	c := s.c
	if m.Error != nil {
		c.fail(fmt.Errorf("lineclient: %s: %w", method, m.Error))
		c.p.note(fmt.Sprintf("%s failed: %s", method, m.Error))
		c.phase = finished
		return false
	}
	if err := json.Unmarshal(m.Result, result); err != nil {
		c.fail(fmt.Errorf("lineclient: decoding the %s result: %w", method, err))
		c.phase = finished
		return false
	}
	return true
}

// joined is the answer to session/new or session/resume.
type joined struct {
	AvailableCommands []command       `json:"availableCommands"`
	ConfigOptions     json.RawMessage `json:"configOptions"`
}

// follow makes id the client's session, whose updates it shows from now
// on.
func (s *startup) follow(id string) {
	c := s.c
	c.sess = newSession(id)
	c.view = &view{p: c.p, sess: c.sess}
	if c.tty != nil {
		c.view.started, c.view.raw = c.tty.started, c.tty.output
	}
}

// joined takes what the agent says of the session it opened or resumed,
// then applies the settings.
func (s *startup) joined(res *joined) {
	c := s.c
	c.commands = res.AvailableCommands
	if grace, ok := killGraceOf(res.ConfigOptions, ""); ok {
		c.killGrace = grace
	}
	s.applySettings(c.cfg.Settings)
}

func (s *startup) newSession() {
	c := s.c
	s.call("session/new", map[string]any{"cwd": c.cfg.Cwd}, func(m *message) {
		var res struct {
			SessionID string `json:"sessionId"`
			joined
		}
		if !s.ok("session/new", m, &res) {
			return
		}
		s.follow(res.SessionID)
		s.cwd = c.cfg.Cwd
		c.p.note("session started in " + c.cfg.Cwd)
		s.joined(&res.joined)
	})
}

// resume reattaches to a session of the agent (a daemon): Config.SessionID,
// else the newest session of Config.Cwd, which session/list names. The
// session's updates from session/resume show the tail of each terminal
// that runs (see clientview.Session.Resuming), and what follows, live.
func (s *startup) resume() {
	c := s.c
	listSessions(s.call, func(list []sessionEntry, failed *message) {
		if failed != nil {
			s.ok("session/list", failed, nil)
			return
		}
		e, why := pickSession(list, c.cfg.SessionID, c.cfg.Cwd)
		if why != "" {
			c.p.note(why)
			c.fail(fmt.Errorf("lineclient: %s (%w)", why, ErrShown))
			c.phase = finished
			return
		}
		s.follow(e.SessionID)
		s.cwd = e.Cwd
		c.sess.Resuming = true
		c.p.note("reattaching to " + e.describe())
		params := map[string]any{"sessionId": e.SessionID, "cwd": e.Cwd}
		var send func()
		send = func() {
			s.call("session/resume", params, func(m *message) {
				if s.closing(e.SessionID, m, send) {
					return
				}
				c.sess.Resuming = false
				var res joined
				if !s.ok("session/resume", m, &res) {
					return
				}
				s.joined(&res)
			})
		}
		send()
	})
}

// reattach resumes the session the client had before it reconnected.
// Terminals it knows are not announced again, and of their output only
// what it had not seen is shown (view.snapshot). If the connection ended
// before the first start-up did, that start-up's settings apply now.
func (s *startup) reattach() {
	c := s.c
	c.sess.Resuming = true
	s.call("session/resume", map[string]any{"sessionId": c.sess.ID, "cwd": s.cwd}, func(m *message) {
		c.sess.Resuming = false
		var res joined
		if !s.ok("session/resume", m, &res) {
			return
		}
		c.p.note("reattached to " + c.sess.ID)
		if !c.ran {
			s.joined(&res)
			return
		}
		c.commands = res.AvailableCommands
		s.applySettings(nil)
	})
}

// applySettings sets the config options one after the other, then starts
// reading input.
func (s *startup) applySettings(rest []Setting) {
	c := s.c
	if len(rest) == 0 {
		c.phase, c.ran = running, true
		return
	}
	set := rest[0]
	params := map[string]any{"sessionId": c.sess.ID, "configId": set.ID, "type": "id", "value": set.Value}
	s.call("session/set_config_option", params, func(m *message) {
		if c.phase != starting {
			return
		}
		if m.Error != nil {
			c.p.note(fmt.Sprintf("cannot set %s to %s: %s", set.ID, set.Value, refusal(m.Error.Message)))
			c.fail(fmt.Errorf("lineclient: setting %s=%s: %w (%w)", set.ID, set.Value, m.Error, ErrShown))
			c.quit()
			return
		}
		var res struct {
			ConfigOptions json.RawMessage `json:"configOptions"`
		}
		_ = json.Unmarshal(m.Result, &res) // Safe: without the list, the value set is taken.
		value := ""
		if set.ID == "kill_grace" {
			value = set.Value
		}
		if grace, ok := killGraceOf(res.ConfigOptions, value); ok {
			c.killGrace = grace
		}
		c.p.note(fmt.Sprintf("set %s to %s", set.ID, set.Value))
		s.applySettings(rest[1:])
	})
}

// refusal returns the agent's refusal of a setting as a person reads it:
// without the request shape it shows a client developer, and with the
// values it lists. "value: \"soon\" is not a value of foreground_timeout:
// want a duration …; send params {…}, with value one of: 0, 1s …" reads
// "want a duration …; offered: 0, 1s …". Another message is left as it is.
func refusal(msg string) string {
	head, values, ok := strings.Cut(msg, "; send params ")
	if !ok {
		return msg
	}
	if _, list, ok := strings.Cut(values, ", with value one of: "); ok {
		values = list
	} else {
		values = ""
	}
	if i := strings.Index(head, " is not a value of "); strings.HasPrefix(head, "value: ") && i >= 0 {
		if _, why, ok := strings.Cut(head[i:], ": "); ok {
			head = why
		} else {
			head = ""
		}
	}
	switch {
	case values == "":
		return head
	case head == "":
		return "want one of: " + values
	}
	return head + "; offered: " + values
}
