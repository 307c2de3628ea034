package terminput

import (
	"fmt"

	"shellagent/acp"
	"shellagent/supervisor/work"
)

// Notify is the session's notify setting: which notices are sent. Its
// zero value is the default. Its number is written in the frozen form of
// an upgrade in place: the values never change.
type Notify int

const (
	NotifyFailures Notify = iota // input waits, and background terminals that fail
	NotifyAll                    // input waits, and every background terminal that ends
	NotifyOff                    // no notices
)

// OptNotify is the config option id of the notify setting.
const OptNotify = "notify"

// In is the setting that applies while a session is open or not: a
// session that is closing tells nothing more.
func (m Notify) In(open bool) Notify {
	if !open {
		return NotifyOff
	}
	return m
}

var notifyValues = []string{NotifyFailures: "failures", NotifyAll: "all", NotifyOff: "off"}

// Option is the config option of the setting, m its current value.
func (m Notify) Option() acp.ConfigOption {
	return acp.ConfigOption{
		Type: "select", ConfigID: OptNotify, Name: "Notify",
		Description:  "Notices when a background command ends on its own, and when a program waits for input",
		CurrentValue: notifyValues[m],
		Options: []acp.ConfigChoice{
			{Value: "off", Name: "No notices"},
			{Value: "failures", Name: "When a background command fails, or a program waits for input"},
			{Value: "all", Name: "When a background command ends, or a program waits for input"},
		},
	}
}

// ParseNotify reads a value that Option offers (the default for any
// other).
func ParseNotify(value string) Notify {
	for m, v := range notifyValues {
		if v == value {
			return Notify(m)
		}
	}
	return NotifyFailures
}

// TakenNotice is the notice a connection gets when another client takes
// session id from it (session/resume): the last the session tells it.
func TakenNotice(id string) *acp.Notice {
	return &acp.Notice{
		SessionUpdate: acp.KindNotice,
		Severity:      acp.NoticeWarning,
		Title:         "Another client took this session",
		Description: "Session " + id + " was resumed by another client: its output, state and prompts go there now, " +
			"and it no longer answers here. Resume it here to take it back.",
		Meta: map[string]any{"shellagent": map[string]any{"event": acp.EventSessionTaken}},
	}
}

// ClosedNotice is the notice that tells the client attached to session
// id that another client closes it (session/close) or, with deleting,
// deletes it (session/delete): its work's final statuses follow, then
// nothing more.
func ClosedNotice(id string, deleting bool) *acp.Notice {
	title, desc := "Another client closed this session", "Session "+id+" was closed by another client: its work is stopped, its history is kept (session/resume makes it live again)."
	if deleting {
		title, desc = "Another client deleted this session", "Session "+id+" was deleted by another client: its work is stopped and its history removed."
	}
	return &acp.Notice{
		SessionUpdate: acp.KindNotice,
		Severity:      acp.NoticeWarning,
		Title:         title,
		Description:   desc,
		Meta:          map[string]any{"shellagent": map[string]any{"event": acp.EventSessionClosed}},
	}
}

// meta is a notice's _meta: the terminal it is about, and why.
func meta(terminalID, event string) map[string]any {
	return map[string]any{"shellagent": map[string]any{"terminalId": terminalID, "event": event}}
}

// ExitNotice is the notice that background terminal id, which ran line,
// ended on its own with exit (nobody stopped it: a stop, a cancel and a
// close are answered already), as mode says: a warning when it failed,
// info when it exited 0; nil if mode sends none. Its SessionUpdate is the
// sender's to set.
func ExitNotice(id, line string, exit *acp.ExitStatus, mode Notify) *acp.Notice {
	failed := exit.Signal != "" || exit.ExitCode == nil || *exit.ExitCode != 0
	if mode == NotifyOff || !failed && mode != NotifyAll {
		return nil
	}
	severity := acp.NoticeInfo
	if failed {
		severity = acp.NoticeWarning
	}
	return &acp.Notice{
		Severity:    severity,
		Title:       fmt.Sprintf("%s %s: %s", id, work.ExitText(exit), shortLine(line)),
		Description: fmt.Sprintf("The background command ended on its own. /tail %s shows its last output.", id),
		Meta:        meta(id, "exited"),
	}
}

// InputNotice is the notice that the program of terminal id, which ran
// line, waits for input, and how to type into it. Its SessionUpdate is
// the sender's to set.
func InputNotice(id, line string) *acp.Notice {
	return &acp.Notice{
		Severity: acp.NoticeInfo,
		Title:    fmt.Sprintf("%s is waiting for input: %s", id, shortLine(line)),
		Description: fmt.Sprintf("Type a line with /send %s TEXT (Enter is added), or keys with /keys %s KEY… (C-c, Enter, Up, Tab, …).",
			id, id),
		Meta: meta(id, acp.EventWaitingForInput),
	}
}

// shortLine cuts a command line short for a title.
func shortLine(line string) string { return work.Shorten(line, 60) }
