package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/internal/stack"
	"shellagent/internal/waitfor"
	"shellagent/supervisor/wait"
	"shellagent/supervisor/work"
)

// A Service is one service of a session's stack (SPEC "Stacks",
// docs/stacks.md), and the task of its tool call, titled "service NAME":
// in_progress while the stack manages it, its content referencing its
// runs. Each run is a terminal (work.Run), launched by start and listed
// while it runs; while the service waits (for its dependencies, or to
// restart) its tool call is listed instead: a tool call is listed only
// while it has no listed terminal.
//
// Its life: Waiting until every dependency is ready (its Stack's
// Progress), then its ports are checked and a run starts (Starting); its
// ready condition, /wait's (a wait.Condition's watch or poll, on a
// goroutine of its own), makes it Ready, or fails it (Failed) at
// ready_timeout or when the run exits first. A run that ends on its own
// after the service was ready is given to its Restarter: Restarting until
// the backoff elapses and the next run starts, or Failed when it gives
// up, or Stopped when the policy restarts nothing. /down, /restart,
// tool_call/cancel and terminal/cancel stop it (Stopped, completed); the
// session's close ends it cancelled. Each change is reported by the event
// that makes it; what follows for the other services (a dependent that
// may start, an /up that is done) by its Stack's Progress, at the end of
// the event.
//
// Its methods run on the session's actor.
type Service struct {
	h         work.RunHost
	stack     *Stack
	def       *stack.Service
	project   string // the stack's directory, for its log's path
	call      work.Call
	state     State
	why       string // what the state came from, for /status and the content
	restarter *stack.Restarter
	ready     *wait.Spec // the ready condition as /wait reads it; nil: none, or execReady
	execReady string     // the command of an exec:CMD ready condition

	runs []work.Run // its latest runs, at most MaxRuns, oldest first: what its content references
	term work.Run   // the run that runs, if one does
	gen  int        // counts runs: a report of an earlier run's readiness or delay is stale
	// runGen is the number (a gen) of the latest of runs; the runs
	// numbered after it did not start, the latest because of notStarted.
	runGen     int
	notStarted string
	everReady  bool     // a run was ready: from then on its exits are restarts, not failures
	stopping   bool     // /down, /restart or cancel: its end is no failure, and nothing restarts it
	stopWhy    string   // who stops it, while stopping: "by /down"; "" once handed over
	stopped    []func() // what waits for its run to end (the next service of a /down)

	cancelReady context.CancelFunc // ends the readiness goroutine of the current run
	timer       *time.Timer        // the delay before a restart
	restartAt   time.Time          // when the timer fires
	log         Log                // its runs' log, and the end of each run
}

// ReadyCondition reads a service's ready key, which stack.Load checked
// (waitfor.ParseReady): a REGEX, :PORT or URL as /wait reads it, or the
// command of exec:CMD. None is nil, "", as is a key Load would refuse.
func ReadyCondition(text string) (spec *wait.Spec, execLine string) {
	r, err := waitfor.ParseReady(text)
	switch {
	case text == "" || err != nil:
		return nil, ""
	case r.Exec != "":
		return nil, r.Exec
	}
	return &wait.Spec{Text: text, Pattern: r.Pattern, Port: r.Port, URL: r.URL}, ""
}

// New manages a new service of stack ss, of the stack file's directory
// project, for def, which stack.Load accepted: its tool call is made,
// announced and listed; it waits for its dependencies (ss.Progress
// starts it).
func New(h work.RunHost, ss *Stack, project string, def *stack.Service) *Service {
	spec, execLine := ReadyCondition(def.Ready)
	svc := &Service{h: h, stack: ss, def: def, project: project, ready: spec, execReady: execLine, restarter: stack.NewRestarter(def.Policy())}
	svc.log = svc.newLog()
	svc.call = h.NewCall(work.CallSpec{
		Kind: "execute", Title: "service " + def.Name,
		Input: map[string]any{"service": def.Name, "command": def.Command, "cwd": def.Dir},
	}, svc)
	text := "Starting."
	if len(def.DependsOn) > 0 {
		text = "Waiting for " + strings.Join(def.DependsOn, ", ") + " to be ready."
	}
	svc.say(text)
	svc.call.List()
	return svc
}

// newLog is the log of svc's runs (Log), kept under the state directory
// if there is one.
func (svc *Service) newLog() Log {
	cfg := svc.h.Config()
	return Log{Logger: cfg.Logger, Dir: cfg.StateDir, Project: svc.project, Name: svc.def.Name, Limit: cfg.LogCap}
}

