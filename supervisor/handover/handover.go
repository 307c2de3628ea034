// Package handover is the format of an upgrade in place (daemon.Host):
// what the old image of the daemon writes of its sessions, and the new
// one, the same process after an exec, reads back. The supervisor gathers
// it from its sessions (supervisor's freeze.go) and builds them again
// from it (thaw.go); everything here needs none of a session's state.
//
// The old image stops every session's actor first, so that nothing acts
// while it writes: no PTY is read (each terminal's reader parks, and its
// ring holds what was read), no process event, timer or answer is served
// (they queue), nothing launches. The work of a session that is not a
// terminal is handed over too, or ended as the end of its connection
// ends it (the upgrade closes every connection first): prompts held for
// the foreground are answered -32800; a request for permission gets no
// answer (ErrUpgraded), and its command is not run; the foreground turn
// ends, its work moved to the background as /bg moves it; scheduled
// jobs, waits, watches and the services of a stack go on in the new image
// from what a Task holds (each kind's frozen form, in its own package,
// thawed through its work.Kind). A try of a service's exec: ready probe,
// which runs without a terminal, is not handed over: the supervisor ends
// those in flight before the first session stops (their groups killed and
// released), and the new image tries again until the same deadline. A
// playing scenario (the kit's) and a
// session that is closing are not handed over: Await refuses, naming it
// (Blocked), before anything stops.
//
// The state is JSON (State, this file); the terminals' output goes in a
// file of its own, the first handed over (Writer.Output), and a live
// terminal's PTY master and process handle after it, which a Process
// names by index. The bytes cross the exec: the old image's and the new
// one's must read each other, so a field is never renamed, retyped or
// given another meaning (TestFormat pins them).
//
// Files: handover.go, the format; write.go, the Writer that the old image
// writes it with, and collects the files; read.go, the Reader the new
// image reads it and takes the files with, and what a lost terminal's
// process is (Gone); precheck.go, what holds an upgrade back (Await,
// Blocked), and what a request for permission is answered (ErrUpgraded).
package handover

import (
	"encoding/json"
	"time"

	"shellagent/acp"
	"shellagent/internal/stack"
	"shellagent/ptyio"
	"shellagent/supervisor/record"
	"shellagent/supervisor/terminput"
)

// State is what an upgrade hands over: the Supervisor's sessions.
type State struct {
	FrozenAt time.Time // when the first session stopped: output is held back from then on
	Frozen   time.Time // when the last session stopped and was written
	Flushed  time.Time // when the history on disk was complete
	Output   int       // the index of the file that holds the rings' bytes (Terminal.Output)
	Created  int
	Closed   []string
	Sessions []Session
}

// Session is one session: what its state holds, by id.
type Session struct {
	ID, Cwd, Title, FgState string
	Settings                Settings
	UpdatedAt               time.Time
	// Detached is when the session's last connection went, if none was
	// attached at the freeze; Expires is when the detached TTL closes it,
	// if armed. The new image keeps both rather than count from the
	// upgrade (zero in a state written before they were: from the thaw).
	Detached         time.Time      `json:",omitzero"`
	Expires          time.Time      `json:",omitzero"`
	Messages         int            // the last message id issued
	Seq              map[string]int // the registry's last ids
	History          []Entry        // the outbox's history, forgotten items as {}
	Calls            []Call         // the registry's tool calls
	Terminals        []Terminal
	Exited, Finished []string       // the registry's retention order
	List             []Entry        // the background list
	Stack            *Stack         `json:",omitempty"`
	Durable          *record.Frozen `json:",omitempty"` // its history's record of each item
}

// Stack is the session's stack: its file as last read, and its services
// by name, each the task of a tool call.
type Stack struct {
	File     *stack.Stack
	Names    []string
	Services map[string]string // name: the id of its tool call
}

// Settings are the session's settings.
type Settings struct {
	ForegroundTimeout, KillGrace time.Duration
	Ask, ClientChecks            bool
	Notify                       terminput.Notify
}

// Entry is a history entry or a list item: a message, or a tool call or
// terminal by id; neither, a forgotten item.
type Entry struct {
	Msg  *acp.Message `json:",omitempty"`
	Call string       `json:",omitempty"`
	Term string       `json:",omitempty"`
}

// Call is a tool call. State is the supervisor's callState, whose values
// are part of the format.
type Call struct {
	ID, Title, Kind, Outcome string
	State                    int
	Input, Output            any                   `json:",omitempty"`
	Content                  []acp.ToolCallContent `json:",omitempty"`
	Caps                     acp.Capabilities      `json:",omitempty"`
	Term                     string                `json:",omitempty"`
	Hist                     int
	Task                     Task `json:",omitempty"`
}

// Task is the work of a tool call that is not a command: what the new
// image needs to go on with it, under the one name of its kind
// (work.Kind.Name: "Job", "Wait", "Watch", "Service").
type Task map[string]json.RawMessage

// TaskOf is the Task that a work.Task's HandOver returned: frozen
// written under kind, or nil if frozen is nil.
func TaskOf(kind string, frozen any) (Task, error) {
	if frozen == nil {
		return nil, nil
	}
	data, err := json.Marshal(frozen)
	if err != nil {
		return nil, err
	}
	return Task{kind: data}, nil
}

// Terminal is a terminal, its ring, and, while it runs, its process.
// State is the supervisor's termState, whose values are part of the
// format.
type Terminal struct {
	ID, Line, Cwd, Call string
	Size                ptyio.Size
	Started             time.Time
	State               int
	Returned            *ptyio.Status   `json:",omitempty"`
	Exit                *acp.ExitStatus `json:",omitempty"`
	Hist                int
	Cap                 int   // the ring's capacity
	Output              int64 // where what the ring holds starts in the output file
	Len                 int   // how many bytes it holds, ending at End
	End                 int64
	Live                *Process `json:",omitempty"`
}

// Process is a live terminal's process: Master and Shell index the files
// handed over (its PTY master and its process handle).
type Process struct {
	Pid, Master, Shell int
	Group              int64
	Tty                string
}
