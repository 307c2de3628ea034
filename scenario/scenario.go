// Package scenario holds shellagent's client scenarios: one for each
// client-side rule of the v2 Background Work RFD and of the schema's
// description texts. A well-behaved agent never provokes most of those
// rules (an item of a type the client cannot know, a snapshot that leaves
// the background list out, a status the client has never heard of), and
// provokes the others only with timing luck (a cancel that races the end
// of the work). A scenario sends exactly that, on demand, so that a client
// developer can see what their client does with it, and compare with the
// transcript in testdata/transcripts.
//
// A scenario is a script that plays on a Stage: the session that asked
// for it (/scenario NAME) provides one. The Stage runs real commands in
// real terminals and real scheduled tool calls where the rule is about
// them, and sends made-up updates, in order with the session's own, for
// what real work cannot produce. The session keeps its own bookkeeping
// intact: made-up items never enter its registry, and when the script
// returns, the Stage stops whatever the script left running, finalizes its
// made-up items, and reports the list again.
//
// Every message a scenario sends is valid against the v2 schema, but for
// the scenarios marked Invalid (a malformed background list), which the
// session plays only when the agent runs with --scenarios-invalid.
//
// The package is the client developers' kit whole: Kit is the kit.Kit a
// session asks to play /scenario (supervisor.Config.Kit), and the Stage a
// scenario plays on is a play that drives the session from outside its
// core, through kit.Session.Do and kit.Scene (package supervisor/kit, the
// contract between the session and the kit), the ways in that real events
// use, and lays a kit.Overlay over it (what it lists, the cancels it
// takes). It imports nothing of package supervisor.
//
// Files: scenario.go (a Scenario, its listing, and the Stage a session
// gives it to play on), snapshot.go (Crafted: a snapshot that leaves its
// list out or carries a malformed one), table.go (All: the scenarios
// themselves), stage.go (Kit, and play: the Stage, its overlay and its
// foreground work), stagework.go (what a play runs and makes up: its
// commands, wakeups and watches, its gate files, its made-up items).
package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"shellagent/acp"
)

// A Scenario provokes one client-side rule.
type Scenario struct {
	Name   string // as /scenario NAME takes it
	Sends  string // what it sends, for someone who has never read the RFD
	Rule   string // the rule, quoted
	Source string // where the rule is written: an RFD section, a schema definition
	Expect string // what a conforming client shows or does
	// V1 says the rule means something in ACP v1 too: the scenario plays
	// there, through the v1 front's translation. Otherwise a v1 client is
	// told that the scenario is v2 only.
	V1 bool
	// Invalid says the scenario sends a message that the schema forbids.
	Invalid bool
	Play    func(Stage) error
}

// Intro is what the session says before the scenario plays: what comes,
// the rule quoted with its source, and what a conforming client does.
func (sc *Scenario) Intro() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Scenario %s.\n", sc.Name)
	if sc.Invalid {
		b.WriteString("Beware: this scenario sends a message that the schema forbids; it plays because shellagent runs with --scenarios-invalid.\n")
	}
	fmt.Fprintf(&b, "What comes: %s\nThe rule (%s): \"%s\"\nA conforming client: %s", sc.Sends, sc.Source, sc.Rule, sc.Expect)
	return b.String()
}

// Outro is what the session says once the scenario is over.
func (sc *Scenario) Outro() string {
	return fmt.Sprintf("Scenario %s is over: what it started is stopped.", sc.Name)
}

// Lookup returns the scenario called name, or nil.
func Lookup(name string) *Scenario {
	for i := range All {
		if All[i].Name == name {
			return &All[i]
		}
	}
	return nil
}

