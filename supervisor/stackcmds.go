package supervisor

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"shellagent/internal/stack"
	"shellagent/ptyio"
	"shellagent/supervisor/service"
)

// The stack's commands (SPEC "Stacks"): /up, /down and /restart hold the
// foreground until what they asked for is done, through a work.Turn
// (kindTurn): they are the session's service.Stack's (Up, Down, Restart),
// as the services themselves are (package supervisor/service). /status
// and /logs answer at once, even while a turn runs: they read the
// processes and the output of the services' runs, which are the
// session's terminals.

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

// stackStatus serves /status: one line per service. The memory and CPU
// of each running service's processes are read from /proc as slow work
// (Session.slow), as /ps's members are.
func stackStatus(st *state, _ input) {
	ss := st.stack
	if ss == nil || len(ss.Names()) == 0 {
		st.out.agentMessage("No services: /up starts the stack of " + stack.TOMLFile + " (or the " + stack.Procfile + ") in " + st.s.cwd + ".")
		return
	}
	rows := make([]service.Row, len(ss.Names()))
	procs := make([]ptyio.Process, len(ss.Names()))
	for i, name := range ss.Names() {
		in := ss.Service(name).Info()
		rows[i] = service.Row{Name: name, State: in.State, Restarts: in.Restarts, Ports: in.Def.Ports}
		if r := in.Term; r != nil {
			if t := st.work.terminals[r.ID()]; t != nil && t.proc != nil {
				procs[i], rows[i].Started = t.proc, t.started
			}
		}
	}
	st.s.slow()
	for i, p := range procs {
		if p != nil {
			rows[i].Running, rows[i].Pid = true, p.Pid()
			rows[i].RSS, rows[i].CPU = stack.TreeStats(pids(p))
		}
	}
	st.out.agentMessage(service.StatusText(ss.File().File, rows, time.Now()))
}

// serviceLogs serves /logs NAME [N]: the last lines of its latest run.
func serviceLogs(st *state, in input) {
	var svc *service.Service
	if st.stack != nil {
		svc = st.stack.Service(in.id)
	}
	switch {
	case svc == nil:
		st.out.agentMessage(fmt.Sprintf("No service %q has run in this session: /status lists them.", in.id))
	case svc.Info().LastRun == nil || svc.Info().LastRun.Retired():
		st.out.agentMessage(fmt.Sprintf("Service %s has no output yet (%s).", in.id, svc.Info().State))
	default:
		last := svc.Info().LastRun
		st.out.agentMessage(fmt.Sprintf("Service %s, run %d: %s", in.id, svc.Info().Gen, st.work.tail(last.ID(), in.lines)))
	}
}
