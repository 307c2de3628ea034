// Package work is the contract between a session (package supervisor)
// and a kind of work that lives in a package of its own (supervisor/jobs:
// /after and /every): what the kind implements (Task, Kind) and what the
// session gives it (Host, Call, Turn, Terminal); a kind whose tool calls
// launch commands of their own (supervisor/service) is given a RunHost,
// which launches each as a Run and tells the task of its exit
// (RunWatcher: run.go); a kind that waits for the client's answer (an
// approval, supervisor/approval) hears what becomes of the client
// (Asker). A kind's slash commands are its own too: each a Command
// (command.go), which supervisor's table assembles. It imports nothing
// of the session (only acp, the protocol's vocabulary, and outputbuf, a
// terminal's output), so that supervisor imports the kinds and the kinds
// import only this.
//
// A session's state belongs to its actor, one goroutine (supervisor's
// actor.go). Every method here runs on that actor, and every callback a
// kind is given is called there, but Host.Do, which any goroutine may
// call to enter it. A kind keeps its Host and its Call for as long as it
// lives: they stay valid, and do nothing harmful once the session or the
// tool call has ended.
//
// supervisor/work/worktest is a fake session, for the kinds' tests.
package work

import (
	"encoding/json"
	"fmt"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
)

// A Task is the work of a tool call that is no running command (a
// scheduled job, a wait, a watch): the session lists, cancels, closes and
// hands it over through these methods, never asking which kind it is.
// They run on the session's actor.
type Task interface {
	// Listing is its line in /ps.
	Listing(now time.Time) string
	// Cancellable reports whether tool_call/cancel (and /stop) applies,
	// while its tool call is not final.
	Cancellable() bool
	// Cancel ends it as an accepted tool_call/cancel does.
	Cancel()
	// Close ends it as the session's close does.
	Close()
	// HandOver returns what the next image of an upgrade in place needs
	// to go on with it, as a value encoding/json encodes, and the Name of
	// its Kind, under which it is written and whose Thaw is given it
	// back; frozen is nil if it is not handed over.
	HandOver() (kind string, frozen any)
}

// A Kind is a kind of work as the session knows it before any of it
// exists: how it goes on in the new image of an upgrade in place.
type Kind struct {
	// Name is what its frozen form (Task.HandOver) is written under: a
	// name of the upgrade's format, never changed.
	Name string
	// Thaw makes frozen, as the old image wrote it, the task of tool call
	// c again, on the actor of the new image's session h. The tool call
	// has its state, content and listing as they were; Thaw re-arms what
	// must go on (or ends the call, saying why) and returns the task.
	Thaw func(h Host, c Call, frozen json.RawMessage) (Task, error)
}

// A Host is a session as a kind of work sees it. Its methods run on the
// session's actor, but Do.
type Host interface {
	// Now is the session's clock (tests move it by hand).
	Now() time.Time
	// After calls f on the session's actor, in an entry of its own, once
	// d has passed on the session's clock, unless the timer it returns
	// is stopped first.
	After(d time.Duration, f func()) Timer
	// Do calls f on the session's actor, in an entry of its own, after
	// the entries queued before it. Any goroutine may call it but the
	// actor's own; it returns once f is queued.
	Do(f func())
	// Open reports whether the session is open (not closing).
	Open() bool
	// Cwd is the session's working directory.
	Cwd() string
	// Say sends an agent_message.
	Say(text string)
	// Slow announces that the current entry is about to do slow work (a
	// walk of a big tree): the reads that do not wait for it are answered
	// with what the session is now.
	Slow()
	// Find returns the tool call id and its task, if the task is a kind's
	// of a package of its own (nil otherwise); or, if there is no such
	// tool call, c is nil and terminal reports whether id is a terminal's.
	Find(id string) (c Call, t Task, terminal bool)
	// NewCall registers a new tool call of the session, whose work is t,
	// in the state that spec says. It is neither announced nor listed:
	// that is the kind's (Call.Send, Call.List), once the task can
	// answer for it.
	NewCall(spec CallSpec, t Task) Call
	// Run runs line as new foreground work of origin (a comparable
	// value, the kind's own: its task), a turn of its own that no prompt
	// brought: at once, or held behind the turns that hold or wait for
	// the foreground.
	Run(line string, origin any)
	// RunOf returns the run of origin (Run) that holds or waits for the
	// foreground, or NoRun.
	RunOf(origin any) RunID
	// DropRuns drops the runs of origin that wait for the foreground.
	DropRuns(origin any)
	// Terminal returns the session's terminal id, or nil if there is none
	// (or it was retired).
	Terminal(id string) Terminal
	// EndTurn ends the foreground turn with stopReason, if the work of
	// tool call c holds it (Turn.Hold); the next held turn starts.
	EndTurn(c Call, stopReason string)
}

// A Turn is the foreground turn that a kind's command holds (the hold of
// its entry in supervisor's command table). Its methods run on the
// session's actor, while the command is served.
type Turn interface {
	// Hold makes fg, the work of tool call c, hold the foreground: the
	// session reports running. The turn ends with Host.EndTurn, or End.
	// c is nil for work that has no tool call of its own (a stack's /up).
	Hold(c Call, fg Foreground)
	// Refuse reports running, says text, and ends the turn: the command
	// did nothing.
	Refuse(text string)
	// Holds reports whether the work it was given (Hold) still holds the
	// foreground: not moved to the background, cancelled, or ended by
	// the session's close.
	Holds() bool
	// End ends the turn with stopReason, if its work still holds the
	// foreground; the next held turn starts.
	End(stopReason string)
}

