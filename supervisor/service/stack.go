package service

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/internal/stack"
	"shellagent/supervisor/work"
)

// A Stack is a session's stack: the services it manages or managed, and
// the commands that wait on them (/up, /down and /restart hold the
// foreground until what they asked for is done: a stackOp). Its methods run
// on the session's actor.
type Stack struct {
	h        work.RunHost
	file     *stack.Stack        // as the last /up, /down or /restart read it
	services map[string]*Service // the latest service of each name
	names    []string            // the names, in the order they were first started
	ops      []*stackOp          // the /up, /down and /restart under way
	// restarting counts, by name, the /restart whose service is being
	// stopped to start again: what waits for it goes on waiting.
	restarting map[string]int
	busy       bool // Progress runs
	again      bool // Progress must look again: something changed while it ran
}

// NewStack returns the empty stack of the session h.
func NewStack(h work.RunHost) *Stack {
	return &Stack{h: h, services: make(map[string]*Service), restarting: make(map[string]int)}
}

// File is the stack file as the last /up, /down or /restart read it, or
// nil.
func (ss *Stack) File() *stack.Stack { return ss.file }

// Names are the names of its services, in the order they were first
// started.
func (ss *Stack) Names() []string { return ss.names }

// Service returns the latest service named name, or nil.
func (ss *Stack) Service(name string) *Service { return ss.services[name] }

// Restore makes ss the stack an upgrade in place handed over: file, and
// the services of names, each the task of the tool call that calls names
// (thawed into ss: Kind). Names without a service are left out.
func (ss *Stack) Restore(file *stack.Stack, names []string, calls map[string]string) {
	ss.file = file
	for _, name := range names {
		if _, t, _ := ss.h.Find(calls[name]); t != nil {
			if svc, ok := t.(*Service); ok {
				ss.names, ss.services[name] = append(ss.names, name), svc
			}
		}
	}
}

// load reads the stack file of the session's directory, or says why not.
func (ss *Stack) load() (*stack.Stack, string) {
	cwd := ss.h.Cwd()
	f, err := stack.Load(cwd)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Sprintf("No stack file in %s: write a %s (or a %s) there; docs/stacks.md tells how.", cwd, stack.TOMLFile, stack.Procfile)
	case err != nil:
		return nil, "The stack file is refused, and nothing was started or stopped: " + err.Error() + "."
	}
	ss.file = f
	return f, ""
}

// add manages a new service for def, waiting for its dependencies: its
// tool call is announced, then listed.
func (ss *Stack) add(f *stack.Stack, def *stack.Service) *Service {
	svc := New(ss.h, ss, f.Dir, def)
	if _, ok := ss.services[def.Name]; !ok {
		ss.names = append(ss.names, def.Name)
	}
	ss.services[def.Name] = svc
	return svc
}

// Progress does what the last change allows: a waiting service whose
// dependencies are all ready starts, one with a dependency that failed or
// stopped fails, and a command whose services are done ends. Every event
// that changes a service calls it last.
func (ss *Stack) Progress() {
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
			if svc.state != Waiting || !ss.h.Open() {
				continue
			}
			switch ready, why := ss.dependencies(svc); {
			case why != "":
				svc.Fail(why, false)
			case ready:
				svc.Start()
			}
		}
		for _, op := range slices.Clone(ss.ops) {
			op.check()
		}
	}
}

// dependencies reports whether every dependency of svc is ready, or why
// svc will not start. A dependency that completed (a one-shot task that
// was ready and ended cleanly) counts as ready; one that /restart stops
// to start again, as not ready yet.
func (ss *Stack) dependencies(svc *Service) (ready bool, why string) {
	return Dependencies(svc.def.DependsOn, func(name string) (State, bool) {
		switch dep := ss.services[name]; {
		case ss.restarting[name] > 0:
			return Waiting, true
		case dep == nil:
			return 0, false
		case completed(dep):
			return Ready, true
		default:
			return dep.state, true
		}
	})
}

