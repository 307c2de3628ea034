package supervisor

import (
	"errors"
	"fmt"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/ptyio"
)

// Notices: a terminal whose program waits for input (once per wait), and
// a background terminal that ends on its own; the session's notify
// setting says which are sent. A notice is a live event, not history: it
// goes to the attached client, if any, and a replay does not repeat it.
// Whatever the setting, a connection that another client took the
// session from is told so (takenNotice).

// notifyMode is the notify setting. Its zero value is the default.
type notifyMode int

const (
	notifyFailures notifyMode = iota // input waits, and background terminals that fail
	notifyAll                        // input waits, and every background terminal that ends
	notifyOff                        // no notices
)

const optNotify = "notify"

// in is the mode that applies while a session is in life: a session that
// is closing tells nothing more.
func (m notifyMode) in(life lifecycle) notifyMode {
	if life != sessionOpen {
		return notifyOff
	}
	return m
}

var notifyValues = []string{notifyFailures: "failures", notifyAll: "all", notifyOff: "off"}

func (m notifyMode) option() acp.ConfigOption {
	return acp.ConfigOption{
		Type: "select", ConfigID: optNotify, Name: "Notify",
		Description:  "Notices when a background command ends on its own, and when a program waits for input",
		CurrentValue: notifyValues[m],
		Options: []acp.ConfigChoice{
			{Value: "off", Name: "No notices"},
			{Value: "failures", Name: "When a background command fails, or a program waits for input"},
			{Value: "all", Name: "When a background command ends, or a program waits for input"},
		},
	}
}

// parseNotify reads a value that option offers.
func parseNotify(value string) notifyMode {
	for m, v := range notifyValues {
		if v == value {
			return notifyMode(m)
		}
	}
	return notifyFailures
}

// notice sends a notice to the attached client; it is not recorded.
func (o *outbox) notice(n *acp.Notice) {
	n.SessionUpdate = acp.KindNotice
	o.send(n)
}

// takenNotice is the notice a connection gets when another client takes
// session id from it (session/resume): the last the session tells it.
func takenNotice(id string) *acp.Notice {
	return &acp.Notice{
		SessionUpdate: acp.KindNotice,
		Severity:      acp.NoticeWarning,
		Title:         "Another client took this session",
		Description: "Session " + id + " was resumed by another client: its output, state and prompts go there now, " +
			"and it no longer answers here. Resume it here to take it back.",
		Meta: map[string]any{"shellagent": map[string]any{"event": "session_taken"}},
	}
}

// noticeMeta is a notice's _meta: the terminal it is about, and why.
func noticeMeta(terminalID, event string) map[string]any {
	return map[string]any{"shellagent": map[string]any{"terminalId": terminalID, "event": event}}
}

// noticeExit tells that a background terminal ended on its own (nobody
// stopped it: a stop, a cancel and a close are answered already), as the
// notify setting says: a warning when it failed, info when it exited 0.
func (o *outbox) noticeExit(t *terminal, mode notifyMode) {
	failed := t.exit.Signal != "" || t.exit.ExitCode == nil || *t.exit.ExitCode != 0
	if mode == notifyOff || !failed && mode != notifyAll {
		return
	}
	severity := acp.NoticeInfo
	if failed {
		severity = acp.NoticeWarning
	}
	o.notice(&acp.Notice{
		Severity:    severity,
		Title:       fmt.Sprintf("%s %s: %s", t.id, exitText(t.exit), shortLine(t.line)),
		Description: fmt.Sprintf("The background command ended on its own. /tail %s shows its last output.", t.id),
		Meta:        noticeMeta(t.id, "exited"),
	})
}

// terminalInput is what a terminal knows of its input: the watch that
// looks for its program waiting for input, and the waits noticed. It is
// owned by the session's actor; the watch has its own.
type terminalInput struct {
	looker *inputWatch
	follow *outputbuf.Follower // tells the watch about output
	// noticed is the last wait a notice went out for; typedSince says
	// that input was typed after it. A wait is noticed when none was
	// before, or when input was typed since and the wait is another (the
	// program read, then waits again): a program that waits again
	// without being given input (a read with a timeout, in a loop) is
	// not noticed again.
	noticed    *ptyio.InputWait
	typedSince bool
}

// watchInput starts watching a launched terminal for its program waiting
// for input.
func (t *terminal) watchInput(s *Session) {
	proc := t.proc
	w := newInputWatch(func(w *inputWatch) { s.lookForInput(t, proc, w) })
	t.input = &terminalInput{looker: w, follow: t.ring.Follow(w.activity)}
	w.start()
}

// unwatchInput stops watching a terminal that exited, and lets go of the
// watch.
func (t *terminal) unwatchInput() {
	if in := t.input; in != nil {
		in.looker.stop()
		in.follow.Stop()
		t.input = nil
	}
}

// typed records that input was typed into the terminal: the program may
// read it and wait again, which is a new wait.
func (in *terminalInput) typed() {
	if in != nil {
		in.typedSince = true
		in.looker.activity()
	}
}

// lookForInput is a look of the watch w at terminal t, made with no lock
// held; a wait found is noticed on the session's actor.
func (s *Session) lookForInput(t *terminal, proc ptyio.Process, w *inputWatch) {
	wait, err := proc.InputWait()
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		w.stop() // never supported here: stop looking
		return
	case err != nil, wait.Pid == 0:
		return // the terminal ended meanwhile, or nobody waits
	}
	s.do(func(st *state) { st.out.noticeInput(t, wait, st.settings.notify.in(st.life)) })
}

// noticeInput tells, once per wait, that a running terminal's program
// waits for input, and how to type into it.
func (o *outbox) noticeInput(t *terminal, wait ptyio.InputWait, mode notifyMode) {
	in := t.input
	if t.state != termRunning || in == nil || in.noticed != nil && (!in.typedSince || *in.noticed == wait) {
		return
	}
	in.noticed, in.typedSince = &wait, false
	if mode == notifyOff {
		return
	}
	o.notice(&acp.Notice{
		Severity: acp.NoticeInfo,
		Title:    fmt.Sprintf("%s is waiting for input: %s", t.id, shortLine(t.line)),
		Description: fmt.Sprintf("Type a line with /send %s TEXT (Enter is added), or keys with /keys %s KEY… (C-c, Enter, Up, Tab, …).",
			t.id, t.id),
		Meta: noticeMeta(t.id, "waiting_for_input"),
	})
}
