// Package ptyio starts shell commands in pseudo-terminals, drains their
// output, and reports when every process of the command is gone.
//
// A command runs as "SHELL -c LINE" in a new process session whose
// controlling terminal is a fresh PTY, inside a contain.Group: everything
// it starts belongs to the command however it detaches (setsid, double
// fork, nohup), and the command is live while any of it runs, not only
// while the shell does: "npm run dev &" outlives its shell. Waiting costs no
// OS thread per terminal: the PTY master, the shell's exit (procexit) and
// the group's liveness are served by Go's runtime poller (on macOS and
// FreeBSD, exits come through procexit's one kqueue goroutine), so an idle
// terminal is two parked goroutines (three in contain's subreaper and
// session modes).
//
// When a session leader exits, the kernel hangs up its terminal and sends
// SIGHUP to the foreground process group, which in a non-interactive shell
// holds the "&" jobs too. To keep such jobs alive, as a terminal that stays
// open would, commands run with SIGHUP ignored (as under nohup). A shell of
// the Bourne family (sh, ash, dash, bash, ksh, mksh, zsh, by base name) runs
// in one exec, as a plain SHELL -c LINE would:
//
//	SHELL -c "trap '' HUP; LINE"
//
// The shell and everything it starts ignore SIGHUP; the trap on LINE's first
// line keeps the shell's line numbers (bash quotes it in a syntax error of
// line 1), and Members shows the shell's line without it. Any other shell is
// started by /bin/sh, which ignores SIGHUP and execs SHELL -c LINE: a second
// exec, which doubled the time to a first byte. The agent cannot set the
// disposition itself: Go's ForkExec resets in the child every signal the
// parent handles, and the agent handles SIGHUP (a stop signal); ignoring it
// around the fork would lose a hangup that came meanwhile. Either way the
// process tree is SHELL -c LINE and costs no memory; a resident session
// leader would cost a process per terminal, and job control (set -m) is
// shell-dependent. Unlike under the wrapper, a Bourne shell has SIGHUP at
// its default until the trap runs (startup files read before LINE, such as
// zsh's .zshenv or bash's $BASH_ENV, run so), and LINE may trap SIGHUP
// again, which a signal ignored on entry would not allow.
//
// A line of LongLine bytes or more, which the kernel may not take in an
// argument, reaches a shell of the Bourne family in a file, its
// descriptor 3, which sets the positional parameters to the line
// (lineFile). The shell reads it, closes it and runs the line in itself:
//
//	SHELL -c "trap '' HUP; . /dev/stdin <&3 && exec 3<&- && eval \"shift; \$1\""
//
// Files: ptyio.go (the API), local.go (Local: the PTY, the fork into the
// containment, the goroutines that read the PTY and follow the process),
// openpty_linux.go and openpty_other.go (opening a PTY pair),
// linefile_linux.go and linefile_other.go (the file of a long line), spare.go
// (one opened ahead of the next launch), prepare.go (when the spares of
// the next launch are made), probe.go (a command run without a terminal),
// input_linux.go (seeing a program blocked reading its terminal),
// input_other.go (which reports that as unsupported elsewhere),
// handover.go, adopt_linux.go and adopt_other.go (freezing a command and
// adopting it in the next image of an exec in place).
package ptyio

import (
	"context"
	"errors"
	"io"
	"time"
)

// Size is a terminal size in character cells.
type Size struct {
	Cols, Rows uint16
}

// Command is a shell command line to start.
type Command struct {
	Shell string   // absolute path of the shell; run as Shell -c Line
	Line  string   // the command line
	Dir   string   // working directory
	Env   []string // the complete environment
	Size  Size
}

// Status is a wait status: an exit code, or the signal that killed the
// process; the zero Status means it is unknown.
type Status struct {
	Exited bool   // the process called exit; Code is valid
	Code   int    // exit code
	Signal string // name of the signal that killed it, such as "SIGKILL"
}

// Exit is how a command ended.
type Exit struct {
	Shell Status // the shell's own wait status
	// Stopped is the last signal the agent sent the command's processes
	// that reached a live one: "SIGTERM" from Stop, or "SIGKILL", from Stop
	// after the grace or from its containment group, whoever sent it
	// (contain.Group.Killed: the Containment's KillAll too); or "" if
	// none did: a stop that raced the command's own end and found only
	// processes already exiting leaves the natural status alone.
	Stopped string
	// Err collects what went wrong while following or stopping the
	// command; the exit is reported all the same.
	Err error
	// Left lists the processes still there when the command was
	// reported ended without them: a SIGKILL went out to them GiveUp
	// ago and they have not gone (a process in uninterruptible sleep,
	// on a dead NFS or FUSE mount, say). Stopped is then "SIGKILL". Their
	// group stays held and is released once they go; nothing more is
	// reported of them. Empty for every other exit.
	Left []Leftover
}

