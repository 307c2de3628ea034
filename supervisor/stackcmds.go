package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/internal/stack"
	"shellagent/ptyio"
	"shellagent/supervisor/wait"
	"shellagent/supervisor/service"
)

// The stack's commands (SPEC "Stacks"): /up, /down and /restart hold the
// foreground until what they asked for is done (a stackOp); /status and
// /logs answer at once, even while a turn runs. The services themselves
// are service.go's.

// stackState is a session's stack: the services it manages or managed,
// and the commands that wait on them. It is part of the session's state.
type stackState struct {
	file     *stack.Stack             // as the last /up, /down or /restart read it
	services map[string]*stackService // the latest service of each name
	names    []string                 // the names, in the order they were first started
	ops      []*stackOp               // the /up, /down and /restart under way
	busy     bool                     // progress runs
	again    bool                     // progress must look again: something changed while it ran
}

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
func (st *state) stackOf() *stackState {
	if st.stack == nil {
		st.stack = &stackState{services: make(map[string]*stackService)}
	}
	return st.stack
}

// load reads the stack file of the session's directory, or says why not.
func (ss *stackState) load(st *state) (*stack.Stack, string) {
	f, err := stack.Load(st.s.cwd)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Sprintf("No stack file in %s: write a %s (or a %s) there; docs/stacks.md tells how.", st.s.cwd, stack.TOMLFile, stack.Procfile)
	case err != nil:
		return nil, "The stack file is refused, and nothing was started or stopped: " + err.Error() + "."
	}
	ss.file = f
	return f, ""
}

// readyCondition reads a service's ready key in /wait's language (a
// REGEX, :PORT, an http:// URL) or as exec:CMD; none is nil, "".
func readyCondition(text string) (spec *wait.Spec, execLine, problem string) {
	if text == "" {
		return nil, "", ""
	}
	if line, ok := strings.CutPrefix(text, "exec:"); ok {
		if strings.TrimSpace(line) == "" {
			return nil, "", "exec: needs a command"
		}
		return nil, line, ""
	}
	spec = &wait.Spec{}
	if p := spec.Target(text); p != "" {
		return nil, "", strings.TrimPrefix(p, "/wait: ")
	}
	return spec, "", ""
}

// add manages a new service for def, waiting for its dependencies: its
// tool call is announced, then listed.
func (ss *stackState) add(st *state, f *stack.Stack, def *stack.Service) *stackService {
	spec, execLine, _ := readyCondition(def.Ready) // Safe: holdUp checked every condition.
	svc := &stackService{def: def, project: f.Dir, ready: spec, execReady: execLine, restarter: stack.NewRestarter(def.Policy())}
	svc.log = newLog(st, svc)
	svc.call = st.newCall(callRunning, "execute", "service "+def.Name)
	svc.call.task = svc
	svc.call.input = map[string]any{"service": def.Name, "command": def.Command, "cwd": def.Dir}
	text := "Starting."
	if len(def.DependsOn) > 0 {
		text = "Waiting for " + strings.Join(def.DependsOn, ", ") + " to be ready."
	}
	svc.say(st, text)
	st.list.addCall(svc.call)
	if _, ok := ss.services[def.Name]; !ok {
		ss.names = append(ss.names, def.Name)
	}
	ss.services[def.Name] = svc
	return svc
}

// progress does what the last change allows: a waiting service whose
// dependencies are all ready starts, one with a dependency that failed or
// stopped fails, and a command whose services are done ends. Every event
// that changes a service calls it last.
func (ss *stackState) progress(st *state) {
	if ss.busy {
		ss.again = true
		return
	}
	ss.busy = true
	defer func() { ss.busy = false }()
	for again := true; again; again = ss.again {
		ss.again = false
		for _, name := range ss.names {
			svc := ss.services[name]
			if svc.state != service.Waiting || st.life != sessionOpen {
				continue
			}
			switch ready, why := ss.dependencies(svc); {
			case why != "":
				svc.fail(st, why, false)
			case ready:
				svc.start(st)
			}
		}
		for _, op := range slices.Clone(ss.ops) {
			op.check(st)
		}
	}
}

// dependencies reports whether every dependency of svc is ready, or why
// svc will not start.
func (ss *stackState) dependencies(svc *stackService) (ready bool, why string) {
	return service.Dependencies(svc.def.DependsOn, func(name string) (service.State, bool) {
		if dep := ss.services[name]; dep != nil {
			return dep.state, true
		}
		return 0, false
	})
}