// A Foreground is a kind's work while it holds the foreground turn
// (Turn.Hold). Its methods run on the session's actor.
type Foreground interface {
	// CancelTurn serves session/cancel of its turn.
	CancelTurn()
	// ToBackground serves /bg alone: it moves to the background, or says
	// why not.
	ToBackground()
}

// A Terminal is a terminal of the session, as a kind reads it (and
// types into it: supervisor/terminput). Its methods run on the session's
// actor; its Output may be read anywhere.
type Terminal interface {
	ID() string
	// Output is its output ring.
	Output() *outputbuf.Ring
	// Exited reports whether it exited; Exit is then its exitStatus.
	Exited() bool
	Exit() *acp.ExitStatus

	// Launched reports whether its process started (a command waits for
	// its permission before it has one).
	Launched() bool
	// Write writes data to the input of its started process without
	// blocking, and returns how many bytes were written; ptyio's
	// ErrInputFull says its program is not reading. Input written may
	// be read, after which a new wait for input is noticed.
	Write(data []byte) (n int, err error)
	// Resize sets the size of its started process and sends a
	// terminal_update with it; size is valid (acp.TerminalSize.Validate).
	Resize(size acp.TerminalSize) error
}

// A TerminalWatcher is a Task that hears of the exits of the session's
// terminals (a wait).
type TerminalWatcher interface {
	// TerminalExited serves the exit of terminal t, on the actor, once the
	// list and the turn say it exited.
	TerminalExited(t Terminal)
}

// An Asker is a Task that waits for the answer of the client the session
// reports to (an approval, supervisor/approval): it hears what becomes of
// that client.
type Asker interface {
	// Reask asks the client that took the session (session/resume on
	// another connection) again, once its tool call was sent to it; the
	// request to the client it was taken from is withdrawn.
	Reask()
	// Unanswered ends the wait as an answer err would: the request will
	// get none (the daemon's upgrade in place).
	Unanswered(err error)
}

// RunID names one run (Host.Run) while it holds or waits for the
// foreground: two answers of Host.RunOf are equal if they name the same
// run. It holds nothing of the run.
type RunID int

// NoRun is the RunID of no run.
const NoRun RunID = 0

// A Timer is an armed Host.After.
type Timer interface {
	// Stop prevents the call if it has not begun; it reports whether it
	// did.
	Stop() bool
}

// CallSpec is what a new tool call is (Host.NewCall).
type CallSpec struct {
	Kind, Title string // its tool kind ("other", "search") and title
	Input       any    // its rawInput
	// Scheduled: it is pending, waiting to fire (a job); Asking: it is
	// pending, its command waiting for the user's permission (an
	// approval, supervisor/approval); else it is in_progress.
	Scheduled, Asking bool
}

// A Call is the tool call of a kind's task, as the session reports it.
// Its methods run on the session's actor.
type Call interface {
	ID() string
	Title() string
	// Status is its wire status: pending, in_progress, paused, or final.
	Status() string
	// Final reports whether it has its final status.
	Final() bool
	// Send sends its current state as a full tool_call_update.
	Send()
	// List lists it in the background list, if it is not final.
	List()
	// SetContent makes content its content, sent with its next update.
	SetContent(content ...acp.ToolCallContent)
	// SetPaused makes it paused (a watch that /pause suspended), or, not
	// paused, in_progress again; sent with its next update.
	SetPaused(paused bool)
	// End gives it its final status (completed, failed, cancelled), sends
	// the update that says so, and unlists it: RFD rule 3, in the one
	// order it allows. A call that is final already is left as it is.
	End(status string)
}

// Age is a duration as /ps shows an age or a time left: whole seconds,
// never negative.
func Age(d time.Duration) string {
	return max(d, 0).Round(time.Second).String()
}

// ExitText says how a terminal ended: "exited with code 3", "ended by
// SIGSEGV".
func ExitText(es *acp.ExitStatus) string {
	switch {
	case es.Signal != "" && es.ExitCode != nil:
		return fmt.Sprintf("exited with code %d after %s", *es.ExitCode, es.Signal)
	case es.Signal != "":
		return "ended by " + es.Signal
	case es.ExitCode != nil:
		return fmt.Sprintf("exited with code %d", *es.ExitCode)
	}
	return "ended"
}

// Shorten cuts text to at most n runes, marking the cut.
func Shorten(text string, n int) string {
	if r := []rune(text); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return text
}

// Liveness is what Live reads of a terminal (a Terminal has it).
type Liveness interface {
	Exited() bool
	Launched() bool
}

// Live returns nil if t, terminal id (nil if the session has none), runs,
// or the -32602 error that says why not: the rule of every method that
// acts on a running terminal. It runs where t's methods may.
func Live(id string, t Liveness) error {
	switch {
	case t == nil:
		return acp.InvalidParams("terminalId: no terminal %q in this session", id)
	case t.Exited():
		return acp.InvalidParams("terminalId: %s has already exited", id)
	case !t.Launched():
		return acp.InvalidParams("terminalId: %s has not started yet", id)
	}
	return nil
}
