package work

import (
	"context"
	"log/slog"
	"time"

	"shellagent/acp"
)

// A RunHost is a Host whose kinds of work launch commands of their own
// for their tool calls (a stack's services: supervisor/service). The
// session is one. Its methods run on the session's actor.
type RunHost interface {
	Host
	// Launch runs spec's command in a new terminal of the session, as the
	// run of tool call c: c is in_progress, its content references the
	// terminal (and spec.Note's text), and the update that says so and
	// the terminal's announcement are sent. The run is not listed (Run.List).
	// If the command cannot start, the error says which step failed
	// (not the command line, the kind's own) and c is left as it was,
	// in_progress: its kind decides what follows (a service fails, or
	// restarts under its policy).
	Launch(c Call, spec LaunchSpec) (Run, error)
	// TerminalRun returns the session's terminal id as a Run, or nil if
	// there is none (or it was retired): for a kind that takes over its
	// runs in the new image of an upgrade in place.
	TerminalRun(id string) Run
	// Notice sends n, a session/notice.
	Notice(n *acp.Notice)
	// Config is the session's configuration, as a kind reads it.
	Config() Config
	// Tail is what /tail id n answers: the last n lines of terminal id's
	// output, as text, or why there are none.
	Tail(id string, n int) string
}

// LaunchSpec is a command that RunHost.Launch runs.
type LaunchSpec struct {
	Line string   // the command line, run by the session's shell
	Dir  string   // its directory; "": the session's
	Env  []string // added to the session's environment
	// Note, if not nil, is the text that follows the terminal in the
	// tool call's content, given the terminal's id.
	Note func(id string) string
}

// Config is what a kind reads of the session's configuration.
type Config struct {
	Shell    string       // the shell commands run with
	Env      []string     // the environment they run with
	StateDir string       // where the state kept across runs goes; "": none
	LogCap   int64        // caps each service's log (0: its default)
	Logger   *slog.Logger // hears what fails
	// Probe runs line with the shell, in dir with env (the complete
	// environment), without a terminal and held as a terminal's
	// processes are, until it exits or ctx ends; nil if it exited 0.
	// Nothing it started runs on once it has returned.
	Probe func(ctx context.Context, line, dir string, env []string) error
}

// A Run is a terminal that a kind launched for its tool call
// (RunHost.Launch). Its methods run on the session's actor.
type Run interface {
	Terminal
	// Started is when its command started.
	Started() time.Time
	// Running reports whether its command runs and nobody stopped it.
	Running() bool
	// Retired reports whether the session retired it (its output is gone).
	Retired() bool
	// Stop stops its command: TERM, then KILL after the session's kill
	// grace. Its exit comes as for any run (RunWatcher).
	Stop()
	// Pid is the pid of its command's process, 0 if it has none (a
	// terminal of an upgrade that was not taken over).
	Pid() int
	// Members are the pids of its command's processes, read from /proc:
	// slow work (Host.Slow first). Nil if it has none, or they cannot be
	// read.
	Members() []int
	// List lists it in the background list: in place of its tool call if
	// the call is listed, else at its end. An exited run is not listed.
	List()
}

// A RunWatcher is a Task whose tool call launched runs (RunHost.Launch):
// it hears of their exits.
type RunWatcher interface {
	// RunExited serves the exit of its run r, on the actor, once r's
	// exitStatus is out and r has left the background list; onItsOwn
	// reports that nobody stopped it. The TerminalWatchers hear of the
	// exit after it.
	RunExited(r Run, onItsOwn bool)
}
