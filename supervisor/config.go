package supervisor

import (
	"context"
	"log/slog"
	"os"
	"time"

	"shellagent/internal/journal"
	"shellagent/ptyio"
	"shellagent/supervisor/kit"
)

// Config is how a Supervisor runs commands, for every session. Zero fields
// take the defaults in parentheses. A session's settings, which a client
// can change (supervisor/settings), start from its ForegroundTimeout,
// KillGrace and ClientChecks.
type Config struct {
	Shell             string        // shell to run commands with ($SHELL, else /bin/sh)
	ForegroundTimeout time.Duration // detach foreground commands after this; 0 = never
	KillGrace         time.Duration // SIGTERM to SIGKILL (3s)
	Scrollback        int           // ring buffer bytes per terminal (1 MiB)
	Size              ptyio.Size    // terminal size (120x40)
	Env               []string      // base environment (os.Environ())
	Launcher          ptyio.Launcher
	Version           string
	Log               *slog.Logger
	// Swept, if not nil, is closed once what dead agents left has been
	// swept (contain.Containment.Sweep): no turn starts before, so that a
	// command run again after a crash does not meet the processes of its
	// first run, such as a dev server that still holds its port.
	Swept <-chan struct{}
	// SequentialIDs names sessions sess_1, sess_2, ... instead of random
	// ids, for reproducible transcripts.
	SequentialIDs bool
	// Containment names how the Launcher holds each terminal's processes
	// ("cgroup", "subreaper", "session"), reported in the initialize
	// response as _meta.shellagent.containment; "" reports nothing.
	Containment string
	// Detached is what a session does when the connection it reports to
	// goes away (Supervisor.Detach). The zero value, CloseDetached, is
	// what an agent on stdio does.
	Detached DetachPolicy
	// DetachedTTL, under KeepDetached, closes a session (as session/close
	// does) once it has had no client and no live work for this long:
	// no foreground turn, nothing in its background list (no terminal
	// running, no job scheduled, no command waiting for permission). A
	// session whose work runs is kept; its clock starts when the work
	// ends, or when the session is detached, whichever is later. 0 keeps
	// every detached session until it is closed.
	DetachedTTL time.Duration
	// ClientChecks turns the client_checks setting on in every new
	// session: what a client does against the protocol's client-side
	// rules is reported to it as a warning notice (clientcheck.go).
	ClientChecks bool
	// History, if not nil, keeps each session's history on disk (supervisor/record):
	// session/list lists past sessions, session/resume makes one live
	// again, session/delete removes one. nil keeps nothing.
	History *journal.Store
	// Kit serves /scenario: the client developers' kit (package
	// scenario.Kit). Without one, /scenario plays nothing.
	Kit kit.Kit
	// StateDir is where the state kept across runs goes: a stack's
	// service logs under STATE/logs (supervisor/service). "" keeps none.
	StateDir string

	// logCap, for tests, caps each service log at this instead of
	// stack.MaxLogSize (0).
	logCap int64
	// clock, for tests, is the clock of jobs, foreground timeouts and
	// detached expiries (clock.go); nil is the real one.
	clock clock
}

// DetachPolicy is what happens to a session whose connection goes away.
type DetachPolicy int

const (
	// CloseDetached closes the session as session/close does: its work is
	// stopped, and its final updates go to the connection that went away,
	// for as long as it can still write them. An agent on stdio, whose one
	// connection ends with the process, works this way.
	CloseDetached DetachPolicy = iota
	// KeepDetached leaves the session running with no client: its commands
	// run on, their output accumulates in the rings (no backpressure: a
	// ring that no connection follows never blocks), scheduled jobs fire,
	// and commands that need permission fail for want of someone to ask.
	// session/resume from another connection attaches it again.
	KeepDetached
)

// Defaults.
const (
	DefaultForegroundTimeout = 10 * time.Second
	DefaultKillGrace         = 3 * time.Second
	DefaultScrollback        = 1 << 20
)

func (c Config) withDefaults() Config {
	if c.Shell == "" {
		c.Shell = os.Getenv("SHELL")
	}
	if c.Shell == "" {
		c.Shell = "/bin/sh"
	}
	if c.KillGrace <= 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.Scrollback <= 0 {
		c.Scrollback = DefaultScrollback
	}
	if c.Size.Cols == 0 {
		c.Size.Cols = 120
	}
	if c.Size.Rows == 0 {
		c.Size.Rows = 40
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	if c.Launcher == nil {
		c.Launcher = ptyio.Local{}
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.clock == nil {
		c.clock = realClock{}
	}
	return c
}

// probe runs line with the shell through the Launcher, without a
// terminal: a kind's check, such as a service's exec: ready condition
// (work.Config.Probe).
func (c *Config) probe(ctx context.Context, line, dir string, env []string) error {
	return c.Launcher.Probe(ctx, ptyio.Command{Shell: c.Shell, Line: line, Dir: dir, Env: env})
}
