// Command shellagent is an ACP v2 agent on stdio that runs each prompt as a
// shell command in a PTY, with foreground and background work as the v2
// Background Work RFD describes, and a client for such agents (a terminal
// on a terminal, line by line otherwise).
// A client that initializes with protocol version 1 is served in v1.
//
// Usage:
//
//	shellagent [--shell PATH] [--foreground-timeout 10s] [--kill-grace 3s]
//	           [--scrollback 1MiB] [--cols 120] [--rows 40] [--stall-timeout 1s]
//	           [--sequential-ids] [--containment auto|cgroup|subreaper|session]
//	           [--client-checks] [--scenarios-invalid]
//	shellagent --daemon [--socket PATH] [flags]
//	shellagent daemon [--socket PATH] [--detached-ttl 24h] [--idle-exit 10m] [flags]
//	shellagent daemon status | stop [--socket PATH]
//	shellagent daemon upgrade [--socket PATH] [--to PATH]
//	shellagent client [flags] [-- AGENT COMMAND...]
//	shellagent replay FILE
//	shellagent up [NAME...] | status | logs NAME [N] [-f] | down [NAME...] [--socket PATH]
//	shellagent --help | --version
//
// The agent reads newline-delimited JSON-RPC from stdin, writes it to stdout
// and logs to stderr. Stdin EOF, SIGTERM, SIGINT, SIGHUP, SIGQUIT or a
// closed stdout stop every command and exit. With --daemon it is a relay
// to the per-user daemon instead, and the same ends only detach its
// sessions. main.go has the wiring, flags.go the flags and the version,
// client.go the client subcommand, replay.go the replay subcommand,
// lifecycle.go containment and the agent's end (lifecycle_linux.go and
// lifecycle_bsd.go its descriptors and the watch of stdout, per OS),
// daemon.go the daemon and its status, stop and upgrade, relay.go the relay,
// build.go the build name that a relay and its daemon must share,
// procs.go how many processors its Go code runs on, trace_on.go an
// execution trace of the process in a build with -tags tracefile.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"shellagent/contain"
	"shellagent/daemon"
	"shellagent/protocol"
	"shellagent/protocol/v1front"
	"shellagent/ptyio"
	kit "shellagent/scenario"
	"shellagent/supervisor"
)

func main() {
	shareCPUs()
	stop := startTrace()
	code := run(os.Args[1:])
	stop()
	os.Exit(code)
}

// daemonEnv names the environment variable that, set to 1, makes the
// agent a relay as --daemon does.
const daemonEnv = "SHELLAGENT_DAEMON"

// daemonFromEnv reads $SHELLAGENT_DAEMON: unset, empty or false-like is
// no relay.
func daemonFromEnv() (bool, error) {
	v := os.Getenv(daemonEnv)
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, usageErrorf("$%s=%s: want 1 or 0", daemonEnv, v)
	}
	return on, nil
}

// run runs the command line args and returns the exit code: 0, 1 for a
// failure at run time, 2 for a command line error.
func run(args []string) int {
	if len(args) > 0 && args[0] == "help" {
		return runHelp(args[1:])
	}
	if len(args) > 0 && args[0] == "client" {
		return runClient(args[1:])
	}
	if len(args) > 0 && args[0] == "replay" {
		return runReplay(args[1:])
	}
	if len(args) > 0 && args[0] == "daemon" {
		return runDaemon(args[1:])
	}
	if len(args) > 0 && slices.Contains(stackCommands, args[0]) {
		return runStack(args[0], args[1:]) // stackcli.go
	}
	opts, code, done := agentCommandLine(args)
	if done {
		return code
	}
	if opts.relay {
		return relay(opts)
	}
	return serve(opts)
}

// runHelp runs "shellagent help [COMMAND]": it prints the help of
// shellagent, or of one of its commands, as --help does.
func runHelp(args []string) int {
	switch strings.Join(args, " ") {
	case "":
		return run([]string{"--help"})
	case "client", "replay", "daemon", "daemon status", "daemon stop", "daemon upgrade", "up", "status", "logs", "down":
		return run(append(args, "--help"))
	}
	return commandLineError("shellagent", usageErrorf("help %s: want shellagent help [client | replay | daemon [status | stop | upgrade] | up | status | logs | down]", strings.Join(args, " ")))
}

