package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/term"

	"shellagent/daemon"
	"shellagent/lineclient"
	"shellagent/supervisor"
)

// clientOptions are the client's settings from the command line.
type clientOptions struct {
	trace       string
	cwd         string
	permissions string
	settings    []lineclient.Setting
	agent       []string // after "--"; empty: this binary in agent mode (--daemon: a relay)
	daemon      bool     // the agent is a daemon's relay: leaving detaches
	socket      string   // the daemon's socket, for the relay and --resume's hint
	resume      resumeFlag
}

// resumeFlag is --resume [ID]: set, with the session's id or "" for the
// newest session of the directory.
type resumeFlag struct {
	set bool
	id  string
}

func (f *resumeFlag) String() string { return f.id }

func (f *resumeFlag) Set(v string) error {
	switch v {
	case "false":
		*f = resumeFlag{}
	case "true":
		*f = resumeFlag{set: true}
	default:
		*f = resumeFlag{set: true, id: v}
	}
	return nil
}

// IsBoolFlag lets --resume stand alone; its ID may follow it.
func (f *resumeFlag) IsBoolFlag() bool { return true }

// clientCommandLine parses "shellagent client"'s arguments. done reports
// that the command line has been dealt with (help or an error) and the
// process should exit with code.
func clientCommandLine(args []string) (opts clientOptions, code int, done bool) {
	fs := flag.NewFlagSet("shellagent client", flag.ContinueOnError)
	fs.StringVar(&opts.trace, "trace", "", "write the raw JSON-RPC exchange to `FILE`, one {\"client\":…} or {\"agent\":…} object per line")
	fs.StringVar(&opts.cwd, "cwd", "", "the session's working `DIR` (default the current directory)")
	fs.Func("set", "set a session config option, `ID=VALUE`, e.g. foreground_timeout=1s; repeatable", func(v string) error {
		id, value, ok := strings.Cut(v, "=")
		if !ok || id == "" || value == "" {
			return errors.New("want ID=VALUE, e.g. foreground_timeout=1s")
		}
		opts.settings = append(opts.settings, lineclient.Setting{ID: id, Value: value})
		return nil
	})
	fs.Func("permissions", "answer permission requests: `ask` (the next input line answers), allow or reject (default ask on a terminal, else reject)", func(v string) error {
		if !slices.Contains([]string{"ask", "allow", "reject"}, v) {
			return errors.New("want ask, allow or reject")
		}
		opts.permissions = v
		return nil
	})
	fs.BoolVar(&opts.daemon, "daemon", false, "talk to the daemon through a relay (this shellagent --daemon, or the relay command after --): the end of the input, Ctrl-D and /quit detach, and the session's work runs on; /close closes it")
	fs.StringVar(&opts.socket, "socket", "", "with --daemon: the daemon's socket `PATH`, given to the relay (default as shellagent --daemon finds it)")
	fs.Var(&opts.resume, "resume", "with --daemon: reattach to session `[ID]` (default the newest session of --cwd or the current directory) instead of opening one")
	rest, err := parseFlags(fs, args, true)
	if errors.Is(err, flag.ErrHelp) {
		return opts, printHelp(clientHelp(fs)), true
	}
	if err != nil {
		return opts, commandLineError(fs.Name(), err), true
	}
	if len(rest) > 0 && opts.resume.set && opts.resume.id == "" && args[len(args)-len(rest)-1] != "--" && !strings.HasPrefix(rest[0], "-") {
		// --resume ID: the flags go on after the ID.
		opts.resume.id, args = rest[0], rest[1:]
		if rest, err = parseFlags(fs, args, true); err != nil {
			return opts, commandLineError(fs.Name(), err), true
		}
	}
	if len(rest) > 0 {
		if i := len(args) - len(rest); i == 0 || args[i-1] != "--" {
			return opts, commandLineError(fs.Name(), unexpectedArgument(args, rest)), true
		}
		opts.agent = rest
	}
	switch {
	case !opts.daemon && opts.resume.set:
		return opts, commandLineError(fs.Name(), usageErrorf("--resume needs --daemon")), true
	case !opts.daemon && opts.socket != "":
		return opts, commandLineError(fs.Name(), usageErrorf("--socket needs --daemon")), true
	case opts.socket != "" && len(opts.agent) > 0:
		return opts, commandLineError(fs.Name(), usageErrorf("--socket is for the relay the client starts: give it to the relay command after --")), true
	}
	if opts.cwd != "" {
		info, err := os.Stat(opts.cwd)
		if err != nil || !info.IsDir() {
			return opts, commandLineError(fs.Name(), usageErrorf("--cwd %s: not a directory", opts.cwd)), true
		}
		// The session's cwd must be absolute; a relative one is from here.
		abs, err := filepath.Abs(opts.cwd)
		if err != nil {
			return opts, commandLineError(fs.Name(), usageErrorf("--cwd %s: %v", opts.cwd, err)), true
		}
		opts.cwd = abs
	}
	return opts, 0, false
}

