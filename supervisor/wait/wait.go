// Package wait is a kind of work of a session (package supervisor,
// through supervisor/work): /wait, foreground work that watches a
// terminal. wait.go holds the arguments (what a wait waits for is read
// by internal/waitfor), the wait, its outcome and its frozen form for an
// upgrade in place; waitscan.go how it reads a
// terminal's output and probes a port; commands.go the entry of /wait in
// the session's command table (Commands). A service's ready condition
// (supervisor/service's ready.go) is watched by the same code (Condition).
package wait

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/internal/linescan"
	"shellagent/internal/probe"
	"shellagent/internal/waitfor"
	"shellagent/internal/words"
	"shellagent/outputbuf"
	"shellagent/supervisor/work"
)

// A wait (/wait ID [PATTERN] [--timeout DUR] [--new]) is foreground work
// with a tool call of its own and no process: it watches terminal ID,
// never touching it, until the terminal prints a line that matches
// PATTERN, a port of the loopback accepts connections, a URL answers, or,
// without PATTERN, the terminal exits. It then completes, with an agent
// message that says what it saw; it fails when the terminal exits first
// or at its timeout, and is cancelled by session/cancel, tool_call/cancel
// (/stop) and close. It is its tool call's task; its state is the tool
// call's: callRunning until it ends, then callDone.
//
// It holds the foreground (the turn's call is the wait's) and is not
// subject to the foreground timeout, which would defeat it: it has its
// own. /bg moves it to the background list as a listed tool call, which
// ends later on its own; from then on its content no longer references
// the terminal, which is listed itself (a tool call that references a
// listed terminal is not listed, see background.go rule 5).
//
// Each wait has one goroutine (watch), which does the waiting off the
// session's actor and reports its outcome through Session.do: it reads
// the terminal's ring, or polls a port or a URL, and ends when the wait
// has its answer, at the timeout, or when the wait is stopped. The PTY's
// reader and the writer do nothing more for a terminal that is waited
// on: the goroutine reads the ring on a timer (see waitscan.go).

// Limits of /wait's timeout.
const (
	DefaultTimeout = 5 * time.Minute
	MaxTimeout     = time.Hour
)

// pollEvery is how often a wait tries its port or URL; each try gives up
// after probeTimeout (a connect) or AnswerTimeout (a request).
const (
	pollEvery     = 250 * time.Millisecond
	probeTimeout  = 200 * time.Millisecond
	AnswerTimeout = time.Second
)

// Spec is what a /wait waits for: a line that matches pattern, a
// port that accepts connections, a URL that answers, or, if none is set,
// the terminal's exit.
type Spec struct {
	Term    string         // the terminal's id
	Text    string         // the pattern as written
	Pattern *regexp.Regexp // compiled with (?m), see linescan.New
	Port    int
	URL     string
	Timeout time.Duration
	Fresh   bool // --new: only output printed after the wait started counts
}

// Parse reads the arguments of /wait. problem, if not empty, says what is
// wrong with them.
func Parse(rest string) (spec *Spec, problem string) {
	args, err := words.Split(rest)
	switch {
	case err != nil:
		return nil, "/wait: " + err.Error()
	case len(args) == 0 || args[0].Text == "": // '' names no terminal
		return nil, "/wait needs a terminal id"
	}
	spec = &Spec{Term: args[0].Text, Timeout: DefaultTimeout}
	var pattern []string
	for i := 1; i < len(args); i++ {
		w := args[i]
		switch {
		case w.Quoted || !strings.HasPrefix(w.Text, "--"):
			pattern = append(pattern, w.Text)
		case w.Text == "--new":
			spec.Fresh = true
		case w.Text == "--timeout" || strings.HasPrefix(w.Text, "--timeout="):
			v, ok := strings.CutPrefix(w.Text, "--timeout=")
			if !ok {
				if i+1 == len(args) {
					return nil, "/wait: --timeout needs a duration"
				}
				i++
				v = args[i].Text
			}
			d, err := time.ParseDuration(v)
			switch {
			case err != nil:
				return nil, fmt.Sprintf("/wait: %q is not a duration", v)
			case d <= 0:
				return nil, fmt.Sprintf("/wait: the timeout must be more than 0, got %s", v)
			case d > MaxTimeout:
				return nil, fmt.Sprintf("/wait: the timeout must be at most %s, got %s", MaxTimeout, v)
			}
			spec.Timeout = d
		default:
			return nil, fmt.Sprintf("/wait: unknown option %s (quote a pattern that starts with --)", w.Text)
		}
	}
	if len(pattern) > 0 {
		if problem := spec.Target(strings.Join(pattern, " ")); problem != "" {
			return nil, problem
		}
	}
	if spec.Fresh && spec.Pattern == nil {
		return nil, "/wait: --new applies to a pattern, which output it reads"
	}
	return spec, ""
}