// downOrder is what /down names stops, dependents first: the services
// named (all when none is) and what depends on them, of those that run.
// Dependents are found among every service the stack knows, running or
// not, by the definitions they last ran with (the file's for one that
// never ran), so that a service the stack file no longer has (or whose
// depends_on changed) is stopped as it runs, and a named service that
// does not run (a task that completed, one that gave up) still takes
// what depends on it down. A name that neither the stack nor its file
// has is refused.
func (ss *Stack) downOrder(names []string) ([]string, error) {
	if ss.file == nil {
		return nil, errors.New("no stack was started")
	}
	var defs []*stack.Service
	for _, n := range ss.names {
		defs = append(defs, ss.services[n].def)
	}
	for _, n := range names {
		if ss.services[n] != nil {
			continue
		}
		def := ss.file.Service(n)
		if def == nil {
			return nil, fmt.Errorf("stack: down %s: no service %q in %s", n, n, ss.file.File)
		}
		defs = append(defs, def)
	}
	order, err := stack.Of(ss.file.File, defs).Down(names...)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(order, func(n string) bool {
		svc := ss.services[n]
		return svc == nil || !svc.Active() && svc.term == nil
	}), nil
}

// stopInOrder stops the services named, one after the other, each once
// the one before it has stopped, then calls done. why says who stops
// each (Service.Stop).
func (ss *Stack) stopInOrder(names []string, why func(name string) string, done func()) {
	if len(names) == 0 {
		done()
		return
	}
	svc := ss.services[names[0]]
	if svc == nil {
		ss.stopInOrder(names[1:], why, done)
		return
	}
	svc.Stop(why(names[0]), func() { ss.stopInOrder(names[1:], why, done) })
}

// down stops the service name and what depends on it, dependents first,
// as /down NAME does without a turn: the cancel of its tool call, callID.
func (ss *Stack) down(name, callID string) {
	names, err := ss.downOrder([]string{name})
	if err != nil {
		names = []string{name}
	}
	why := func(n string) string {
		if n == name {
			return "its tool call " + callID + " was cancelled"
		}
		return "it depends on " + name + ", whose tool call " + callID + " was cancelled"
	}
	ss.stopInOrder(names, why, ss.Progress)
}

// byDown is who stops each service that /down stops.
func byDown(string) string { return "by /down" }

// A stackOp is /up, /down or /restart: foreground work that holds its turn
// until the services it waits for are ready (or failed), or stopped.
type stackOp struct {
	ss       *Stack
	turn     work.Turn
	order    []string   // the services it starts (/up, /restart), by name: nil for /down
	wait     []*Service // the services whose readiness it waits for
	gens     []int      // the run of each of wait when the wait began
	stopping bool       // stops are under way: it is not done yet
	done     bool
}

// begin makes a new stackOp of ss hold turn t.
func (ss *Stack) begin(t work.Turn, stopping bool) *stackOp {
	o := &stackOp{ss: ss, turn: t, stopping: stopping}
	t.Hold(nil, o)
	return o
}

// Up serves /up [NAME...], the turn t's: args are the names.
func (ss *Stack) Up(t work.Turn, args string) {
	op := ss.begin(t, false)
	f, problem := ss.load()
	if problem != "" {
		op.finish(problem, acp.StopEndTurn)
		return
	}
	order, err := f.Up(strings.Fields(args)...)
	if err != nil {
		op.finish(fmt.Sprintf("Cannot start: %v. Nothing was started.", err), acp.StopEndTurn)
		return
	}
	op.order = order
	op.waitFor(ss.want(f, order, ""))
	ss.ops = append(ss.ops, op)
	ss.Progress()
}

// want returns the services of order, as defined in f, for an /up or a
// /restart to wait for: each one the stack manages, else a new one (and
// always a new one for fresh, the service /restart starts again).
func (ss *Stack) want(f *stack.Stack, order []string, fresh string) []*Service {
	out := make([]*Service, 0, len(order))
	for _, name := range order {
		svc := ss.services[name]
		if name == fresh || svc == nil || !svc.Active() {
			svc = ss.add(f, f.Service(name))
		}
		out = append(out, svc)
	}
	return out
}

// Down serves /down [NAME...], the turn t's: args are the names.
func (ss *Stack) Down(t work.Turn, args string) {
	op := ss.begin(t, true)
	if _, problem := ss.load(); problem != "" && ss.file == nil {
		op.finish(problem, acp.StopEndTurn)
		return
	}
	names, err := ss.downOrder(strings.Fields(args))
	switch {
	case err != nil:
		op.finish(fmt.Sprintf("Cannot stop: %v.", err), acp.StopEndTurn)
		return
	case len(names) == 0:
		op.finish(nothingToStop(strings.Fields(args)), acp.StopEndTurn)
		return
	}
	ss.ops = append(ss.ops, op)
	ss.stopInOrder(names, byDown, func() {
		op.finish(AllStopped+strings.Join(names, ", ")+".", acp.StopEndTurn)
	})
}