// clientHelp returns "shellagent client --help".
func clientHelp(fs *flag.FlagSet) string {
	var w strings.Builder
	w.WriteString(`Usage: shellagent client [flags] [-- AGENT COMMAND...]

A reference ACP v2 client. It starts the agent (this shellagent in agent
mode, or the ACP v2 agent command after --), opens a session, and sends each
input line as a prompt; slash commands (/bg, /ps, /stop ID, /after DUR CMD,
/every DUR CMD) pass through. It prints each terminal's output as it
arrives (lines labelled term_N| while several terminals run), exit
statuses, agent messages, and the background list whenever it changes.

Ctrl-C cancels the foreground command: it stops, background work runs on.
A second Ctrl-C before the next line, or the end of the input, says how
many background items closing will stop, closes the session (which stops
them) and exits.

On a terminal (stdin and stdout), with an agent that takes keystrokes, the
client is a terminal. At the prompt, lines are edited (Left, Right, Home,
End, Ctrl-A/E/K/U/W) and recalled (Up, Down). While a command runs, every
key goes to it, Ctrl-C too (its own interrupt), and so does the screen's
size: vim, less, top, read and password prompts work as in a terminal.
Ctrl-B is the client's prefix then: Ctrl-B b moves the command to the
background, Ctrl-B c stops it, Ctrl-B d detaches, Ctrl-B Ctrl-B types
Ctrl-B. /attach ID does the same for a background terminal, /help lists the
keys and commands, /quit and Ctrl-D close; closing with background work
asks first (y/N). Background output is not shown (/attach, /tail ID).

The client never waits on a hung agent: each start-up request has 10s to be
answered, and Ctrl-C or the end of the input during start-up ends at once.
session/close has the session's kill grace plus 2s (3s by default, or what
--set kill_grace= set); after that, at another Ctrl-C, or at once on SIGTERM
or SIGHUP, the client stops the agent (SIGTERM, then SIGKILL after as long
again or at another Ctrl-C) and exits 1. A line from the agent over 16 MiB
is refused and ends the agent. Text from the agent is printed with control
characters escaped (ESC as \x1b, CR as \r); terminal output is passed on
as it is.

With --daemon the client talks to the daemon through a relay (shellagent
--daemon, or the relay command after --), and leaving does not stop work:
the end of the input, a second Ctrl-C, /quit, or Ctrl-D then Enter detach,
leaving the session running in the daemon, and the client says how to
come back. /close (or Ctrl-D then c) closes the session. --resume [ID]
comes back: to session ID, or to the newest session of the directory; it
shows the last lines of each running terminal, then live output. /sessions
lists the agent's sessions. When the daemon is upgraded in place (or the
relay this client started ends) while the daemon keeps the session, the
client starts its relay again (the new build's, after an upgrade to
another build), resumes the session and goes on.

In line mode on a terminal every line is sent at once; in terminal mode
the prompt returns once the previous turn has ended. From a file or a pipe,
each line waits for the previous turn to end, and a line after "/stop ID"
also waits for ID to leave the background list, so a script prints the same
on every run:

  printf 'echo hi\n/bg sleep 5\n/ps\n' | shellagent client

Flags:
`)
	printDefaults(&w, fs)
	w.WriteString(`  -h, --help
        print this help and exit
`)
	return w.String()
}

