// Package service is a stack's services (SPEC "Stacks", docs/stacks.md),
// a kind of work through supervisor/work: a Service (run.go) is the task
// of its tool call, whose runs are terminals it launches through the
// session (work.RunHost), whose ready condition is /wait's (ready.go:
// wait.Condition, on a goroutine of its own), and which restarts by its
// internal/stack Restarter. A Stack (stack.go) is a session's services:
// it starts each once its dependencies are ready (Progress), and serves
// /up, /down and /restart, which hold the foreground through a
// work.Turn until what they asked for is done, and /status and /logs,
// which answer at once: their entries in the session's command table are
// here (Commands, commands.go), and the table is package supervisor's.
// After an upgrade in place a service thaws through its work.Kind (Kind,
// kind.go) into the session's stack, which its Host gives it, and which
// the session then restores (Stack.Restore).
//
// The rest needs nothing of the session: where a service is in its life
// (State) and the form an upgrade in place hands it over in (Frozen);
// when it may start (Dependencies) and how a run ended, as its Restarter
// reads it (RunExit); what it tells (Notice, LastLines, PortTaken) and
// what /up, /restart and /status answer (UpSummary, StatusText); its
// capped log of its runs (Log, log.go) and its exec: ready probe
// (ExecProbe, probe.go: each try runs through the session's launcher,
// ptyio's Probe, held as a terminal's processes are).
//
// A Stack's and a Service's methods run on the session's actor; its ready goroutine
// and its restart's timer enter it through Host.Do. These functions keep
// no state and run on the goroutine that calls them; a Log is the session
// actor's, but for the copier of each run, a goroutine of its own, and an
// ExecProbe runs on the service's ready goroutine.
package service

import (
	"fmt"
	"time"

	"shellagent/acp"
	"shellagent/internal/stack"
	"shellagent/outputbuf"
	"shellagent/termtext"
)

// State is where a service is, as /status names it. Its numbers are part
// of the frozen form (Frozen.State): they never change.
type State int

const (
	Waiting    State = iota // for its dependencies to be ready; no run yet
	Starting                // a run started; its ready condition does not hold yet
	Ready                   // its ready condition held
	Restarting              // its run ended; the next starts after the backoff
	Failed                  // it is no longer managed: it failed or gave up
	Stopped                 // it is no longer managed: stopped, or it ended for good
)

func (s State) String() string {
	return [...]string{"starting", "starting", "ready", "restarting", "failed", "stopped"}[s]
}

// Active reports whether the stack still manages a service in state s.
func (s State) Active() bool { return s < Failed }

// MaxRuns is how many of a service's runs its content references.
const MaxRuns = 5

// Frozen is a service as an upgrade in place hands it over (package
// supervisor/handover), under the kind name "Service" (Kind): its
// definition, where it is in its life, its restart policy's counters,
// its runs by terminal id.
// The new image goes on from there: the run that runs is adopted with its
// terminal, its ready condition is watched again until the same deadline,
// a restart that waits for its backoff starts when it would have, and a
// run that ends after the upgrade is restarted by the new image as by the
// old. Its fields are the format's: never renamed.
type Frozen struct {
	Def       *stack.Service
	Project   string
	State     State
	Why       string
	Counters  stack.Counters
	Runs      []string // terminal ids, oldest first
	Term      string   `json:",omitempty"` // the run that runs
	Gen       int
	EverReady bool
	Stopping  bool
	RestartAt time.Time // while Restarting
	LogFrom   int64     // the offset of the run's output its log has up to, about
	// RunGen is the number of the last of Runs; the runs numbered after
	// it, up to Gen, did not start: NotStarted says why the latest did not.
	RunGen     int    `json:",omitempty"`
	NotStarted string `json:",omitempty"`
}

// Dependencies reports whether every dependency in deps is ready, or why
// a service that waits for them will not start; state returns the state
// of the stack's latest service of a name, if it has one.
func Dependencies(deps []string, state func(name string) (State, bool)) (ready bool, why string) {
	ready = true
	for _, d := range deps {
		switch s, ok := state(d); {
		case !ok:
			return false, "not started: its dependency " + d + " does not run"
		case s == Failed:
			return false, "not started: its dependency " + d + " failed"
		case s == Stopped:
			return false, "not started: its dependency " + d + " stopped"
		case s != Ready:
			ready = false
		}
	}
	return ready, ""
}

// RunExit is how a run ended, as a Restarter reads it.
func RunExit(es *acp.ExitStatus) stack.Exit {
	x := stack.Exit{Signal: es.Signal}
	if es.ExitCode != nil {
		x.Code = *es.ExitCode
	} else if x.Signal == "" {
		x.Code = -1
	}
	return x
}

// PortTaken says who holds port, where /proc tells (stack.PortHolder):
// why a service that declares it does not start.
func PortTaken(port, pid int, cmd string) string {
	switch {
	case pid != 0 && cmd != "":
		return fmt.Sprintf("port %d is in use by pid %d (%s); its command was not run", port, pid, shorten(cmd, 80))
	case pid != 0:
		return fmt.Sprintf("port %d is in use by pid %d; its command was not run", port, pid)
	}
	return fmt.Sprintf("port %d is in use (by a process this user cannot see); its command was not run", port)
}

// shorten cuts text to n runes, an ellipsis last.
func shorten(text string, n int) string {
	if r := []rune(text); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return text
}

// NotStartedText says that the runs numbered after run, up to gen, did
// not start, the last of them because of why; "" if none is (gen is run).
func NotStartedText(run, gen int, why string) string {
	switch {
	case gen <= run:
		return ""
	case gen == run+1:
		return fmt.Sprintf("Run %d did not start: %s.", gen, why)
	}
	return fmt.Sprintf("Runs %d to %d did not start; the last: %s.", run+1, gen, why)
}

// noticeLines is how many of its last lines a service's notice shows.
const noticeLines = 10

// LastLines is the last lines a run's output ring holds, escapes removed,
// for a notice; "" for no ring.
func LastLines(ring *outputbuf.Ring) string {
	if ring == nil {
		return ""
	}
	buf := make([]byte, min(ring.Total(), 64<<10))
	n, _ := ring.ReadAt(buf, ring.Total()-int64(len(buf)))
	last, _ := termtext.LastLines(termtext.Plain(buf[:n]), noticeLines)
	return last
}

// Notice is the notice that tells the client about service name, whose
// tool call is callID, now in state: "service NAME what", with its last
// lines if there are any.
func Notice(name, callID string, state State, severity, what, lines string) *acp.Notice {
	desc := "Service " + name + " " + what + "."
	if lines != "" {
		desc += "\nIts last lines:\n" + termtext.Fence(lines)
	}
	return &acp.Notice{
		Severity: severity, Title: "service " + name + " " + what, Description: desc,
		Meta: map[string]any{"shellagent": map[string]any{"event": "service", "service": name, "state": state.String(), "toolCallId": callID}},
	}
}
