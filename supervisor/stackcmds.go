package supervisor

import (
	"fmt"
	"strconv"
	"strings"

	"shellagent/supervisor/service"
)

// The stack's commands (SPEC "Stacks"), served by the session's
// service.Stack (package supervisor/service, where the services live
// too): /up, /down and /restart hold the foreground until what they asked
// for is done, through a work.Turn (kindTurn); /status and /logs answer
// at once, even while a turn runs. Here are their entries in the
// commands' table, and what their arguments are.

func stackCommands() []*command {
	return []*command{
		{
			name: "up", syntax: "[NAME...]", parse: parseNames, hold: holdUp,
			description: "Start the project's services (shellagent.toml or Procfile), each once its dependencies are ready",
			hint:        "services to start, with what they depend on (empty: all)",
			usage:       "/up [NAME...], e.g. /up or /up web",
		},
		{
			name: "down", syntax: "[NAME...]", parse: parseNames, hold: holdDown,
			description: "Stop the project's services, dependents first",
			hint:        "services to stop, with what depends on them (empty: all)",
			usage:       "/down [NAME...], e.g. /down or /down db",
		},
		{
			name: "restart", syntax: "NAME", parse: parseID("/restart needs exactly one service name"), hold: holdRestart,
			description: "Stop one service and start it again, until it is ready",
			hint:        "service name, e.g. web",
			usage:       "/restart NAME, e.g. /restart web",
		},
		{
			name: "status", now: true, parse: parseNoArgs, act: stackStatus,
			description: "Show the project's services: state, pid, uptime, restarts, memory and CPU, ports",
			usage:       "/status",
		},
		{
			name: "logs", syntax: "NAME [N]", now: true, parse: parseLogs, act: serviceLogs,
			description: "Show the last lines of a service's output as text",
			hint:        "service name and a number of lines, e.g. web 50",
			usage:       "/logs NAME [N], e.g. /logs web 100 (N: 1 to 1000, 50 if omitted)",
		},
	}
}

func holdUp(st *state, t *turn)      { st.stackOf().Up(kindTurn{st, t}, t.in.line) }
func holdDown(st *state, t *turn)    { st.stackOf().Down(kindTurn{st, t}, t.in.line) }
func holdRestart(st *state, t *turn) { st.stackOf().Restart(kindTurn{st, t}, t.in.id) }

// parseNames reads service names: the arguments, as they are.
func parseNames(_ *command, rest string) input { return input{line: rest} }

// Lines of /logs.
const (
	defaultLogLines = 50
	maxLogLines     = 1000
)

func parseLogs(_ *command, rest string) input {
	f := strings.Fields(rest)
	if len(f) == 0 || len(f) > 2 {
		return bad("/logs needs a service name and at most a number of lines", "logs")
	}
	in := input{id: f[0], lines: defaultLogLines}
	if len(f) == 2 {
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 1 || n > maxLogLines {
			return bad(fmt.Sprintf("/logs: %q is not a number of lines from 1 to %d", f[1], maxLogLines), "logs")
		}
		in.lines = n
	}
	return in
}

// stackOf returns the session's stack, made on first use.
func (st *state) stackOf() *service.Stack {
	if st.stack == nil {
		st.stack = service.NewStack(host{st})
	}
	return st.stack
}

// stackStatus serves /status (service.Stack.Status).
func stackStatus(st *state, _ input) { st.stackOf().Status() }

// serviceLogs serves /logs NAME [N] (service.Stack.Logs).
func serviceLogs(st *state, in input) { st.stackOf().Logs(in.id, in.lines) }