// agentCommandLine parses the agent's command line. done reports that the
// command line has been dealt with (help, version, an error) and the
// process should exit with code.
func agentCommandLine(args []string) (opts agentOptions, code int, done bool) {
	opts = defaultAgentOptions()
	fs := flag.NewFlagSet("shellagent", flag.ContinueOnError)
	opts.define(fs)
	fs.BoolVar(&opts.relay, "daemon", false, "relay to the shellagent daemon, starting it if none runs, so that commands outlive this process (also $"+daemonEnv+"=1)")
	fs.StringVar(&opts.socket, "socket", "", "with --daemon: the daemon's socket `PATH` (default $"+daemon.SocketEnv+", else $XDG_RUNTIME_DIR/shellagent/daemon.sock, else /tmp/shellagent-UID/daemon.sock)")
	// Flags of the daemon itself, for the daemon a relay starts.
	ttl, idle := defaultDetachedTTL, defaultIdleExit
	fs.Var(&durationFlag{p: &ttl, zero: true}, "detached-ttl", "with --daemon: the daemon it starts closes a session that has had no connection and nothing running for `DURATION`; 0 = never")
	fs.Var(&durationFlag{p: &idle, zero: true}, "idle-exit", "with --daemon: the daemon it starts exits once there has been no session and no connection for `DURATION`; 0 = never")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if _, err := parseFlags(fs, args, false); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return opts, printHelp(agentHelp(fs)), true
		}
		return opts, commandLineError(fs.Name(), err), true
	}
	if *showVersion {
		return opts, printHelp("shellagent " + version() + "\n"), true
	}
	if !opts.relay {
		relay, err := daemonFromEnv()
		if err != nil {
			return opts, commandLineError(fs.Name(), err), true
		}
		opts.relay = relay
	}
	var misplaced error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "daemon":
		case "socket", "detached-ttl", "idle-exit":
			if !opts.relay && misplaced == nil {
				misplaced = usageErrorf("--%s is for --daemon (or shellagent daemon)", f.Name)
			}
			if f.Name == "socket" {
				break // the daemon gets the path as the relay resolves it
			}
			fallthrough
		default:
			opts.daemonArgs = append(opts.daemonArgs, "--"+f.Name+"="+f.Value.String())
		}
	})
	if misplaced != nil {
		return opts, commandLineError(fs.Name(), misplaced), true
	}
	shell, err := checkShell(opts.shell)
	if err != nil {
		return opts, commandLineError(fs.Name(), err), true
	}
	opts.shell = shell
	return opts, 0, false
}

// commandLineError prints a command line error of command ("shellagent",
// "shellagent client" …), with the way to its help, and returns exit
// code 2.
func commandLineError(command string, err error) int {
	fmt.Fprintf(os.Stderr, "shellagent: %v\nRun '%s --help' for usage.\n", err, command)
	return 2
}

// printHelp writes text (help or the version) to stdout and returns the
// exit code: 0, or 1 if stdout cannot be written.
func printHelp(text string) int {
	if _, err := io.WriteString(os.Stdout, text); err != nil {
		fmt.Fprintf(os.Stderr, "shellagent: %v\n", err)
		return 1
	}
	return 0
}

// agentHelp returns --help.
func agentHelp(fs *flag.FlagSet) string {
	var w strings.Builder
	w.WriteString(`shellagent is an Agent Client Protocol (ACP) v2 agent on stdio: it runs each
prompt as a shell command in a pseudo-terminal and reports foreground and
background work as the v2 Background Work RFD describes. It has no language
model: the text of a prompt is the command. A client that asks for ACP v1
(today's editors: Zed, acpx) is served in v1.

Usage:
  shellagent [flags]
        serve ACP v2 (or v1): JSON-RPC on stdin and stdout, logs on stderr
  shellagent --daemon [flags]
        the same on stdio, relayed to the shellagent daemon (started if
        none runs): commands outlive this process and the editor
  shellagent daemon [flags] | daemon status | stop | upgrade
        the per-user daemon that owns sessions and their commands, on a
        unix socket; 'shellagent daemon --help' tells more
  shellagent client [flags] [-- AGENT COMMAND...]
        start an agent (this one by default) and talk to it: on a terminal
        the running command gets the keyboard, elsewhere each input line is
        a prompt; 'shellagent client --help' tells more
  shellagent replay FILE
        an agent that plays the transcript in FILE (as 'client --trace'
        writes it) and reports where the client departs from it;
        'shellagent replay --help' tells more
  shellagent up [NAME...] | status | logs NAME [N] [-f] | down [NAME...]
        the project's services (shellagent.toml or Procfile here), run by
        the daemon in its session for this directory; docs/stacks.md

Subcommands:
  client    the reference client
  replay    play a transcript as the agent
  daemon    the daemon, its status, and its stop
  up, status, logs, down
            the project's services; 'shellagent up --help' tells more
  help      this help; 'shellagent help client' is 'shellagent client --help'

Flags:
`)
	printDefaults(&w, fs)
	w.WriteString(`  -h, --help
        print this help and exit

Durations are Go durations (500ms, 10s, 1m30s); sizes take KiB, MiB, GiB, KB,
MB or no unit (bytes). Stdin EOF, SIGTERM, SIGINT, SIGHUP, SIGQUIT or a
closed stdout stop every command, leave no process behind, and exit.
`)
	return w.String()
}