// Target reads what the wait waits for, text, as waitfor.Parse does:
// :PORT, an http:// or https:// URL, or a regular expression.
func (spec *Spec) Target(text string) (problem string) {
	spec.Text = text
	t, err := waitfor.Parse(text)
	if err != nil {
		return "/wait: " + err.Error()
	}
	spec.Pattern, spec.Port, spec.URL = t.Pattern, t.Port, t.URL
	return ""
}

// title is the wait's tool call title: "wait for term_1: ready on".
func (spec *Spec) title() string {
	switch {
	case spec.Pattern != nil:
		return "wait for " + spec.Term + ": " + spec.Text
	case spec.Port != 0:
		return fmt.Sprintf("wait for %s: port %d", spec.Term, spec.Port)
	case spec.URL != "":
		return "wait for " + spec.Term + ": " + spec.URL
	}
	return "wait for " + spec.Term + " to exit"
}

// what names what the wait waits for, for its texts.
func (spec *Spec) what() string {
	switch {
	case spec.Pattern != nil:
		return fmt.Sprintf("a line of %s that matches %s", spec.Term, quoted(spec.Text))
	case spec.Port != 0:
		return fmt.Sprintf("port %d to accept connections", spec.Port)
	case spec.URL != "":
		return spec.URL + " to answer"
	}
	return spec.Term + " to exit"
}

// awaited says what the wait waits to happen, in the past tense, for
// the text of a terminal that exited first.
func (spec *Spec) awaited() string {
	switch {
	case spec.Pattern != nil:
		return "it printed a line that matches " + quoted(spec.Text)
	case spec.Port != 0:
		return fmt.Sprintf("port %d accepted a connection", spec.Port)
	}
	return spec.URL + " answered"
}

// kind is the wait's tool kind: reading a terminal's output for a pattern
// is a search; the others are none of the schema's named kinds.
func (spec *Spec) kind() string {
	if spec.Pattern != nil {
		return "search"
	}
	return "other"
}

func (spec *Spec) rawInput() map[string]any {
	in := map[string]any{"terminalId": spec.Term, "timeout": spec.Timeout.String()}
	switch {
	case spec.Pattern != nil:
		in["pattern"], in["new"] = spec.Text, spec.Fresh
	case spec.Port != 0:
		in["port"] = spec.Port
	case spec.URL != "":
		in["url"] = spec.URL
	}
	return in
}

// A Wait is a wait under way, the task of its tool call. It is owned by
// its session's actor, but for what its goroutine reads: spec and
// started, set before it starts, and exit, set before exited is closed.
type Wait struct {
	h       work.Host
	spec    *Spec
	call    work.Call
	term    work.Terminal // nil once the wait ended: it must not keep the ring alive
	started time.Time
	listed  bool               // moved to the background by /bg
	from    int64              // the offset of the terminal's output it reads from
	stop    context.CancelFunc // ends the goroutine
	exited  chan struct{}      // closed once the terminal exited, for a pattern's last lines
	exit    *acp.ExitStatus
}

// Start serves /wait in the session h, whose turn t then holds the
// foreground; or, if its terminal is unknown, says so and ends the turn.
func Start(h work.Host, t work.Turn, spec *Spec) {
	term := h.Terminal(spec.Term)
	if term == nil {
		t.Refuse(fmt.Sprintf("Cannot wait for %s: there is no terminal %q in this session; /ps lists the background terminals.", spec.Term, spec.Term))
		return
	}
	w := &Wait{h: h, spec: spec, term: term, started: time.Now()}
	w.call = h.NewCall(work.CallSpec{Kind: spec.kind(), Title: spec.title(), Input: spec.rawInput()}, w)
	w.call.SetContent(w.content(w.waitingText())...)
	t.Hold(w.call, w)
	w.call.Send()
	w.start()
	if term.Exited() {
		w.TerminalExited(term)
	}
}