// Restart serves /restart NAME, the turn t's: it stops the service alone
// (its dependents stay up), then starts it as /up would, with what it
// depends on that does not run, and waits until they are ready.
func (ss *Stack) Restart(t work.Turn, name string) {
	op := ss.begin(t, true)
	f, problem := ss.load()
	switch {
	case problem != "":
		op.finish(problem, acp.StopEndTurn)
		return
	case f.Service(name) == nil:
		op.finish(fmt.Sprintf(NoSuchService+"%q in %s.", name, f.File), acp.StopEndTurn)
		return
	}
	order, err := f.Up(name)
	if err != nil {
		op.finish(err.Error()+".", acp.StopEndTurn)
		return
	}
	op.order = order
	ss.ops = append(ss.ops, op)
	// Until it starts again, what waits for it (a dependent that an /up
	// left waiting) goes on waiting, rather than failing at the stop; the
	// stop may end in an entry of its own, once its log holds its last
	// output.
	ss.restarting[name]++
	again := func() {
		if ss.restarting[name]--; ss.restarting[name] == 0 {
			delete(ss.restarting, name)
		}
		if op.done || !ss.h.Open() {
			ss.Progress() // not started again: what waits for it fails
			return
		}
		op.stopping = false
		op.waitFor(ss.want(f, order, name))
		ss.Progress()
	}
	if svc := ss.services[name]; svc != nil {
		svc.Stop("by /restart", again)
		return
	}
	again()
}

