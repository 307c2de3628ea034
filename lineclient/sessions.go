package lineclient

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"shellagent/acp"
)

// The agent's sessions, as session/list gives them: for /sessions, and
// for choosing the session to reattach to (Config.Resume).

// maxListPages bounds the pages of session/list the client asks for.
const maxListPages = 100

// sessionEntry is a session as session/list describes it. Meta is
// shellagent's _meta: its state (attached or detached) and live terminals.
type sessionEntry struct {
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
	Title     string `json:"title"`
	UpdatedAt string `json:"updatedAt"`
	Meta      struct {
		Shellagent struct {
			State     string   `json:"state"`
			Terminals []string `json:"terminals"`
		} `json:"shellagent"`
	} `json:"_meta"`
}

// describe names the session for the user: its id, title and directory.
func (e *sessionEntry) describe() string {
	s := e.SessionID
	if e.Title != "" {
		s += " (" + e.Title + ")"
	}
	return s + " in " + e.Cwd
}

// updated returns the session's updatedAt, or the zero time if it has
// none that reads as RFC 3339.
func (e *sessionEntry) updated() time.Time {
	t, err := time.Parse(time.RFC3339, e.UpdatedAt)
	if err != nil {
		return time.Time{}
	}
	return t
}

// line is the session's line in /sessions: id, cwd, title, state, live
// terminals, last update; current marks the client's own session.
func (e *sessionEntry) line(current bool, now time.Time) string {
	f := []string{e.SessionID, e.Cwd}
	if e.Title != "" {
		f = append(f, fmt.Sprintf("%q", e.Title))
	}
	state := e.Meta.Shellagent.State
	if state == "" {
		state = "state unknown"
	}
	if current {
		state += " (here)"
	}
	f = append(f, state)
	switch t := e.Meta.Shellagent.Terminals; {
	case len(t) > 0:
		f = append(f, "running "+strings.Join(t, " "))
	case e.Meta.Shellagent.State != "":
		f = append(f, "no terminal runs")
	}
	if u := e.updated(); !u.IsZero() {
		f = append(f, "updated "+u.Local().Format(time.DateTime)+" ("+age(now.Sub(u))+" ago)")
	}
	return strings.Join(f, "  ")
}

// age is a duration as /sessions shows it: whole seconds.
func age(d time.Duration) string {
	return max(d, 0).Truncate(time.Second).String()
}

// listSessions asks the agent for its sessions with call, page after page
// (nextCursor), and gives done every session listed, or the error answer
// that ended the list.
func listSessions(call func(method string, params any, then func(*message)), done func(list []sessionEntry, failed *message)) {
	var all []sessionEntry
	var page func(cursor string, n int)
	page = func(cursor string, n int) {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		call("session/list", params, func(m *message) {
			var res struct {
				Sessions   []sessionEntry `json:"sessions"`
				NextCursor string         `json:"nextCursor"`
			}
			if m.Error == nil {
				if err := json.Unmarshal(m.Result, &res); err != nil {
					m.Error = &acp.Error{Code: acp.CodeInternalError, Message: "a result the client cannot read: " + err.Error()}
				}
			}
			if m.Error != nil {
				done(nil, m)
				return
			}
			all = append(all, res.Sessions...)
			if res.NextCursor == "" || n >= maxListPages {
				done(all, nil)
				return
			}
			page(res.NextCursor, n+1)
		})
	}
	page("", 1)
}

// pickSession chooses the session to reattach to: id, or, if id is "",
// the newest session (updatedAt) whose cwd is cwd; the later listed of
// two as new. why says why there is none.
func pickSession(list []sessionEntry, id, cwd string) (e *sessionEntry, why string) {
	for i := range list {
		c := &list[i]
		switch {
		case id != "" && c.SessionID == id:
			return c, ""
		case id != "" || filepath.Clean(c.Cwd) != filepath.Clean(cwd):
		case e == nil || !c.updated().Before(e.updated()):
			e = c
		}
	}
	switch {
	case e != nil:
		return e, ""
	case id != "":
		return nil, "no session " + id + " in the daemon (shellagent daemon status lists them)"
	}
	return nil, "no session of " + cwd + " in the daemon to reattach to (shellagent client --daemon starts one there; --resume ID names another)"
}

// showSessions serves /sessions: one line per session of the agent. A
// script's next line waits for the list.
func (c *client) showSessions() {
	w := &turnWait{line: "/sessions"}
	if !c.cfg.Interactive || c.tty != nil {
		c.wait = w
	}
	listSessions(c.rpc.call, func(list []sessionEntry, failed *message) {
		if c.wait == w {
			c.wait = nil
		}
		switch {
		case failed != nil:
			c.p.note("session/list failed: " + failed.Error.Error())
			return
		case len(list) == 0:
			c.p.text("Sessions: none")
			return
		}
		var b strings.Builder
		b.WriteString("Sessions:\n")
		now := time.Now()
		for i := range list {
			b.WriteString(list[i].line(c.sess != nil && list[i].SessionID == c.sess.ID, now) + "\n")
		}
		c.p.text(b.String())
	})
}
