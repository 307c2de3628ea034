package service

import (
	"fmt"
	"strconv"
	"strings"

	"shellagent/acp"
	"shellagent/supervisor/work"
)

// Commands are the stack's commands (SPEC "Stacks"), the entries of
// package supervisor's command table, served by the session's Stack,
// which stackOf returns (made on first use): /up, /down and /restart
// hold the foreground until what they asked for is done, through a
// work.Turn; /status and /logs answer at once, even while a turn runs,
// and only read (work.Command.Look).
// The args of /up and /down are the names as written, of /restart the
// name, of /logs a LogsArgs.
func Commands(stackOf func(work.RunHost) *Stack) []work.Command {
	return []work.Command{
		{
			Name: "up", Syntax: "[NAME...]", Parse: work.ParseRest, Line: names,
			Hold:        func(h work.RunHost, t work.Turn, args any) { stackOf(h).Up(t, args.(string)) }, // Safe: ParseRest's.
			Description: "Start the project's services (shellagent.toml or Procfile), each once its dependencies are ready",
			Hint:        "services to start, with what they depend on (empty: all)",
			Usage:       "/up [NAME...], e.g. /up or /up web",
		},
		{
			Name: "down", Syntax: "[NAME...]", Parse: work.ParseRest, Line: names,
			Hold:        func(h work.RunHost, t work.Turn, args any) { stackOf(h).Down(t, args.(string)) }, // Safe: ParseRest's.
			Description: "Stop the project's services, dependents first",
			Hint:        "services to stop, with what depends on them (empty: all)",
			Usage:       "/down [NAME...], e.g. /down or /down db",
			Supersede: func(h work.RunHost, fg work.Foreground, args any) {
				stackOf(h).Supersede(fg, "down", args.(string)) // Safe: ParseRest's.
			},
		},
		{
			Name: "restart", Syntax: "NAME", Parse: work.ParseWord("/restart needs exactly one service name"),
			Hold:        func(h work.RunHost, t work.Turn, args any) { stackOf(h).Restart(t, args.(string)) }, // Safe: ParseWord's.
			Description: "Stop one service and start it again, until it is ready",
			Hint:        "service name, e.g. web",
			Usage:       "/restart NAME, e.g. /restart web",
			Supersede: func(h work.RunHost, fg work.Foreground, args any) {
				stackOf(h).Supersede(fg, "restart", args.(string)) // Safe: ParseWord's.
			},
		},
		{
			Name: "status", Now: true, Parse: work.ParseNone("status"),
			Look:        func(h work.RunHost, _ any) string { return stackOf(h).Status() },
			Description: "Show the project's services: state, pid, uptime, restarts, memory and CPU, ports",
			Usage:       "/status",
		},
		{
			Name: "logs", Syntax: "NAME [N]", Now: true, Parse: parseLogs,
			Look: func(h work.RunHost, args any) string {
				a := args.(LogsArgs) // Safe: parseLogs made them.
				return stackOf(h).Logs(a.Name, a.Lines)
			},
			Description: "Show the last lines of a service's output as text",
			Hint:        "service name and a number of lines, e.g. web 50",
			Usage:       "/logs NAME [N], e.g. /logs web 100 (N: 1 to 1000, 50 if omitted)",
		},
	}
}

// names is the command line of /up's and /down's args: the names, which
// title a session as a command line would.
func names(args any) string { return args.(string) } // Safe: ParseRest's.

// LogsArgs are the arguments of /logs: a service's name, and how many of
// its last lines to show.
type LogsArgs struct {
	Name  string
	Lines int
}

// DefaultLogLines is how many lines /logs NAME shows without N.
const DefaultLogLines = 50

// parseLogs reads the LogsArgs of /logs.
func parseLogs(rest string) (any, string, bool) {
	f := strings.Fields(rest)
	if len(f) == 0 || len(f) > 2 {
		return nil, "/logs needs a service name and at most a number of lines", false
	}
	a := LogsArgs{Name: f[0], Lines: DefaultLogLines}
	if len(f) == 2 {
		n, err := ParseLogLines(f[1])
		if err != nil {
			return nil, "/logs: " + err.Error(), false
		}
		a.Lines = n
	}
	return a, "", false
}

// ParseLogLines reads the N of /logs NAME N (and of shellagent logs):
// 1 to acp.MaxServiceLines.
func ParseLogLines(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > acp.MaxServiceLines {
		return 0, fmt.Errorf("%q is not a number of lines from 1 to %d", s, acp.MaxServiceLines)
	}
	return n, nil
}