// Info is what a service is, as its stack, /status and /logs read it.
type Info struct {
	Def       *stack.Service // the service as the stack file defined it
	Call      work.Call      // its tool call
	State     State          // where it is in its life
	Why       string         // what the state came from
	EverReady bool           // a run of it was ready
	Gen       int            // the number of its runs so far
	Restarts  int            // how many times it restarted
	Term      work.Run       // the run that runs, or nil
	LastRun   work.Run       // its latest run, or nil
	// Draining: it is being stopped by /down or /restart, or its log
	// still drains the output of its last run; an upgrade in place waits
	// for that.
	Draining bool
}

// Info returns what the service is now.
func (svc *Service) Info() Info {
	return Info{
		Def: svc.def, Call: svc.call, State: svc.state, Why: svc.why, EverReady: svc.everReady,
		Gen: svc.gen, Restarts: svc.restarter.Restarts(), Term: svc.term, LastRun: svc.lastRun(),
		Draining: len(svc.stopped) > 0 || svc.log.Draining(),
	}
}

// Active reports whether the stack still manages the service.
func (svc *Service) Active() bool { return svc.state.Active() }

// lastRun is its latest run, or nil.
func (svc *Service) lastRun() work.Run {
	if len(svc.runs) == 0 {
		return nil
	}
	return svc.runs[len(svc.runs)-1]
}

// Start starts a run, once its dependencies are ready or its backoff has
// elapsed: unless a port it declares is taken, and then its command does
// not run (launched says what follows).
func (svc *Service) Start() {
	svc.state, svc.why = Starting, ""
	svc.gen++
	gen := svc.gen
	for _, p := range svc.def.Ports {
		free, pid, cmd, _ := stack.PortHolder(p) // Safe: the file's ports are 1..65535.
		if !free {
			svc.launched(gen, nil, errors.New(PortTaken(p, pid, cmd)))
			return
		}
	}
	note := func(id string) string {
		return fmt.Sprintf("Run %d of service %s, in %s; /logs %s shows its output, /down %s stops it.", gen, svc.def.Name, id, svc.def.Name, svc.def.Name)
	}
	t, err := svc.h.Launch(svc.call, work.LaunchSpec{Line: svc.def.Command, Dir: svc.def.Dir, Env: svc.def.Environ(), Note: note})
	if err != nil {
		err = fmt.Errorf("its command could not start (%w)", err)
	}
	svc.launched(gen, t, err)
}

// launched continues Start once the launch is back: the run's terminal
// is listed in place of the tool call, its log copied, its ready
// condition watched. A run that did not start (err says why: a port
// taken, a fork or a directory that failed) fails a service that was
// never ready, as a run that exits before it is ready does. After, it is
// a run that failed at once, and the restart policy decides: what a
// loaded machine refuses once (a fork, a PTY) does not end a server that
// restart = "always" keeps up.
func (svc *Service) launched(gen int, t work.Run, err error) {
	if err != nil {
		svc.notStarted = err.Error()
		if svc.everReady {
			now := time.Now()
			svc.afterRun(stack.Run{Start: now, End: now, Exit: stack.Exit{NotStarted: err.Error()}}, nil)
		} else {
			svc.Fail(err.Error(), true)
		}
		svc.stack.Progress()
		return
	}
	svc.term, svc.runGen = t, gen
	svc.runs = append(svc.runs, t)
	if len(svc.runs) > MaxRuns {
		svc.runs = slices.Delete(svc.runs, 0, 1)
	}
	t.List()
	if len(svc.runs) > 1 { // the update Launch sent references this run only
		svc.say(fmt.Sprintf("Run %d, in %s.", gen, t.ID()))
	}
	svc.log.Run(t.Output(), 0, svc.def.Log)
	if svc.stopping || gen != svc.gen {
		t.Stop()
		return
	}
	if svc.ready == nil && svc.execReady == "" {
		svc.markReady("it started (it has no ready condition)")
		svc.stack.Progress()
		return
	}
	svc.watchReady(t, gen)
}

// say sets the service's content to its runs and text, and sends it.
func (svc *Service) say(text string) {
	svc.say0(text)
	svc.call.Send()
}

// say0 is say without sending: for the update that ends the tool call.
func (svc *Service) say0(text string) {
	c := make([]acp.ToolCallContent, 0, len(svc.runs)+1)
	for _, t := range svc.runs {
		if !t.Retired() {
			c = append(c, acp.TerminalContent(t.ID()))
		}
	}
	svc.call.SetContent(append(c, acp.TextContent(text))...)
}

// halt ends what waits on the service's behalf: its ready condition's
// goroutine and its restart's delay.
func (svc *Service) halt() {
	if svc.cancelReady != nil {
		svc.cancelReady()
		svc.cancelReady = nil
	}
	if svc.timer != nil {
		svc.timer.Stop()
		svc.timer = nil
	}
}