// Listing is what /scenario alone says: each scenario with the rule it
// provokes.
func Listing(v1, invalid bool) string {
	var b strings.Builder
	b.WriteString("Scenarios, one per client-side rule; /scenario NAME plays one, /scenario NAME 5s holds each state it shows for 5s (default 1s):")
	for _, sc := range All {
		fmt.Fprintf(&b, "\n- %s: %s", sc.Name, firstSentence(sc.Sends))
		switch {
		case sc.Invalid && !invalid:
			b.WriteString(" (needs --scenarios-invalid: it sends a message the schema forbids)")
		case v1 && !sc.V1:
			b.WriteString(" (v2 only)")
		}
	}
	return b.String()
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// DefaultHold is how long Hold pauses unless /scenario says otherwise.
const DefaultHold = time.Second

// MaxHold is the longest hold /scenario takes.
const MaxHold = time.Minute

// AwaitClient is how long a scenario waits for the client to do what it
// asked (cancel, close) before it says so and cleans up.
const AwaitClient = time.Minute

// AnswerWindow is the least time permission-cancel keeps the request for
// listed work open after session/cancel, watching what the client does
// with it, before it withdraws it; it keeps it open for the hold if that
// is longer. A client that answers every pending request on
// session/cancel does so at once: well within a second, even over a slow
// link, and before the withdrawal, which a conforming client may answer
// cancelled.
const AnswerWindow = time.Second

// Causes of a Stage's Context ending.
var (
	// ErrCancelled: session/cancel cancelled the scenario's turn while
	// the scenario did not await it.
	ErrCancelled = errors.New("the scenario's turn was cancelled")
	// ErrClosed: the session is closing.
	ErrClosed = errors.New("the session is closing")
	// errTimeout: the client did not do what the scenario asked in time.
	errTimeout = errors.New("the client did not do it in time")
)

// A Stage is what a session gives a scenario to play on. Its methods are
// called from the scenario's own goroutine, one at a time; each returns
// once what it did has been queued for the client, in order with the
// session's own updates. Once Context has ended, they do nothing (and
// those that return an error return its cause).
type Stage interface {
	// Context ends when the scenario must stop: its cause is ErrCancelled
	// or ErrClosed.
	Context() context.Context
	// Say sends an agent_message.
	Say(text string)
	// Hold pauses for the hold /scenario asked for, so that a person
	// watching sees the state the client is in; 0 in the tests.
	Hold()
	// HoldTime is the hold /scenario asked for, for a scenario that
	// waits for the client for as long as it holds a state.
	HoldTime() time.Duration

	// Send sends a made-up update as it is (a terminal update of a real
	// terminal goes with its output stream).
	Send(u acp.Update)
	// Report sends a state_update with the session's list, changed as s
	// says.
	Report(s Snapshot)
	// List lists items beside the session's own work, from now on, in
	// every state_update, and sends the changed list; List() unlists them.
	List(items ...acp.BackgroundItem)
	// ToolCallID and TerminalID reserve ids that no other work of the
	// session takes, for made-up items.
	ToolCallID() string
	TerminalID() string
	// Intercept makes the next terminal/cancel or tool_call/cancel (or
	// /stop) of id accepted, reported on the channel, and otherwise
	// ignored: the scenario decides what follows.
	Intercept(id string) <-chan struct{}
	// SessionCancel makes the next session/cancel of the scenario's turn
	// reported on the channel instead of stopping the scenario.
	SessionCancel() <-chan struct{}

	// Run runs line as real work in a new terminal, as how says, and
	// returns it once it runs.
	Run(line string, how How) (Command, error)
	// Schedule makes a real scheduled wakeup of line (pending, listed,
	// cancellable), due in an hour.
	Schedule(line string) (ToolCall, error)
	// Watch makes a real watch (/watch) of an empty directory of the
	// scenario's, which runs line on a change (none comes).
	Watch(line string) (ToolCall, error)
	// Ask sends a permission request and returns the channel of its
	// answer, and a function that withdraws it ($/cancel_request) and
	// returns once the withdrawal is queued.
	Ask(p *acp.PermissionRequest) (<-chan Answer, func())

	// Begin starts foreground work of the scenario that no prompt asked
	// for (the first state_update says so in its _meta), and returns once
	// it holds the foreground.
	Begin() error
	// End ends the scenario's foreground work with stopReason (and
	// failure, for the error stop reason).
	End(stopReason string, failure *acp.Error)
	// Idle waits until no foreground work runs in the session.
	Idle() error
}

// A Command is a command a scenario runs (Stage.Run).
type Command interface {
	Terminal() string // its terminal's id
	ToolCall() string // its tool call's id
	// Open lets a gated command go on: it creates the file that
	// $SHELLAGENT_GATE names.
	Open()
	// WaitOutput waits until the terminal has written text, and every
	// connection that keeps up with it has taken it: what comes next is
	// sent after it.
	WaitOutput(text string) error
	// WaitExit waits until the terminal's exitStatus has been sent.
	WaitExit() error
	// Replace sends a replacement snapshot of the terminal's output, and
	// returns once the connection has taken its copy.
	Replace() error
	// Stop stops the terminal (SIGTERM, SIGKILL after 1s at most).
	Stop()
}

// A ToolCall is a real tool call a scenario started: a scheduled wakeup
// or a watch.
type ToolCall interface {
	ID() string
	// Fire fires a wakeup now: its command runs as new foreground work.
	Fire()
	// Pause pauses a watch (paused) or resumes it (in_progress), as
	// /pause and /resume do.
	Pause(paused bool)
	// Cancel cancels it, as tool_call/cancel does.
	Cancel()
}

// How says how Run runs a command.
type How struct {
	// Background: it runs on its own, listed as its terminal. Otherwise it
	// is the scenario's foreground work (unlisted).
	Background bool
	// Codex (with Background): its tool call stays in_progress until the
	// command ends, as Codex's command items do; otherwise it completes
	// once the command is handed off, as Claude Code's Bash tool does.
	Codex bool
	// Gated: $SHELLAGENT_GATE names a file that Open creates.
	Gated bool
}

// Snapshot is a state_update a scenario asks for: the current state and
// list, unless it says otherwise.
type Snapshot struct {
	// State, if not empty, is the state reported. A standard one
	// (running, idle, requires_action) becomes the session's foreground
	// state; any other is reported once.
	State      string
	StopReason string
	// Unreported leaves the list out.
	Unreported bool
	// Raw is sent in place of the list (Invalid scenarios only).
	Raw []byte
}

// Answer is the answer to a permission request.
type Answer struct {
	Outcome  string // "selected" or "cancelled"; "" when Err is set
	OptionID string
	Err      error // no answer: the request was withdrawn, or the client went away
}

// await waits for ch, for at most d or until st's Context ends.
func await(st Stage, ch <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return errTimeout
	case <-st.Context().Done():
		return context.Cause(st.Context())
	}
}

// pause waits for d, or until st's Context ends.
func pause(st Stage, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-st.Context().Done():
		return context.Cause(st.Context())
	}
}
