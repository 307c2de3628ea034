package supervisor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/internal/stack"
	"shellagent/supervisor/wait"
	"shellagent/supervisor/service"
)

// A stackService is one service of the session's stack (SPEC "Stacks",
// docs/stacks.md), and the task of its tool call, titled "service NAME":
// in_progress while the stack manages it, its content referencing its
// runs. Each run is a terminal, launched by launchService and listed while
// it runs; while the service waits (for its dependencies, or to restart)
// its tool call is listed instead: a tool call is listed only while it has
// no listed terminal (background.go rule 5).
//
// Its life: service.Waiting until every dependency is ready (stackState.progress),
// then its ports are checked and a run starts (service.Starting); its ready
// condition, /wait's (a wait.Condition's watch or poll, on a goroutine of its
// own), makes it service.Ready, or fails it (service.Failed) at ready_timeout or
// when the run exits first. A run that ends on its own after the service
// was ready is given to its Restarter: service.Restarting until the backoff
// elapses and the next run starts, or service.Failed when it gives up, or
// service.Stopped when the policy restarts nothing. /down, /restart,
// tool_call/cancel and terminal/cancel stop it (service.Stopped, completed);
// the session's close ends it cancelled. Each change is reported by the
// event that makes it; what follows for the other services (a dependent
// that may start, an /up that is done) by stackState.progress, at the end
// of the event.
type stackService struct {
	def       *stack.Service
	project   string // the stack's directory, for its log's path
	call      *toolCall
	state     service.State
	why       string // what the state came from, for /status and the content
	restarter *stack.Restarter
	ready     *wait.Spec // the ready condition as /wait reads it; nil: none, or execReady
	execReady string     // the command of an exec:CMD ready condition

	runs      []*terminal // its latest runs, at most service.MaxRuns, oldest first: what its content references
	term      *terminal   // the run that runs, if one does
	gen       int         // counts runs: a report of an earlier run's readiness or delay is stale
	everReady bool        // a run was ready: from then on its exits are restarts, not failures
	stopping  bool        // /down, /restart or cancel: its end is no failure, and nothing restarts it
	stopped   []func()    // what waits for its run to end (the next service of a /down)

	cancelReady context.CancelFunc // ends the readiness goroutine of the current run
	timer       *time.Timer        // the delay before a restart
	restartAt   time.Time          // when the timer fires
	log         service.Log        // its runs' log, and the end of each run
}

// launchService starts a run of svc: the one way a service's terminal is
// launched, through the launch path of every command (launchWith). It
// returns the terminal, or nil if it could not start (launchWith has then
// failed the service's tool call).
func launchService(st *state, svc *stackService) *terminal {
	note := func(id string) string {
		return fmt.Sprintf("Run %d of service %s, in %s; /logs %s shows its output, /down %s stops it.", svc.gen, svc.def.Name, id, svc.def.Name, svc.def.Name)
	}
	return launchWith(st, svc.call, svc.def.Command, launchOptions{dir: svc.def.Dir, env: svc.def.Environ(), note: note})
}

// active reports whether the stack still manages the service.
func (svc *stackService) active() bool { return svc.state.Active() }

// start starts a run, once its dependencies are ready or its backoff has
// elapsed: unless a port it declares is taken, which fails it before its
// command runs.
func (svc *stackService) start(st *state) {
	for _, p := range svc.def.Ports {
		free, pid, cmd, _ := stack.PortHolder(p) // Safe: the file's ports are 1..65535.
		if !free {
			svc.fail(st, service.PortTaken(p, pid, cmd), true)
			return
		}
	}
	svc.state, svc.why = service.Starting, ""
	svc.gen++
	gen := svc.gen
	svc.launched(st, gen, launchService(st, svc))
}

// launched continues start once the launch is back: the run's terminal is
// listed in place of the tool call, its log copied, its ready condition
// watched.
func (svc *stackService) launched(st *state, gen int, t *terminal) {
	if t == nil { // launchWith failed the tool call and said why in its content
		svc.state, svc.why = service.Failed, "its command could not start"
		svc.notice(st, acp.NoticeWarning, "failed: its command could not start", contentText(svc.call))
		st.stack.progress(st)
		return
	}
	svc.term = t
	svc.runs = append(svc.runs, t)
	if len(svc.runs) > service.MaxRuns {
		svc.runs = slices.Delete(svc.runs, 0, 1)
	}
	if st.list.index(listItem{call: svc.call}) >= 0 {
		st.list.replaceCall(svc.call, t)
	} else {
		st.list.addTerminal(t)
	}
	if len(svc.runs) > 1 { // the update launch sent references this run only
		svc.say(st, fmt.Sprintf("Run %d, in %s.", gen, t.id))
	}
	svc.log.Run(t.ring, 0, svc.def.Log)
	if svc.stopping || gen != svc.gen {
		t.stop(st.settings.killGrace)
		return
	}
	if svc.ready == nil && svc.execReady == "" {
		svc.markReady(st, "it started (it has no ready condition)")
		st.stack.progress(st)
		return
	}
	svc.watchReady(st, t, gen)
}