// Supersede serves /down NAMES or /restart NAME (command "down" or
// "restart", args its arguments), held behind fg, the work that holds
// the foreground: if fg is an /up or a /restart of ss that waits for a
// service that the command stops and that is not ready, its wait ends at
// once, saying so, so that the command runs now rather than once the
// service's ready_timeout has run out. The services go on until the
// command stops them.
func (ss *Stack) Supersede(fg work.Foreground, command, args string) {
	op, ok := fg.(*stackOp)
	if !ok || op.ss != ss || op.done || op.order == nil {
		return
	}
	stops, does := []string{args}, "starts %s again"
	if command == "down" {
		var err error
		if stops, err = ss.downOrder(strings.Fields(args)); err != nil {
			return // /down says why, in its turn
		}
		does = "stops %s"
	}
	var waiting []string
	for _, name := range op.order {
		if slices.Contains(stops, name) && !ss.ready(name) {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) == 0 {
		return
	}
	pronoun := "it"
	if len(waiting) > 1 {
		pronoun = "them"
	}
	op.finish(fmt.Sprintf("Interrupted by /%s: no longer waiting for %s to be ready; /%s "+does+".", command, strings.Join(waiting, ", "), command, pronoun), acp.StopEndTurn)
}

// ready reports whether the service name is ready, or did what it was
// for (a one-shot task that completed), and is not being restarted.
func (ss *Stack) ready(name string) bool {
	svc := ss.services[name]
	return svc != nil && ss.restarting[name] == 0 && (svc.state == Ready || completed(svc))
}

// check ends op once what it waits for is done: every service it waits
// for is ready (a service that restarts is waited for until its next run
// is), completed, or no longer managed.
func (op *stackOp) check() {
	if op.done || op.stopping {
		return
	}
	outcomes := make([]Outcome, len(op.wait))
	for i, svc := range op.wait {
		// A service that was ready restarts after a run that ended
		// before it was ready: one such run that began during the wait
		// ends it, or restart = "always" with runs that never get ready
		// would hold the turn for good.
		restarted := svc.state == Restarting && svc.gen > op.gens[i]
		if svc.Active() && svc.state != Ready && !restarted {
			return
		}
		outcomes[i] = Outcome{Name: svc.def.Name, Ready: svc.state == Ready || completed(svc), State: svc.state, Why: svc.why}
	}
	op.finish(UpSummary(outcomes), acp.StopEndTurn)
}

// waitFor makes op wait for the services svcs, from their current runs.
func (op *stackOp) waitFor(svcs []*Service) {
	op.wait, op.gens = svcs, make([]int, len(svcs))
	for i, svc := range svcs {
		op.gens[i] = svc.gen
	}
}

// finish ends op: text is said, and its turn ends with stopReason.
func (op *stackOp) finish(text, stopReason string) {
	if op.done {
		return
	}
	op.done = true
	op.ss.ops = slices.DeleteFunc(op.ss.ops, func(o *stackOp) bool { return o == op })
	if !op.turn.Holds() {
		return // moved to the background, cancelled, or the session closes
	}
	op.ss.h.Say(text)
	op.turn.End(stopReason)
}

// CancelTurn implements work.Foreground: session/cancel ends the wait;
// the services go on (/down stops them).
func (op *stackOp) CancelTurn() {
	op.finish("Cancelled: no longer waiting. The services go on; /status shows them, /down stops them.", acp.StopCancelled)
}

// ToBackground implements work.Foreground: /bg alone ends the wait, as
// the services are background work already.
func (op *stackOp) ToBackground() {
	op.finish("No longer waiting: the services run in the background; /status shows them.", acp.StopEndTurn)
}

// The first words of the answers that the command line (shellagent up,
// down, status, logs) tells the outcome by: /up's and /restart's when
// every service is ready, /down's when they are stopped, /down's and
// /status's in a session whose stack runs nothing, and /logs' for a name
// no service of the session has.
const (
	AllReady      = "Ready: "
	AllStopped    = "Stopped: "
	NothingToStop = "Nothing to stop: "
	NoneRuns      = NothingToStop + "no service of the stack runs."
	NoServices    = "No services:"
	NoSuchService = "No service "
)

// nothingToStop is /down's answer when none of the services named, nor
// any that depends on them, runs (none of the stack's when none is named).
func nothingToStop(names []string) string {
	switch len(names) {
	case 0:
		return NoneRuns
	case 1:
		return NothingToStop + names[0] + " does not run, nor anything that depends on it."
	}
	return NothingToStop + "none of " + strings.Join(names, ", ") + " runs, nor anything that depends on them."
}

// Status is what /status says: one line per service. The memory, CPU and
// listening ports of each running service's processes are read from /proc
// as slow work (Host.Slow), as /ps's members are.
func (ss *Stack) Status() string {
	if len(ss.names) == 0 {
		return NoServices + " /up starts the stack of " + stack.TOMLFile + " (or the " + stack.Procfile + ") in " + ss.h.Cwd() + "."
	}
	rows := make([]Row, len(ss.names))
	runs := make([]work.Run, len(ss.names))
	for i, name := range ss.names {
		svc := ss.services[name]
		rows[i] = Row{Name: name, State: svc.state, Restarts: svc.restarter.Restarts(), Ports: svc.def.Ports}
		if t := svc.term; t != nil && t.Pid() != 0 {
			runs[i], rows[i].Started = t, t.Started()
		}
	}
	ss.h.Slow()
	for i, t := range runs {
		if t != nil {
			members := t.Members()
			rows[i].Running, rows[i].Pid = true, t.Pid()
			rows[i].RSS, rows[i].CPU = stack.TreeStats(members)
			if ports, ok := stack.ListenPorts(members); ok {
				rows[i].Ports = ports
			}
		}
	}
	return StatusText(ss.file.File, rows, time.Now())
}

// RunTerminals returns the terminals of the runs of service name that the
// session keeps, oldest first, and whether a service of that name has run
// in the session (_shellagent/service/read follows them).
func (ss *Stack) RunTerminals(name string) ([]string, bool) {
	svc := ss.services[name]
	if svc == nil {
		return nil, false
	}
	var ids []string
	for _, t := range svc.runs {
		if !t.Retired() {
			ids = append(ids, t.ID())
		}
	}
	return ids, true
}

// Logs is what /logs NAME N says: the last n lines of its latest run
// that started, labelled with that run's number, and, if the runs after
// it did not start (a restart whose directory is gone, whose port is
// taken), that they did not, and why the last did not.
func (ss *Stack) Logs(name string, n int) string {
	svc := ss.services[name]
	if svc == nil {
		return fmt.Sprintf(NoSuchService+"%q has run in this session: /status lists them.", name)
	}
	text := fmt.Sprintf("Service %s has no output yet (%s).", name, svc.state)
	if t := svc.lastRun(); t != nil && !t.Retired() {
		text = fmt.Sprintf("Service %s, run %d: %s", name, svc.runGen, ss.h.Tail(t.ID(), n))
	}
	if note := NotStartedText(svc.runGen, svc.gen, svc.notStarted); note != "" {
		text += "\n" + note
	}
	return text
}