// Condition returns a Wait that is no tool call's, for a service's ready
// condition spec, whose run started then: only its Watch and Poll serve.
func Condition(spec *Spec, started time.Time) *Wait {
	return &Wait{spec: spec, started: started, exited: make(chan struct{})}
}

func (w *Wait) waitingText() string {
	text := "Waiting for " + w.spec.what()
	switch {
	case w.spec.Pattern != nil && w.spec.Fresh:
		text += " (escape sequences removed; only output printed from now on counts)"
	case w.spec.Pattern != nil:
		text += " (escape sequences removed; output already printed counts)"
	case w.spec.Port != 0:
		text += " on 127.0.0.1 or ::1"
	}
	return text + ", for at most " + w.spec.Timeout.String() + "."
}

// content is the wait's tool call content: the terminal it watches while
// it is foreground work, and text.
func (w *Wait) content(text string) []acp.ToolCallContent {
	if w.listed {
		return []acp.ToolCallContent{acp.TextContent(text)}
	}
	return []acp.ToolCallContent{acp.TerminalContent(w.spec.Term), acp.TextContent(text)}
}

// start starts the wait's goroutine.
func (w *Wait) start() {
	if w.spec.Fresh {
		w.from = w.term.Output().Total()
	}
	w.run()
}

// run starts the goroutine of a wait whose from is set, until the
// wait's deadline: its start and its timeout. It reports its outcome
// through Host.Do.
func (w *Wait) run() {
	ctx, stop := context.WithDeadline(context.Background(), w.started.Add(w.spec.Timeout))
	w.stop, w.exited = stop, make(chan struct{})
	ring, from, h := w.term.Output(), w.from, w.h
	go func() {
		defer stop()
		if r := w.Watch(ctx, ring, from); r.Status != "" {
			h.Do(func() { w.end(r.Status, r.Text, true, acp.StopEndTurn) })
		}
	}()
}

// Frozen is a wait as an upgrade in place hands it over (Task.HandOver):
// the new image goes on waiting until the same deadline, reading the
// terminal's output (restored at the same offsets) from the same offset.
// Its encoding is the upgrade's format: its fields are never renamed.
type Frozen struct {
	Term, Target string // Target: the pattern, :PORT or URL as written; "" for the exit
	Timeout      time.Duration
	Fresh        bool
	From         int64
	Started      time.Time
	Listed       bool
}

// HandOver implements work.Task.
func (w *Wait) HandOver() (kind string, frozen any) {
	f := &Frozen{Term: w.spec.Term, Timeout: w.spec.Timeout, Fresh: w.spec.Fresh, From: w.from, Started: w.started, Listed: w.listed}
	if w.spec.Pattern != nil || w.spec.Port != 0 || w.spec.URL != "" {
		f.Target = w.spec.Text
	}
	return kindName, f
}

// Kind is the kind of work of a wait.
var Kind = work.Kind{Name: kindName, Thaw: thaw}

// kindName is what a wait's frozen form is written under.
const kindName = "Wait"

// thaw makes frozen the task of tool call c again, in the new image of
// an upgrade in place, and waits on; or ends c failed, saying why, if it
// cannot (its task is then none).
func thaw(h work.Host, c work.Call, frozen json.RawMessage) (work.Task, error) {
	var f Frozen
	if err := json.Unmarshal(frozen, &f); err != nil {
		return nil, fmt.Errorf("thaw wait %s: %w", c.ID(), err)
	}
	spec := &Spec{Term: f.Term, Timeout: f.Timeout, Fresh: f.Fresh}
	term := h.Terminal(f.Term)
	problem := ""
	if f.Target != "" {
		problem = spec.Target(f.Target)
	}
	if !c.Final() && (term == nil || problem != "") {
		c.SetContent(acp.TextContent("The wait did not outlive the daemon's upgrade in place: " + cmp.Or(problem, "its terminal is gone") + "."))
		c.End(acp.StatusFailed)
		return nil, nil
	}
	w := &Wait{h: h, spec: spec, call: c, term: term, started: f.Started, listed: f.Listed, from: f.From}
	if c.Final() {
		w.term = nil
		return w, nil
	}
	w.run()
	if term.Exited() {
		w.TerminalExited(term)
	}
	return w, nil
}