// say sets the service's content to its runs and text, and sends it.
func (svc *stackService) say(st *state, text string) {
	svc.say0(st, text)
	st.out.send(svc.call.update())
}

// halt ends what waits on the service's behalf: its ready condition's
// goroutine and its restart's delay.
func (svc *stackService) halt() {
	if svc.cancelReady != nil {
		svc.cancelReady()
		svc.cancelReady = nil
	}
	if svc.timer != nil {
		svc.timer.Stop()
		svc.timer = nil
	}
}

// fail ends the service as failed: its run, if one runs, is stopped, its
// tool call fails, and, with tell, a notice names it, the reason and its
// last lines.
func (svc *stackService) fail(st *state, reason string, tell bool) {
	svc.halt()
	svc.state, svc.why = service.Failed, reason
	if t := svc.term; t != nil && t.state == termRunning {
		t.stop(st.settings.killGrace)
	}
	svc.say0(st, "Failed: "+reason+".")
	endCall(st, svc.call, acp.StatusFailed)
	if tell {
		svc.notice(st, acp.NoticeWarning, "failed: "+reason, svc.lastLines())
	}
}

// say0 is say without sending: for the update that ends the tool call.
func (svc *stackService) say0(_ *state, text string) {
	c := make([]acp.ToolCallContent, 0, len(svc.runs)+1)
	for _, t := range svc.runs {
		if t.state != termRetired {
			c = append(c, acp.TerminalContent(t.id))
		}
	}
	svc.call.content = append(c, acp.TextContent(text))
}

// lastLines is the last lines of the service's latest run, escapes
// removed, or "".
func (svc *stackService) lastLines() string {
	if len(svc.runs) == 0 {
		return ""
	}
	return service.LastLines(svc.runs[len(svc.runs)-1].ring)
}

// notice tells the client about the service: "service NAME what", with
// its last lines.
func (svc *stackService) notice(st *state, severity, what, lines string) {
	if st.life != sessionOpen {
		return
	}
	st.out.notice(service.Notice(svc.def.Name, svc.call.id, svc.state, severity, what, lines))
}

// serviceExited serves the exit of terminal t if it is a run of a
// service, and reports whether it was: the terminal leaves the list, and
// the service restarts, fails, or ends. Called by Session.exited once
// t's exitStatus is out.
func serviceExited(st *state, t *terminal, onItsOwn bool) bool {
	svc, ok := t.call.task.(*stackService)
	if !ok {
		return false
	}
	st.list.removeTerminal(t)
	if t == svc.term {
		svc.exited(st, t, onItsOwn)
	}
	if st.stack != nil {
		st.stack.progress(st)
	}
	return true
}

func (svc *stackService) exited(st *state, t *terminal, onItsOwn bool) {
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
		s := st.s
		defer svc.log.After(func(f func()) { s.do(func(*state) { f() }) }, func() {
			for _, f := range done {
				f()
			}
		})
	}
	switch {
	case svc.call.state >= callDone: // it failed, or the session closed
	case svc.stopping || !onItsOwn:
		svc.state, svc.why = service.Stopped, "stopped"
		svc.say0(st, fmt.Sprintf("Stopped: %s %s.", t.id, exitText(t.exit)))
		endCall(st, svc.call, acp.StatusCompleted)
	case !svc.everReady:
		svc.fail(st, fmt.Sprintf("it %s before it was ready", exitText(t.exit)), true)
	default:
		d := svc.restarter.Next(stack.Run{Start: t.started, End: time.Now(), Exit: service.RunExit(t.exit)})
		switch {
		case d.Restart:
			svc.restartAfter(st, d)
		case d.GaveUp:
			svc.fail(st, d.Reason, true)
		case service.RunExit(t.exit).Failed():
			svc.fail(st, fmt.Sprintf("it %s (%s)", exitText(t.exit), d.Reason), true)
		default:
			svc.state, svc.why = service.Stopped, d.Reason
			svc.say0(st, fmt.Sprintf("Ended: %s %s (%s).", t.id, exitText(t.exit), d.Reason))
			endCall(st, svc.call, acp.StatusCompleted)
			svc.notice(st, acp.NoticeInfo, "ended: "+d.Reason, "")
		}
	}
}

// restartAfter lists the service's tool call while it waits for the
// backoff, says so, and starts the next run once it has elapsed.
func (svc *stackService) restartAfter(st *state, d stack.Decision) {
	svc.state, svc.why = service.Restarting, d.Reason
	svc.say(st, fmt.Sprintf("Restarting in %s: %s.", d.After, d.Reason))
	st.list.addCall(svc.call)
	svc.notice(st, acp.NoticeInfo, "restarts: "+d.Reason, svc.lastLines())
	svc.armRestart(st, d.After)
}