// Fail ends the service as failed: its run, if one runs, is stopped, its
// tool call fails, and, with tell, a notice names it, the reason and its
// last lines.
func (svc *Service) Fail(reason string, tell bool) {
	svc.halt()
	svc.state, svc.why = Failed, reason
	if t := svc.term; t != nil && t.Running() {
		t.Stop()
	}
	svc.say0("Failed: " + reason + ".")
	svc.call.End(acp.StatusFailed)
	if tell {
		svc.notice(acp.NoticeWarning, "failed: "+reason, svc.lastLines())
	}
}

// lastLines is the last lines of the service's latest run, escapes
// removed, or "".
func (svc *Service) lastLines() string {
	if t := svc.lastRun(); t != nil {
		return LastLines(t.Output())
	}
	return ""
}

// notice tells the client about the service: "service NAME what", with
// its last lines.
func (svc *Service) notice(severity, what, lines string) {
	if svc.h.Open() {
		svc.h.Notice(Notice(svc.def.Name, svc.call.ID(), svc.state, severity, what, lines))
	}
}

// RunExited implements work.RunWatcher: the service restarts, fails, or
// ends, if t is the run that runs.
func (svc *Service) RunExited(t work.Run, onItsOwn bool) {
	if svc.term != nil && svc.term.ID() == t.ID() {
		svc.exited(t, onItsOwn)
	}
	svc.stack.Progress()
}

func (svc *Service) exited(t work.Run, onItsOwn bool) {
	svc.term = nil
	if svc.cancelReady != nil {
		svc.cancelReady()
		svc.cancelReady = nil
	}
	svc.log.Ended()
	if done := svc.stopped; len(done) > 0 {
		// What waits for the stop goes on once the run's log holds its
		// last output: a /down that says Stopped leaves the log whole.
		svc.stopped = nil
		defer svc.log.After(svc.h.Do, func() {
			for _, f := range done {
				f()
			}
		})
	}
	switch {
	case svc.call.Final(): // it failed, or the session closed
	case svc.stopping || !onItsOwn:
		why := svc.stopWhy
		switch {
		case !svc.stopping: // terminal/cancel of its run: stopped, as by /down
			svc.stopping, why = true, "its run "+t.ID()+" was cancelled"
		case why == "":
			why = "stopped"
		}
		svc.state, svc.why = Stopped, why
		svc.say0(fmt.Sprintf("Stopped: %s %s.", t.ID(), work.ExitText(t.Exit())))
		svc.call.End(acp.StatusCompleted)
	case !svc.everReady:
		// A run may print its ready line and exit at once (a migration
		// that prints "migrated"), faster than the watch reads.
		how, ok := printedReady(svc.ready, t)
		if !ok {
			svc.Fail(fmt.Sprintf("it %s before it was ready", work.ExitText(t.Exit())), true)
			return
		}
		svc.markReady(how)
		fallthrough
	default:
		svc.afterRun(stack.Run{Start: t.Started(), End: time.Now(), Exit: RunExit(t.Exit())}, t)
	}
}

// printedReady reports whether the output of run t, which has exited,
// holds a line that matches the ready pattern of ready (nil: none), and
// says how.
func printedReady(ready *wait.Spec, t work.Run) (how string, ok bool) {
	if ready == nil {
		return "", false
	}
	spec := *ready
	spec.Term = t.ID()
	r, ok := wait.Condition(&spec, t.Started()).Printed(t.Output())
	return strings.TrimSuffix(r.Text, "."), ok
}

// completed reports whether svc ended for good on its own, once it was
// ready, by a clean exit that its policy does not restart (a one-shot
// task): for what depends on it, it did what it was for. (A function: a
// Service has methods enough.)
func completed(svc *Service) bool {
	return svc.state == Stopped && svc.everReady && !svc.stopping
}

// afterRun is what follows run, which ended on its own once the service
// had been ready (in terminal t; nil if it did not start), by the
// restart policy.
func (svc *Service) afterRun(run stack.Run, t work.Run) {
	d := svc.restarter.Next(run)
	switch {
	case d.Restart: // its tool call is listed while it waits for the backoff
		svc.state, svc.why = Restarting, d.Reason
		svc.say(fmt.Sprintf("Restarting in %s: %s.", d.After, d.Reason))
		svc.call.List()
		svc.notice(acp.NoticeInfo, "restarts: "+d.Reason, svc.lastLines())
		svc.armRestart(d.After)
	case d.GaveUp || t == nil: // the reason says the run did not start
		svc.Fail(d.Reason, true)
	case run.Exit.Failed():
		svc.Fail(fmt.Sprintf("it %s (%s)", work.ExitText(t.Exit()), d.Reason), true)
	default:
		svc.state, svc.why = Stopped, d.Reason
		svc.say0(fmt.Sprintf("Ended: %s %s (%s).", t.ID(), work.ExitText(t.Exit()), d.Reason))
		svc.call.End(acp.StatusCompleted)
		svc.notice(acp.NoticeInfo, "ended: "+d.Reason, "")
	}
}