// Result is how a wait ended, as its goroutine found: a final Status
// and the Text that says why. No status: it was stopped.
type Result struct{ Status, Text string }

// Watch waits for what the wait waits for, in ring from offset from on
// for a pattern, and returns the outcome, or no outcome if ctx was
// cancelled. The terminal's exit ends a wait for a pattern here, once its
// last lines are read, and every other wait on the session's actor
// (TerminalExited). It runs off the actor.
func (w *Wait) Watch(ctx context.Context, ring *outputbuf.Ring, from int64) Result {
	switch {
	case w.spec.Pattern != nil:
		return w.watchOutput(ctx, ring, from)
	case w.spec.Port != 0:
		return w.Poll(ctx, w.probePort)
	case w.spec.URL != "":
		return w.Poll(ctx, probe.URL(w.spec.URL, AnswerTimeout))
	}
	<-ctx.Done()
	return w.ended(ctx, nil)
}

// watchOutput reads the terminal's ring from offset from on (see
// linescan.Scanner) every scanEvery, until a line matches or the terminal
// exits and its last line, complete or not, has been read. A line that
// matches is reported once the client has been sent it (see sent).
func (w *Wait) watchOutput(ctx context.Context, ring *outputbuf.Ring, from int64) Result {
	sc := linescan.New(w.spec.Pattern, from)
	tick := time.NewTicker(scanEvery)
	defer tick.Stop()
	quiet := time.Now() // since when no output came
	for budget := 0; ; budget = scanBudget {
		off := sc.Offset()
		if line, ok := sc.Scan(ring, budget); ok {
			sent(ctx, ring, sc.Offset())
			return w.matched(line)
		}
		if now := time.Now(); sc.Offset() != off {
			quiet = now
		} else if now.Sub(quiet) >= partialQuiet {
			if line, ok := sc.Partial(); ok {
				sent(ctx, ring, sc.Offset())
				return w.matched(line)
			}
		}
		select {
		case <-ctx.Done():
			return w.ended(ctx, nil)
		case <-w.exited:
			if r, ok := w.printed(sc, ring); ok {
				return r
			}
			return Result{acp.StatusFailed, fmt.Sprintf("%s %s before %s; waited %s.", w.spec.Term, work.ExitText(w.exit), w.spec.awaited(), w.waited())}
		case <-tick.C:
		}
	}
}

// Printed reports whether ring, the output of a terminal that has exited,
// holds a line that matches the wait's pattern (its last line, complete or
// not, included), as a wait for a pattern reads a terminal at its exit,
// and the outcome then. A wait for anything but a pattern finds none.
func (w *Wait) Printed(ring *outputbuf.Ring) (Result, bool) {
	if w.spec.Pattern == nil {
		return Result{}, false
	}
	return w.printed(linescan.New(w.spec.Pattern, 0), ring)
}

// printed reads the rest of ring with sc, and its last line, for a match.
func (w *Wait) printed(sc *linescan.Scanner, ring *outputbuf.Ring) (Result, bool) {
	if line, ok := sc.Scan(ring, 0); ok {
		return w.matched(line), true
	}
	if line, ok := sc.Partial(); ok {
		return w.matched(line), true
	}
	return Result{}, false
}

func (w *Wait) matched(line string) Result {
	return Result{acp.StatusCompleted, fmt.Sprintf("%s printed %s, which matches %s; waited %s.",
		w.spec.Term, quoted(work.Shorten(strings.TrimSpace(line), 200)), quoted(w.spec.Text), w.waited())}
}

// Poll tries probe at once and then every pollEvery until it succeeds;
// what it returns on success names what answered. A timeout tells the
// error of the last try that the wait's own end did not cut short (a
// tick and the deadline come together when the timeout is a multiple of
// pollEvery, and the try then fails at once with "i/o timeout").
func (w *Wait) Poll(ctx context.Context, probe func(context.Context) (string, error)) Result {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last error
	for {
		answer, err := probe(ctx)
		if err == nil {
			return Result{acp.StatusCompleted, answer + "; waited " + w.waited() + "."}
		}
		if !over(ctx) || last == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return w.ended(ctx, last)
		case <-tick.C:
		}
	}
}

// over reports whether ctx has ended or reached its deadline: the net
// package fails a dial at the deadline by the clock, before the context's
// own timer has ended it.
func over(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(deadline)
}