// armRestart starts the service's next run after d, unless it is
// stopped or has started again meanwhile.
func (svc *stackService) armRestart(st *state, d time.Duration) {
	gen, s := svc.gen, st.s
	svc.restartAt = time.Now().Add(d)
	svc.timer = time.AfterFunc(d, func() {
		s.do(func(st *state) {
			if svc.state == service.Restarting && svc.gen == gen && st.life == sessionOpen {
				svc.timer = nil
				svc.start(st)
				st.stack.progress(st)
			}
		})
	})
}

// stop stops the service for /down, /restart or cancel, and calls then
// once it is stopped: at once if no run runs, else once the run exits
// (TERM, then KILL after the kill grace).
func (svc *stackService) stop(st *state, then func()) {
	if svc.term != nil {
		svc.stopping = true
		svc.halt()
		svc.stopped = append(svc.stopped, then)
		if svc.term.state == termRunning {
			svc.term.stop(st.settings.killGrace)
		}
		return
	}
	if svc.active() {
		svc.stopping = true
		svc.halt()
		svc.state, svc.why = service.Stopped, "stopped"
		svc.say0(st, "Stopped before its next run.")
		endCall(st, svc.call, acp.StatusCompleted)
	}
	then()
}

// listing implements task: the service's line in /ps while its tool call
// is listed (no run runs).
func (svc *stackService) listing(time.Time) string {
	what := "waiting for " + strings.Join(svc.def.DependsOn, ", ") + " to be ready"
	if svc.state == service.Restarting {
		what = "restarting: " + svc.why
	}
	return fmt.Sprintf("%s  service %s  %s  %s", svc.call.id, svc.def.Name, what, svc.call.status())
}

// cancellable implements task: tool_call/cancel is /down NAME.
func (svc *stackService) cancellable() bool { return true }

// cancel implements task: /down NAME, without a turn.
func (svc *stackService) cancel(st *state) {
	if st.stack == nil {
		return
	}
	names, err := st.stack.downOrder([]string{svc.def.Name})
	if err != nil {
		names = []string{svc.def.Name}
	}
	st.stack.stopInOrder(st, names, func() { st.stack.progress(st) })
}

// close implements task: the session closes, and with it the service.
// Its run, if one runs, is stopped by the close.
func (svc *stackService) close(st *state) {
	svc.stopping = true
	svc.halt()
	if svc.active() {
		svc.state, svc.why = service.Stopped, "the session closed"
	}
	svc.say0(st, "Stopped: the session closed.")
	endCall(st, svc.call, acp.StatusCancelled)
}

// newLog is the log of svc's runs (service.Log), kept under the state
// directory if there is one.
func newLog(st *state, svc *stackService) service.Log {
	cfg := &st.s.sv.cfg
	return service.Log{Logger: cfg.Log, Dir: cfg.StateDir, Project: svc.project, Name: svc.def.Name, Limit: cfg.logCap}
}

// contentText is the text of a tool call's content, for a notice.
func contentText(c *toolCall) string {
	var b strings.Builder
	for _, it := range c.content {
		if it.Content != nil {
			b.WriteString(it.Content.Text)
		}
	}
	return b.String()
}

// handOver implements task.
func (svc *stackService) handOver() (kind string, frozen any) {
	f := &service.Frozen{
		Def: svc.def, Project: svc.project, State: svc.state, Why: svc.why, Counters: svc.restarter.Counters(),
		Gen: svc.gen, EverReady: svc.everReady, Stopping: svc.stopping, RestartAt: svc.restartAt,
	}
	for _, t := range svc.runs {
		f.Runs = append(f.Runs, t.id)
	}
	if t := svc.term; t != nil {
		f.Term, f.LogFrom = t.id, t.ring.Total()
	}
	return "Service", f
}

// thawService makes f the task of tool call c again, in the new image of
// an upgrade in place, and returns the service; its terminals (restored
// and adopted) are the session's already.
func thawService(st *state, c *toolCall, f *service.Frozen) *stackService {
	spec, execLine, _ := readyCondition(f.Def.Ready) // Safe: checked by the /up that started it.
	svc := &stackService{
		def: f.Def, project: f.Project, call: c, state: f.State, why: f.Why,
		restarter: stack.ResumeRestarter(f.Def.Policy(), f.Counters), ready: spec, execReady: execLine,
		gen: f.Gen, everReady: f.EverReady, stopping: f.Stopping,
	}
	svc.log = newLog(st, svc)
	c.task = svc
	for _, id := range f.Runs {
		if t := st.work.terminals[id]; t != nil {
			svc.runs = append(svc.runs, t)
		}
	}
	if t := st.work.terminals[f.Term]; t != nil && t.state < termExited {
		svc.term = t
		svc.log.Run(t.ring, f.LogFrom, svc.def.Log)
		if svc.state == service.Starting && t.state == termRunning && (svc.ready != nil || svc.execReady != "") {
			svc.watchReady(st, t, svc.gen)
		}
	}
	if svc.state == service.Restarting {
		svc.armRestart(st, max(0, time.Until(f.RestartAt)))
	}
	return svc
}