// downOrder is what /down names stops, dependents first: of the services
// named and what depends on them, those the stack manages.
func (ss *stackState) downOrder(names []string) ([]string, error) {
	if ss.file == nil {
		return nil, errors.New("no stack was started")
	}
	order, err := ss.file.Down(names...)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(order, func(n string) bool {
		svc := ss.services[n]
		return svc == nil || !svc.active() && svc.term == nil
	}), nil
}

// stopInOrder stops the services named, one after the other, each once
// the one before it has stopped, then calls done.
func (ss *stackState) stopInOrder(st *state, names []string, done func()) {
	if len(names) == 0 {
		done()
		return
	}
	svc := ss.services[names[0]]
	if svc == nil {
		ss.stopInOrder(st, names[1:], done)
		return
	}
	svc.stop(st, func() { ss.stopInOrder(st, names[1:], done) })
}

// A stackOp is /up, /down or /restart: foreground work that holds its
// turn until the services it waits for are ready (or failed), or stopped.
type stackOp struct {
	turn     *turn
	wait     []*stackService // the services whose readiness it waits for
	stopping bool            // stops are under way: it is not done yet
	done     bool
}

// begin gives op's turn the foreground.
func (op *stackOp) begin(st *state, t *turn) {
	op.turn, t.fore = t, op
	st.turns.take(t, turnRunning)
	st.transition(acp.StateRunning, "")
}

// holdUp serves /up [NAME...].
func holdUp(st *state, t *turn) {
	op := &stackOp{}
	op.begin(st, t)
	ss := st.stackOf()
	f, problem := ss.load(st)
	if problem != "" {
		op.finish(st, problem, acp.StopEndTurn)
		return
	}
	order, err := f.Up(strings.Fields(t.in.line)...)
	if err != nil {
		op.finish(st, fmt.Sprintf("Cannot start: %v. Nothing was started.", err), acp.StopEndTurn)
		return
	}
	for _, name := range order {
		if _, _, problem := readyCondition(f.Service(name).Ready); problem != "" {
			op.finish(st, fmt.Sprintf("%s:%d: services.%s: ready: %s. Nothing was started.", f.File, f.Service(name).Line, name, problem), acp.StopEndTurn)
			return
		}
	}
	for _, name := range order {
		svc := ss.services[name]
		if svc == nil || !svc.active() {
			svc = ss.add(st, f, f.Service(name))
		}
		op.wait = append(op.wait, svc)
	}
	ss.ops = append(ss.ops, op)
	ss.progress(st)
}

// holdDown serves /down [NAME...].
func holdDown(st *state, t *turn) {
	op := &stackOp{stopping: true}
	op.begin(st, t)
	ss := st.stackOf()
	if _, problem := ss.load(st); problem != "" && ss.file == nil {
		op.finish(st, problem, acp.StopEndTurn)
		return
	}
	names, err := ss.downOrder(strings.Fields(t.in.line))
	switch {
	case err != nil:
		op.finish(st, fmt.Sprintf("Cannot stop: %v.", err), acp.StopEndTurn)
		return
	case len(names) == 0:
		op.finish(st, "Nothing to stop: no service of the stack runs.", acp.StopEndTurn)
		return
	}
	ss.ops = append(ss.ops, op)
	ss.stopInOrder(st, names, func() {
		op.finish(st, "Stopped: "+strings.Join(names, ", ")+".", acp.StopEndTurn)
	})
}

// holdRestart serves /restart NAME: it stops the service alone (its
// dependents stay up), then starts it as /up would, and waits until it is
// ready.
func holdRestart(st *state, t *turn) {
	op := &stackOp{stopping: true}
	op.begin(st, t)
	ss := st.stackOf()
	name := t.in.id
	f, problem := ss.load(st)
	switch {
	case problem != "":
		op.finish(st, problem, acp.StopEndTurn)
		return
	case f.Service(name) == nil:
		op.finish(st, fmt.Sprintf("No service %q in %s.", name, f.File), acp.StopEndTurn)
		return
	}
	if _, _, problem := readyCondition(f.Service(name).Ready); problem != "" {
		op.finish(st, fmt.Sprintf("%s:%d: services.%s: ready: %s.", f.File, f.Service(name).Line, name, problem), acp.StopEndTurn)
		return
	}
	ss.ops = append(ss.ops, op)
	again := func() {
		if op.done || st.life != sessionOpen {
			return
		}
		op.stopping = false
		op.wait = []*stackService{ss.add(st, f, f.Service(name))}
		ss.progress(st)
	}
	if svc := ss.services[name]; svc != nil {
		svc.stop(st, again)
		return
	}
	again()
}