// ended is the outcome of a wait whose context ended: the timeout, with
// the last error of a poll, or none if the wait was stopped.
func (w *Wait) ended(ctx context.Context, last error) Result {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Result{}
	}
	var text string
	switch d := w.spec.Timeout; {
	case w.spec.Pattern != nil:
		text = fmt.Sprintf("%s printed no line that matches %s within %s.", w.spec.Term, quoted(w.spec.Text), d)
	case w.spec.Port != 0:
		text = fmt.Sprintf("Port %d accepted no connection within %s (the last try: %v).", w.spec.Port, d, last)
	case w.spec.URL != "":
		text = fmt.Sprintf("%s did not answer within %s (the last try: %v).", w.spec.URL, d, last)
	default:
		text = fmt.Sprintf("%s was still running after %s.", w.spec.Term, d)
	}
	return Result{acp.StatusFailed, text}
}

func (w *Wait) waited() string {
	return time.Since(w.started).Round(time.Millisecond).String()
}

// TerminalExited implements work.TerminalWatcher: the exit of w's
// terminal t completes a wait for the exit, fails a wait for a port or
// URL, and makes a wait for a pattern read the last lines first
// (watchOutput).
func (w *Wait) TerminalExited(t work.Terminal) {
	if w.call.Final() || w.term == nil || w.term.ID() != t.ID() {
		return
	}
	w.exit = t.Exit()
	switch {
	case w.spec.Pattern != nil:
		close(w.exited)
	case w.spec.Port == 0 && w.spec.URL == "":
		w.end(acp.StatusCompleted, fmt.Sprintf("%s %s; waited %s.", t.ID(), work.ExitText(w.exit), w.waited()), true, acp.StopEndTurn)
	default:
		w.end(acp.StatusFailed, fmt.Sprintf("%s %s before %s; waited %s.", t.ID(), work.ExitText(w.exit), w.spec.awaited(), w.waited()), true, acp.StopEndTurn)
	}
}

// end ends w with a final status and the text that says why, in its
// content and, with say, in an agent message. A foreground wait ends its
// turn with stopReason; a listed one leaves the list.
func (w *Wait) end(status, text string, say bool, stopReason string) {
	if w.call.Final() {
		return
	}
	w.stop()
	w.term = nil
	w.call.SetContent(w.content(text)...)
	w.call.End(status) // a foreground wait is not listed
	if say {
		w.h.Say(text)
	}
	w.h.EndTurn(w.call, stopReason)
}

// ToBackground implements work.Foreground: /bg during the wait moves it
// to the background list as a listed tool call, and its turn ends.
func (w *Wait) ToBackground() {
	w.listed = true
	w.call.SetContent(w.content(fmt.Sprintf("Moved to the background by /bg: still waiting for %s; /stop %s ends the wait.", w.spec.what(), w.call.ID()))...)
	w.call.Send()
	w.call.List()
	w.h.EndTurn(w.call, acp.StopEndTurn)
}

// Cancellable implements work.Task: a wait is cancelled until it ends.
func (w *Wait) Cancellable() bool { return true }

// Cancel implements work.Task.
func (w *Wait) Cancel() {
	w.end(acp.StatusCancelled, "Cancelled.", false, acp.StopEndTurn)
}

// Close implements work.Task.
func (w *Wait) Close() {
	w.end(acp.StatusCancelled, "Cancelled: the session closed.", false, acp.StopCancelled)
}

// CancelTurn implements work.Foreground: session/cancel ends the wait.
func (w *Wait) CancelTurn() {
	w.end(acp.StatusCancelled, "Cancelled by session/cancel.", false, acp.StopCancelled)
}

// Listing implements work.Task: the wait's line in /ps.
func (w *Wait) Listing(now time.Time) string {
	left := w.started.Add(w.spec.Timeout).Sub(now)
	return fmt.Sprintf("%s  wait  for %s  age %s  %s, times out in %s", w.call.ID(), w.spec.what(), work.Age(now.Sub(w.started)), w.call.Status(), work.Age(left))
}

// quoted quotes text for a message. Lines of output come without control
// characters but tabs (termtext.Plain), and patterns are one prompt's
// words, so nothing needs escaping: a pattern is shown as written.
func quoted(text string) string { return `"` + text + `"` }