// supervisorConfig is the Config of the agent's Supervisor, its commands
// held by c, their PTYs opened ahead by ptys, and none started before
// swept, the end of c's sweep (openContainment), is closed; its launcher
// learns of the agent's end from end (stopSessions).
func (o agentOptions) supervisorConfig(log *slog.Logger, c *contain.Containment, swept <-chan struct{}, ptys *ptyio.Spare, end *ending) supervisor.Config {
	return supervisor.Config{
		Shell:             o.shell,
		ForegroundTimeout: o.foregroundTimeout,
		KillGrace:         o.killGrace,
		Scrollback:        o.scrollback,
		Size:              o.size(),
		Version:           version(),
		Log:               log,
		SequentialIDs:     o.sequentialIDs,
		Launcher:          ptyio.Local{Containment: c, PTYs: ptys, Ending: end.c},
		Swept:             swept,
		Containment:       string(c.Mode()),
		ClientChecks:      o.clientChecks,
		Kit:               kit.Kit{Invalid: o.scenariosInvalid, Log: log},
		StateDir:          o.history.stateDir,
	}
}

// size is the size of every terminal's PTY.
func (o agentOptions) size() ptyio.Size {
	return ptyio.Size{Cols: uint16(o.cols), Rows: uint16(o.rows)}
}

// closeSpare closes the PTY opened ahead of the next launch, once no
// launch can run.
func closeSpare(log *slog.Logger, ptys *ptyio.Spare) {
	if err := ptys.Close(); err != nil {
		log.Warn("closing", "err", err)
	}
}

// connOptions are the options of each of the agent's connections: ACP
// v2, and v1 through its front.
func connOptions(log *slog.Logger, o agentOptions) protocol.Options {
	return protocol.Options{Log: log, StallTimeout: o.stallTimeout, Fronts: map[int]protocol.NewFront{v1front.ProtocolVersion: v1front.New}}
}

// serve runs the agent on stdin and stdout until stdin ends, a signal
// arrives or stdout is closed.
func serve(opts agentOptions) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	// A closed stdout must be an error on write, not a SIGPIPE death.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// The stop signals are caught from now until the agent exits: one
	// that arrives during the shutdown must not kill the agent before it
	// has stopped its commands.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	c, swept, err := openContainment(log, opts.containment)
	if err != nil {
		fmt.Fprintf(os.Stderr, "shellagent: %v\n", err)
		return 1
	}

	store, err := opts.history.open(log, opts.scrollback)
	if err != nil {
		fmt.Fprintf(os.Stderr, "shellagent: %v\n", err)
		closeContainment(log, c, swept)
		return 1
	}
	defer closeHistory(log, store) // after the shutdown: it records the sessions' close
	ptys := ptyio.NewSpare(opts.size())
	defer closeSpare(log, ptys) // after the shutdown: no launch can run
	end := newEnding()
	cfg := opts.supervisorConfig(log, c, swept, ptys, end)
	cfg.History = store
	sup := supervisor.New(cfg)
	out := newOutput(log, pollableStdout(log))
	copts := connOptions(log, opts)
	copts.Observer = sup.Checks()
	conn := protocol.NewConn(pollableStdin(log), out, sup, copts)
	if why := waitForEnd(conn, out, sigs); why != endOfInput {
		log.Info("stopping", "because", why) // the end of input is the usual end: no news
	}
	return shutdown(log, sup, conn, out, c, end, swept, sigs)
}