// A Leftover is a process of a command that outlived a SIGKILL by
// GiveUp.
type Leftover struct {
	Pid     int
	Command string // its command line, arguments joined by spaces
	State   string // its state as /proc/PID/stat shows it ("D": uninterruptible sleep); "" where unknown
}

// GiveUp is how long after the first SIGKILL a stop sent a command's
// processes the command is reported ended (Events.Exited, with Exit.Left)
// though some of them are still there: the kernel has not let them act
// on it, and an editor waiting for the command's end would wait as long
// as they do. Local.GiveUp, if set, replaces it.
const GiveUp = 5 * time.Second

// EndGiveUp replaces GiveUp at the agent's end (Local.Ending): how long
// after the end's wait for the stops has run out, and the containment
// has killed what is left, a command whose processes are still there is
// reported ended. What a SIGKILL reaches goes in milliseconds, or in a
// few hundred on a loaded machine; the rest may never go.
const EndGiveUp = 250 * time.Millisecond

// Events receives a process's lifecycle, each method at most once and in
// this order, from the process's own goroutine. Implementations must not
// block.
type Events interface {
	// ShellReturned reports that the shell exited while other processes of
	// its session kept running (a command such as "npm run dev &"). It is
	// not called when the shell was the last process.
	ShellReturned(Status)
	// Exited reports that no process of the session remains and that its
	// output has been drained into the output writer.
	Exited(Exit)
}

// Member is a live process of a command.
type Member struct {
	Pid     int
	Command string // its command line, arguments joined by spaces
}

// Process is a started command and every process it started.
type Process interface {
	// Pid returns the shell's process id.
	Pid() int
	// Members lists the command's live processes; none once it has ended.
	Members() ([]Member, error)
	// Stop starts stopping every process of the command: SIGTERM, SIGCONT
	// and SIGHUP now, SIGKILL to what remains after grace. A second call
	// skips the rest of the grace. Stop never blocks.
	Stop(grace time.Duration)
	// Write writes p to the terminal's input, as typing would. It never
	// blocks: when the terminal's input buffer is full (the program does
	// not read) it returns how much it wrote and ErrInputFull.
	Write(p []byte) (n int, err error)
	// Resize sets the terminal's size; the kernel sends SIGWINCH to the
	// terminal's foreground process group.
	Resize(Size) error
	// InputWait reports whether a process of the terminal's foreground
	// process group is blocked reading the terminal, from a fresh look
	// (on Linux, at a few files of /proc per process of that group). It
	// returns an error wrapping errors.ErrUnsupported where the system
	// cannot tell.
	InputWait() (InputWait, error)
}

// ErrInputFull is the error of a Process.Write that found the terminal's
// input buffer full: the program is not reading its input.
var ErrInputFull = errors.New("the terminal's input buffer is full: the program is not reading")

// InputWait is what Process.InputWait found: a process blocked reading
// the terminal, or none.
type InputWait struct {
	Pid int // the process that waits; 0 if none does
	// Reads counts the read calls Pid had completed when it was seen
	// waiting (-1 if unknown): the same Pid seen waiting with another
	// count read something in between, and waits anew.
	Reads int64
}

// A Launcher starts commands. The local PTY is one; the supervisor knows
// nothing else about how commands run.
type Launcher interface {
	// Launch starts cmd. Its output is written to out, one Write at a time
	// from the process's own goroutine, until Events.Exited; every byte
	// written to the terminal before its last process ended is written to
	// out before Exited. out may block (backpressure): the terminal is then
	// not read, and its writers block in the kernel, until out returns.
	// If Launch fails, nothing it started is left running.
	Launch(cmd Command, out io.Writer, ev Events) (Process, error)
	// Probe runs cmd without a terminal (cmd.Size is not used), held as
	// a launch's processes are, until its shell exits or ctx ends, and
	// reports nil if the shell exited 0. When it returns, nothing cmd
	// started runs on, however it detached: a check such as a service's
	// exec: ready condition leaves nothing behind.
	Probe(ctx context.Context, cmd Command) error
}