// runClient runs "shellagent client" and returns the exit code.
func runClient(args []string) (code int) {
	opts, code, done := clientCommandLine(args)
	if done {
		return code
	}
	agent := opts.agent
	if len(agent) == 0 {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintf(os.Stderr, "shellagent client: finding this program to run as the agent: %v\n", err)
			return 1
		}
		agent = []string{self}
		if opts.daemon {
			agent = append(agent, "--daemon")
			if opts.socket != "" {
				agent = append(agent, "--socket", opts.socket)
			}
		}
	}
	cfg := lineclient.Config{
		Agent:       agent,
		AgentStderr: os.Stderr,
		Cwd:         opts.cwd,
		Input:       os.Stdin,
		Output:      os.Stdout,
		Interactive: term.IsTerminal(int(os.Stdin.Fd())),
		Permissions: lineclient.Permissions(opts.permissions),
		Settings:    opts.settings,
		Version:     version(),
		Daemon:      opts.daemon,
		Resume:      opts.resume.set,
		SessionID:   opts.resume.id,
	}
	if opts.daemon {
		cfg.ResumeCommand = func(id string) string { return resumeCommand(opts, id) }
	}
	if opts.daemon && len(opts.agent) == 0 { // a relay of this program: its daemon is at hand
		cfg.Reconnect = func(ctx context.Context, id string) ([]string, error) { return reconnectTo(ctx, opts.socket, id) }
	}
	if opts.trace != "" {
		f, err := os.Create(opts.trace)
		if err != nil {
			fmt.Fprintf(os.Stderr, "shellagent client: --trace: %v\n", err)
			return 1
		}
		cfg.Trace = f
		defer func() {
			if err := f.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "shellagent client: --trace: %v\n", err)
				code = 1
			}
		}()
	}
	if cfg.Interactive && term.IsTerminal(int(os.Stdout.Fd())) {
		cfg.Terminal = os.Stdin
		resizes := make(chan os.Signal, 1)
		signal.Notify(resizes, syscall.SIGWINCH)
		defer signal.Stop(resizes)
		cfg.Resizes = resizes
	}
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	cfg.Interrupts = interrupts
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	if err := lineclient.Run(ctx, cfg); err != nil {
		if !errors.Is(err, lineclient.ErrShown) {
			fmt.Fprintf(os.Stderr, "shellagent client: %v\n", err)
		}
		return 1
	}
	return 0
}

// reconnectTo is the client's Config.Reconnect: it checks that the
// daemon at the socket that flag names (as the relay finds it) has
// session id live, and returns the relay to start again: nil for this
// program's, or, after an upgrade in place to another build, that
// build's (the daemon's executable), since a relay talks only to a
// daemon of its build. While an upgrade hands the daemon over, what
// connects may be closed unanswered: it asks again, for at most
// upgradeWait. It never starts a daemon: one that has died took the
// session's work with it.
func reconnectTo(ctx context.Context, flag, id string) ([]string, error) {
	gone := fmt.Errorf("%s is no longer live in the daemon", id)
	path, err := daemon.SocketPath(flag)
	if err != nil {
		return nil, gone
	}
	st, err := statusThrough(ctx, path)
	switch {
	case err != nil || !slices.ContainsFunc(st.Sessions, func(s supervisor.SessionStatus) bool { return s.ID == id }):
		return nil, gone
	case st.Build == buildName():
		return nil, nil
	}
	exe := executable(st.Pid)
	if exe == "" {
		return nil, fmt.Errorf("the daemon (pid %d) now runs build %s, which this client's relay cannot talk to: come back with its binary: shellagent client --daemon --resume %s", st.Pid, st.Build, id)
	}
	return []string{exe, "--daemon", "--socket", path}, nil
}

// resumeCommand is the command line that comes back to session id,
// which the client detached from.
func resumeCommand(opts clientOptions, id string) string {
	cmd := "shellagent client --daemon"
	if opts.socket != "" {
		cmd += " --socket " + shellQuote(opts.socket)
	}
	cmd += " --resume " + shellQuote(id)
	if len(opts.agent) > 0 {
		cmd += " -- " + strings.Join(quoteAll(opts.agent), " ")
	}
	return cmd
}

// shellQuote quotes s for a POSIX shell if it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// quoteAll quotes each of args for a shell.
func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = shellQuote(a)
	}
	return out
}
