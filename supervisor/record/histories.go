package record

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"shellagent/acp"
	"shellagent/internal/journal"
)

// Histories is the supervisor's side of every session's history: a
// session's Recorder after an upgrade in place (Thaw), past sessions
// listed (List), found for session/resume (Resume) and deleted (Delete).
// Its methods are safe for concurrent use, as the store's are.
type Histories struct {
	Store *journal.Store // nil: history off
	Log   *slog.Logger   // where what cannot be read is reported
}

// Has reports whether the history has session id.
func (hs Histories) Has(id string) bool { return hs.Store != nil && hs.Store.Exists(id) }

// Resume is the history of past session p.SessionID, which session/resume
// makes live again, once the request is checked against it (its cwd, and
// check, the request's own checks, when it is not nil) and the session is
// live in the history (and locked against other processes): what it
// holds then is the whole of it. A session that the history does not
// have is -32002, and so is one whose file is found corrupt (the history
// skips it from then on); one live in another process that shares the
// state directory, -32600, naming the process where it can.
func (hs Histories) Resume(p *acp.ResumeSessionRequest, check func() error) (*journal.History, error) {
	var info journal.Info
	ok := hs.Store != nil
	if ok {
		info, ok = hs.Store.Stat(p.SessionID)
	}
	if !ok {
		return nil, acp.SessionNotFound(p.SessionID)
	}
	if filepath.Clean(p.Cwd) != filepath.Clean(info.Cwd) {
		return nil, acp.InvalidParams("cwd: %q is not this session's working directory %q", p.Cwd, info.Cwd)
	}
	if check != nil {
		if err := check(); err != nil {
			return nil, err
		}
	}
	h, err := hs.Store.Reopen(p.SessionID)
	switch {
	case errors.Is(err, journal.ErrLive):
		return nil, liveElsewhere("session/resume", p.SessionID, err)
	case errors.Is(err, journal.ErrNotFound):
		return nil, acp.SessionNotFound(p.SessionID)
	case errors.Is(err, journal.ErrCorrupt):
		return nil, corrupt(p.SessionID, err)
	case err != nil:
		return nil, fmt.Errorf("session/resume %s: reading its history: %w", p.SessionID, err)
	}
	return h, nil
}

// PastNotice tells the client that resumed past session h why nothing
// of it runs: the agent that ran it ended, and how the terminals lost
// (their ids, in the order they are listed) ended is not known.
func PastNotice(h *journal.History, lost []string) *acp.Notice {
	when := h.UpdatedAt.Local().Format("15:04")
	n := &acp.Notice{Severity: acp.NoticeInfo}
	if lost == nil {
		lost = []string{} // terminalIds is a list, never null
	}
	switch {
	case len(lost) > 0:
		n.Severity = acp.NoticeWarning
		n.Title = strings.Join(lost, ", ") + ": did not outlive the agent that ran it"
		n.Description = "The agent (or daemon) that ran session " + h.ID + " ended at " + when +
			" without recording how " + strings.Join(lost, ", ") + " ended: its exit status is unknown ({}). " +
			"Its output is kept up to then. The session is live again for new prompts."
	case h.Closed:
		n.Title = "Session resumed from its history"
		n.Description = "Session " + h.ID + " was closed at " + when + ", and what ran in it was stopped then: " +
			"each terminal has the exit status it ended with. The session is live again for new prompts."
	default:
		n.Title = "Session resumed from its history"
		n.Description = "The agent (or daemon) that ran session " + h.ID + " ended at " + when +
			"; nothing of it was running then. The session is live again for new prompts."
	}
	n.Meta = map[string]any{"shellagent": map[string]any{"event": "session_revived", "terminalIds": lost}}
	return n
}

// Delete removes session id's history for good (session/delete), and
// the corrupt file of it set aside (journal.SetAside) if there is one,
// and reports whether there was either: a session the history does not
// have is no error, one live in another process that shares the state
// directory is -32600. With history off it does nothing.
func (hs Histories) Delete(id string) (found bool, err error) {
	if hs.Store == nil {
		return false, nil
	}
	switch err := hs.Store.Delete(id); {
	case errors.Is(err, journal.ErrLive):
		return false, liveElsewhere("session/delete", id, err)
	case errors.Is(err, journal.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("session/delete %s: %w", id, err)
	}
	return true, nil
}

// liveElsewhere is the error of session/resume and session/delete of a
// session that another process sharing the state directory has live (err
// names it, where it can).
func liveElsewhere(method, id string, err error) *acp.Error {
	proc, data := "another shellagent process", map[string]any{"sessionId": id, "state": elsewhere}
	if le := (*journal.LiveError)(nil); errors.As(err, &le) && le.PID != 0 {
		proc, data["pid"] = fmt.Sprintf("another shellagent process (pid %d)", le.PID), le.PID
	}
	return &acp.Error{Code: acp.CodeInvalidRequest,
		Message: method + " " + id + ": the session is live in " + proc + " that shares the state directory " +
			"(another stdio agent, or the daemon); resume it there, or end that process first",
		Data: data}
}

// corrupt is the error of session/resume of session id, whose history
// file err (a *journal.CorruptError) found corrupt: -32002, as for a
// session the history does not have, since it has skipped it, naming
// the file, what is wrong with it, and where it was set aside.
func corrupt(id string, err error) *acp.Error {
	file, why, kept := "", err.Error(), "it is skipped from now on, and left on disk as it is"
	data := map[string]any{"sessionId": id, "corrupt": true}
	if ce := (*journal.CorruptError)(nil); errors.As(err, &ce) {
		file, why = ce.Path, ce.Err.Error()
		if ce.Aside != "" {
			kept = "it is skipped from now on, set aside as it is as " + ce.Aside + " (session/delete removes it)"
			data["setAside"] = ce.Aside
		}
	}
	data["file"] = file
	return &acp.Error{Code: acp.CodeNotFound,
		Message: "session/resume " + id + ": its history is corrupt (" + file + ": " + why + "); " + kept,
		Data:    data}
}