// check ends op once what it waits for is done: every service it started
// was ready once, or is no longer managed.
func (op *stackOp) check(st *state) {
	if op.done || op.stopping {
		return
	}
	for _, svc := range op.wait {
		if svc.active() && !svc.everReady {
			return
		}
	}
	op.finish(st, upSummary(op.wait), acp.StopEndTurn)
}

// upSummary says how the services of an /up or /restart ended up.
func upSummary(svcs []*stackService) string {
	outcomes := make([]service.Outcome, len(svcs))
	for i, svc := range svcs {
		outcomes[i] = service.Outcome{Name: svc.def.Name, Ready: svc.everReady && svc.active(), State: svc.state, Why: svc.why}
	}
	return service.UpSummary(outcomes)
}

// finish ends op: text is said, and its turn ends with stopReason.
func (op *stackOp) finish(st *state, text, stopReason string) {
	if op.done {
		return
	}
	op.done = true
	if ss := st.stack; ss != nil {
		ss.ops = slices.DeleteFunc(ss.ops, func(o *stackOp) bool { return o == op })
	}
	if st.turns.fg != op.turn {
		return // moved to the background, cancelled, or the session closes
	}
	st.out.agentMessage(text)
	st.turns.release(op.turn)
	st.endTurn(stopReason)
}

// cancelTurn implements foreground: session/cancel ends the wait; the
// services go on (/down stops them).
func (op *stackOp) cancelTurn(st *state, _ *turn) {
	op.finish(st, "Cancelled: no longer waiting. The services go on; /status shows them, /down stops them.", acp.StopCancelled)
}

// toBackground implements foreground: /bg alone ends the wait, as the
// services are background work already.
func (op *stackOp) toBackground(st *state, _ *turn) {
	op.finish(st, "No longer waiting: the services run in the background; /status shows them.", acp.StopEndTurn)
}

// stackStatus serves /status: one line per service. The memory and CPU
// of each running service's processes are read from /proc as slow work
// (Session.slow), as /ps's members are.
func stackStatus(st *state, _ input) {
	ss := st.stack
	if ss == nil || len(ss.names) == 0 {
		st.out.agentMessage("No services: /up starts the stack of " + stack.TOMLFile + " (or the " + stack.Procfile + ") in " + st.s.cwd + ".")
		return
	}
	rows := make([]service.Row, len(ss.names))
	procs := make([]ptyio.Process, len(ss.names))
	for i, name := range ss.names {
		svc := ss.services[name]
		rows[i] = service.Row{Name: name, State: svc.state, Restarts: svc.restarter.Restarts(), Ports: svc.def.Ports}
		if t := svc.term; t != nil && t.proc != nil {
			procs[i], rows[i].Started = t.proc, t.started
		}
	}
	st.s.slow()
	for i, p := range procs {
		if p != nil {
			rows[i].Running, rows[i].Pid = true, p.Pid()
			rows[i].RSS, rows[i].CPU = stack.TreeStats(pids(p))
		}
	}
	st.out.agentMessage(service.StatusText(ss.file.File, rows, time.Now()))
}

// serviceLogs serves /logs NAME [N]: the last lines of its latest run.
func serviceLogs(st *state, in input) {
	var svc *stackService
	if st.stack != nil {
		svc = st.stack.services[in.id]
	}
	switch {
	case svc == nil:
		st.out.agentMessage(fmt.Sprintf("No service %q has run in this session: /status lists them.", in.id))
	case len(svc.runs) == 0 || svc.runs[len(svc.runs)-1].state == termRetired:
		st.out.agentMessage(fmt.Sprintf("Service %s has no output yet (%s).", in.id, svc.state))
	default:
		t := svc.runs[len(svc.runs)-1]
		st.out.agentMessage(fmt.Sprintf("Service %s, run %d: %s", in.id, svc.gen, st.work.tail(t.id, in.lines)))
	}
}
