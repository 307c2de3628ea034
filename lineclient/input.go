package lineclient

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// handleInput handles a line of input or its end. During start-up a
// line is held until the session runs, and the end of the input ends the
// client at once (with a daemon, it is held too: the client detaches once
// the session runs). /close and /sessions are the client's own commands;
// other lines are prompts.
func (c *client) handleInput(ev inputEvent) {
	if ev.keys != nil {
		c.tty.keys(ev.keys)
		return
	}
	if ev.err != nil {
		c.p.note(fmt.Sprintf("reading input: %v", ev.err))
	}
	switch {
	case c.phase == starting && ev.eof && !c.cfg.Daemon:
		c.abort("the input ended before the session started: stopping the agent", nil)
		return
	case c.phase == starting:
		c.held = &ev
		return
	case ev.eof && c.cfg.Daemon:
		c.detach()
		return
	case ev.eof:
		c.quit()
		return
	case c.perms.waiting():
		c.perms.answer(ev.line)
		return
	}
	line := strings.TrimSpace(ev.line)
	if line == "" {
		return
	}
	if !c.cfg.Interactive && c.tty == nil {
		c.p.text("> " + line)
	}
	switch line {
	case "/close":
		c.quit()
	case "/sessions":
		c.showSessions()
	default:
		c.prompt(line)
	}
}

// prompt sends a line as a prompt. In script mode and in terminal mode,
// the next line waits for its turn to end.
func (c *client) prompt(line string) {
	c.interrupts = 0
	c.view.lastLine = line
	c.view.typing(line)
	params := map[string]any{
		"sessionId": c.sess.ID,
		"prompt":    []map[string]string{{"type": "text", "text": line}},
	}
	var w *turnWait
	if !c.cfg.Interactive || c.tty != nil {
		w = &turnWait{line: line}
		if id, ok := strings.CutPrefix(line, "/stop "); ok && c.offers("stop") && c.sess.Listed(strings.TrimSpace(id)) {
			w.stopID = strings.TrimSpace(id)
		}
		c.wait = w
	}
	c.rpc.call("session/prompt", params, func(m *message) {
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
}

// paceState moves a script on when a snapshot ends the awaited turn, and
// once a stopped item has left the list.
func (c *client) paceState(stopReason string) {
	w := c.wait
	if w == nil {
		return
	}
	if !w.ended && w.answered && c.sess.State == "idle" && stopReason != "" && c.seq > w.respSeq && c.seq > w.userSeq {
		w.ended = true
		if w.stopID != "" {
			c.stopTimer = time.After(stopWaitTimeout)
		}
	}
	if w.ended && (w.stopID == "" || !c.sess.Listed(w.stopID)) {
		c.wait = nil
		c.stopTimer = nil
	}
}