// armRestart starts the service's next run after d, unless it is
// stopped or has started again meanwhile.
func (svc *Service) armRestart(d time.Duration) {
	gen := svc.gen
	svc.restartAt = time.Now().Add(d)
	svc.timer = time.AfterFunc(d, func() {
		svc.h.Do(func() {
			if svc.state == Restarting && svc.gen == gen && svc.h.Open() {
				svc.timer = nil
				svc.Start()
				svc.stack.Progress()
			}
		})
	})
}

// Stop stops the service for /down, /restart or cancel, and calls then
// once it is stopped: at once if no run runs, else once the run exits
// (TERM, then KILL after the kill grace). why says who stops it ("by
// /down"), for what waited for it to be ready.
func (svc *Service) Stop(why string, then func()) {
	if !svc.stopping {
		svc.stopWhy = why
	}
	if svc.term != nil {
		svc.stopping = true
		svc.halt()
		svc.stopped = append(svc.stopped, then)
		if svc.term.Running() {
			svc.term.Stop()
		}
		return
	}
	if svc.Active() {
		svc.stopping = true
		svc.halt()
		svc.state, svc.why = Stopped, why
		svc.say0("Stopped before its next run.")
		svc.call.End(acp.StatusCompleted)
	}
	then()
}

// Listing implements work.Task: the service's line in /ps while its tool
// call is listed (no run runs).
func (svc *Service) Listing(time.Time) string {
	what := "waiting for " + strings.Join(svc.def.DependsOn, ", ") + " to be ready"
	if svc.state == Restarting {
		what = "restarting: " + svc.why
	}
	return fmt.Sprintf("%s  service %s  %s  %s", svc.call.ID(), svc.def.Name, what, svc.call.Status())
}

// Cancellable implements work.Task: tool_call/cancel is /down NAME.
func (svc *Service) Cancellable() bool { return true }

// Cancel implements work.Task: /down NAME, without a turn.
func (svc *Service) Cancel() { svc.stack.down(svc.def.Name, svc.call.ID()) }

// Close implements work.Task: the session closes, and with it the
// service. Its run, if one runs, is stopped by the close.
func (svc *Service) Close() {
	svc.stopping = true
	svc.halt()
	if svc.Active() {
		svc.state, svc.why = Stopped, "the session closed"
	}
	svc.say0("Stopped: the session closed.")
	svc.call.End(acp.StatusCancelled)
}

// HandOver implements work.Task: its frozen form is a Frozen, written
// under "Service" (Kind).
func (svc *Service) HandOver() (kind string, frozen any) {
	f := &Frozen{
		Def: svc.def, Project: svc.project, State: svc.state, Why: svc.why, Counters: svc.restarter.Counters(),
		Gen: svc.gen, EverReady: svc.everReady, Stopping: svc.stopping, RestartAt: svc.restartAt,
		RunGen: svc.runGen, NotStarted: svc.notStarted,
	}
	for _, t := range svc.runs {
		f.Runs = append(f.Runs, t.ID())
	}
	if t := svc.term; t != nil {
		f.Term, f.LogFrom = t.ID(), t.Output().Total()
	}
	return kindName, f
}

// Thaw makes f the service of tool call c again, in the new image of an
// upgrade in place, a service of stack ss, and returns it; its terminals
// (restored and adopted) are the session's already. The caller makes it
// the call's task.
func Thaw(h work.RunHost, ss *Stack, c work.Call, f *Frozen) *Service {
	spec, execLine := ReadyCondition(f.Def.Ready)
	svc := &Service{
		h: h, stack: ss, def: f.Def, project: f.Project, call: c, state: f.State, why: f.Why,
		restarter: stack.ResumeRestarter(f.Def.Policy(), f.Counters), ready: spec, execReady: execLine,
		gen: f.Gen, everReady: f.EverReady, stopping: f.Stopping, runGen: f.RunGen, notStarted: f.NotStarted,
	}
	if f.RunGen == 0 && len(f.Runs) > 0 {
		svc.runGen = f.Gen // handed over by an image that did not count them apart
	}
	svc.log = svc.newLog()
	for _, id := range f.Runs {
		if t := h.TerminalRun(id); t != nil {
			svc.runs = append(svc.runs, t)
		}
	}
	if t := h.TerminalRun(f.Term); t != nil && !t.Exited() {
		svc.term = t
		svc.log.Run(t.Output(), f.LogFrom, svc.def.Log)
		if svc.state == Starting && t.Running() && (svc.ready != nil || svc.execReady != "") {
			svc.watchReady(t, svc.gen)
		}
	}
	if svc.state == Restarting {
		svc.armRestart(max(0, time.Until(f.RestartAt)))
	}
	return svc
}
