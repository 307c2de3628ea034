package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/internal/linescan"
	"shellagent/internal/probe"
	"shellagent/internal/words"
	"shellagent/outputbuf"
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
	defaultWaitTimeout = 5 * time.Minute
	maxWaitTimeout     = time.Hour
)

// pollEvery is how often a wait tries its port or URL; each try gives up
// after probeTimeout (a connect) or answerTimeout (a request).
const (
	pollEvery     = 250 * time.Millisecond
	probeTimeout  = 200 * time.Millisecond
	answerTimeout = time.Second
)

// waitSpec is what a /wait waits for: a line that matches pattern, a
// port that accepts connections, a URL that answers, or, if none is set,
// the terminal's exit.
type waitSpec struct {
	term    string         // the terminal's id
	text    string         // the pattern as written
	pattern *regexp.Regexp // compiled with (?m), see linescan.New
	port    int
	url     string
	timeout time.Duration
	fresh   bool // --new: only output printed after the wait started counts
}

// parseWait reads the arguments of /wait.
func parseWait(rest string) input {
	args, err := words.Split(rest)
	switch {
	case err != nil:
		return bad("/wait: "+err.Error(), "wait")
	case len(args) == 0:
		return bad("/wait needs a terminal id", "wait")
	}
	spec := &waitSpec{term: args[0].Text, timeout: defaultWaitTimeout}
	var pattern []string
	for i := 1; i < len(args); i++ {
		w := args[i]
		switch {
		case w.Quoted || !strings.HasPrefix(w.Text, "--"):
			pattern = append(pattern, w.Text)
		case w.Text == "--new":
			spec.fresh = true
		case w.Text == "--timeout" || strings.HasPrefix(w.Text, "--timeout="):
			v, ok := strings.CutPrefix(w.Text, "--timeout=")
			if !ok {
				if i+1 == len(args) {
					return bad("/wait: --timeout needs a duration", "wait")
				}
				i++
				v = args[i].Text
			}
			d, err := time.ParseDuration(v)
			switch {
			case err != nil:
				return bad(fmt.Sprintf("/wait: %q is not a duration", v), "wait")
			case d <= 0:
				return bad(fmt.Sprintf("/wait: the timeout must be more than 0, got %s", v), "wait")
			case d > maxWaitTimeout:
				return bad(fmt.Sprintf("/wait: the timeout must be at most %s, got %s", maxWaitTimeout, v), "wait")
			}
			spec.timeout = d
		default:
			return bad(fmt.Sprintf("/wait: unknown option %s (quote a pattern that starts with --)", w.Text), "wait")
		}
	}
	if len(pattern) > 0 {
		if problem := spec.target(strings.Join(pattern, " ")); problem != "" {
			return bad(problem, "wait")
		}
	}
	if spec.fresh && spec.pattern == nil {
		return bad("/wait: --new applies to a pattern, which output it reads", "wait")
	}
	return input{waitFor: spec}
}

// target reads what the wait waits for: :PORT, an http:// or https://
// URL, or a regular expression. Text that starts with ':' is a port and
// nothing else (":-1" is refused, not matched as a pattern; a pattern
// that starts with ':' is written \:), and a URL's port, if it has one,
// is 1 to 65535.
func (spec *waitSpec) target(text string) (problem string) {
	spec.text = text
	if digits, ok := strings.CutPrefix(text, ":"); ok {
		n, ok := parsePort(digits)
		if !ok {
			return fmt.Sprintf(`/wait: %s is not a port (1 to 65535; a pattern that starts with ':' is written \:)`, text)
		}
		spec.port = n
		return ""
	}
	if strings.HasPrefix(text, "http://") || strings.HasPrefix(text, "https://") {
		u, err := url.Parse(text)
		if err != nil || u.Host == "" {
			return fmt.Sprintf("/wait: %q is not a URL", text)
		}
		if strings.HasSuffix(u.Host, ":") {
			return fmt.Sprintf("/wait: %q is not a URL: its port is empty", text)
		}
		if p := u.Port(); p != "" {
			if _, ok := parsePort(p); !ok {
				return fmt.Sprintf("/wait: %q is not a URL: its port %s is not 1 to 65535", text, p)
			}
		}
		spec.url = text
		return ""
	}
	if _, err := regexp.Compile(text); err != nil {
		return fmt.Sprintf("/wait: %q is not a regular expression (%s)", text, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	spec.pattern = regexp.MustCompile("(?m)" + text) // Safe: text compiles alone.
	return ""
}

// parsePort reads a port: decimal digits only, 1 to 65535.
func parsePort(digits string) (int, bool) {
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return n, true
}

// title is the wait's tool call title: "wait for term_1: ready on".
func (spec *waitSpec) title() string {
	switch {
	case spec.pattern != nil:
		return "wait for " + spec.term + ": " + spec.text
	case spec.port != 0:
		return fmt.Sprintf("wait for %s: port %d", spec.term, spec.port)
	case spec.url != "":
		return "wait for " + spec.term + ": " + spec.url
	}
	return "wait for " + spec.term + " to exit"
}

// what names what the wait waits for, for its texts.
func (spec *waitSpec) what() string {
	switch {
	case spec.pattern != nil:
		return fmt.Sprintf("a line of %s that matches %s", spec.term, quoted(spec.text))
	case spec.port != 0:
		return fmt.Sprintf("port %d to accept connections", spec.port)
	case spec.url != "":
		return spec.url + " to answer"
	}
	return spec.term + " to exit"
}

// awaited says what the wait waits to happen, in the past tense, for
// the text of a terminal that exited first.
func (spec *waitSpec) awaited() string {
	switch {
	case spec.pattern != nil:
		return "it printed a line that matches " + quoted(spec.text)
	case spec.port != 0:
		return fmt.Sprintf("port %d accepted a connection", spec.port)
	}
	return spec.url + " answered"
}

// kind is the wait's tool kind: reading a terminal's output for a pattern
// is a search; the others are none of the schema's named kinds.
func (spec *waitSpec) kind() string {
	if spec.pattern != nil {
		return "search"
	}
	return "other"
}

func (spec *waitSpec) rawInput() map[string]any {
	in := map[string]any{"terminalId": spec.term, "timeout": spec.timeout.String()}
	switch {
	case spec.pattern != nil:
		in["pattern"], in["new"] = spec.text, spec.fresh
	case spec.port != 0:
		in["port"] = spec.port
	case spec.url != "":
		in["url"] = spec.url
	}
	return in
}

// waiter is a wait under way. It is owned by its session's actor, but
// for what its goroutine reads: spec and started, set before it starts,
// and exit, set before exited is closed.
type waiter struct {
	spec    *waitSpec
	call    *toolCall
	term    *terminal // nil once the wait ended: it must not keep the ring alive
	started time.Time
	listed  bool               // moved to the background by /bg
	from    int64              // the offset of the terminal's output it reads from
	stop    context.CancelFunc // ends the goroutine
	exited  chan struct{}      // closed once the terminal exited, for a pattern's last lines
	exit    *acp.ExitStatus
}

// runWait starts the wait of turn t, which then holds the foreground; or,
// if its terminal is unknown, says so and ends the turn.
func runWait(st *state, t *turn) {
	spec := t.in.waitFor
	term := st.work.terminals[spec.term]
	if term == nil {
		st.transition(acp.StateRunning, "")
		st.out.agentMessage(fmt.Sprintf("Cannot wait for %s: there is no terminal %q in this session; /ps lists the background terminals.", spec.term, spec.term))
		t.state = turnOver
		st.endTurn(acp.StopEndTurn)
		return
	}
	w := &waiter{spec: spec, term: term, started: time.Now()}
	c := st.newCall(callRunning, spec.kind(), spec.title())
	c.task, w.call, t.call, t.fore = w, c, c, w
	c.input = spec.rawInput()
	c.content = w.content(w.waitingText())
	st.turns.take(t, turnRunning)
	st.transition(acp.StateRunning, "")
	st.out.send(c.update())
	st.waits = append(st.waits, w)
	w.start(st.s)
	if term.state >= termExited {
		w.terminalExited(st, term)
	}
}

func (w *waiter) waitingText() string {
	text := "Waiting for " + w.spec.what()
	switch {
	case w.spec.pattern != nil && w.spec.fresh:
		text += " (escape sequences removed; only output printed from now on counts)"
	case w.spec.pattern != nil:
		text += " (escape sequences removed; output already printed counts)"
	case w.spec.port != 0:
		text += " on 127.0.0.1 or ::1"
	}
	return text + ", for at most " + w.spec.timeout.String() + "."
}

// content is the wait's tool call content: the terminal it watches while
// it is foreground work, and text.
func (w *waiter) content(text string) []acp.ToolCallContent {
	if w.listed {
		return []acp.ToolCallContent{acp.TextContent(text)}
	}
	return []acp.ToolCallContent{acp.TerminalContent(w.spec.term), acp.TextContent(text)}
}

// start starts the wait's goroutine, which reports its outcome to s.
func (w *waiter) start(s *Session) {
	if w.spec.fresh {
		w.from = w.term.ring.Total()
	}
	w.run(s)
}

// run starts the goroutine of a wait whose from is set, until the
// wait's deadline: its start and its timeout.
func (w *waiter) run(s *Session) {
	ctx, stop := context.WithDeadline(context.Background(), w.started.Add(w.spec.timeout))
	w.stop, w.exited = stop, make(chan struct{})
	ring, from := w.term.ring, w.from
	go func() {
		defer stop()
		if r := w.watch(ctx, ring, from); r.status != "" {
			s.do(func(st *state) { w.end(st, r.status, r.text, true, acp.StopEndTurn) })
		}
	}()
}

// frozenWait is a wait as an upgrade in place hands it over (freeze.go):
// the new image goes on waiting until the same deadline, reading the
// terminal's output (restored at the same offsets) from the same offset.
type frozenWait struct {
	Term, Target string // Target: the pattern, :PORT or URL as written; "" for the exit
	Timeout      time.Duration
	Fresh        bool
	From         int64
	Started      time.Time
	Listed       bool
}

// handOver implements task.
func (w *waiter) handOver() (kind string, frozen any) {
	f := &frozenWait{Term: w.spec.term, Timeout: w.spec.timeout, Fresh: w.spec.fresh, From: w.from, Started: w.started, Listed: w.listed}
	if w.spec.pattern != nil || w.spec.port != 0 || w.spec.url != "" {
		f.Target = w.spec.text
	}
	return "Wait", f
}

// thawWait makes f the task of tool call c again, in the new image of an
// upgrade in place, and waits on.
func thawWait(st *state, c *toolCall, f *frozenWait) {
	spec := &waitSpec{term: f.Term, timeout: f.Timeout, fresh: f.Fresh}
	term := st.work.terminals[f.Term]
	problem := ""
	if f.Target != "" {
		problem = spec.target(f.Target)
	}
	if c.state < callDone && (term == nil || problem != "") {
		c.task = nil
		c.content = []acp.ToolCallContent{acp.TextContent("The wait did not outlive the daemon's upgrade in place: " + cmp.Or(problem, "its terminal is gone") + ".")}
		endCall(st, c, acp.StatusFailed)
		return
	}
	w := &waiter{spec: spec, call: c, term: term, started: f.Started, listed: f.Listed, from: f.From}
	c.task = w
	if c.state >= callDone {
		w.term = nil
		return
	}
	st.waits = append(st.waits, w)
	w.run(st.s)
	if term.state >= termExited {
		w.terminalExited(st, term)
	}
}

// waitResult is how a wait ended, as its goroutine found: a final status
// and the text that says why. No status: it was stopped.
type waitResult struct{ status, text string }

// watch waits for what the wait waits for and returns the outcome, or no
// outcome if the wait was stopped. The terminal's exit ends a wait for a
// pattern here, once its last lines are read, and every other wait on
// the session's actor (terminalExited).
func (w *waiter) watch(ctx context.Context, ring *outputbuf.Ring, from int64) waitResult {
	switch {
	case w.spec.pattern != nil:
		return w.watchOutput(ctx, ring, from)
	case w.spec.port != 0:
		return w.poll(ctx, w.probePort)
	case w.spec.url != "":
		return w.poll(ctx, probe.URL(w.spec.url, answerTimeout))
	}
	<-ctx.Done()
	return w.ended(ctx, nil)
}

// watchOutput reads the terminal's ring from offset from on (see
// linescan.Scanner) every scanEvery, until a line matches or the terminal
// exits and its last line, complete or not, has been read.
func (w *waiter) watchOutput(ctx context.Context, ring *outputbuf.Ring, from int64) waitResult {
	sc := linescan.New(w.spec.pattern, from)
	tick := time.NewTicker(scanEvery)
	defer tick.Stop()
	quiet := time.Now() // since when no output came
	for budget := 0; ; budget = scanBudget {
		off := sc.Offset()
		if line, ok := sc.Scan(ring, budget); ok {
			return w.matched(line)
		}
		if now := time.Now(); sc.Offset() != off {
			quiet = now
		} else if now.Sub(quiet) >= partialQuiet {
			if line, ok := sc.Partial(); ok {
				return w.matched(line)
			}
		}
		select {
		case <-ctx.Done():
			return w.ended(ctx, nil)
		case <-w.exited:
			if line, ok := sc.Scan(ring, 0); ok {
				return w.matched(line)
			}
			if line, ok := sc.Partial(); ok {
				return w.matched(line)
			}
			return waitResult{acp.StatusFailed, fmt.Sprintf("%s %s before %s; waited %s.", w.spec.term, exitText(w.exit), w.spec.awaited(), w.waited())}
		case <-tick.C:
		}
	}
}

func (w *waiter) matched(line string) waitResult {
	return waitResult{acp.StatusCompleted, fmt.Sprintf("%s printed %s, which matches %s; waited %s.",
		w.spec.term, quoted(shorten(strings.TrimSpace(line), 200)), quoted(w.spec.text), w.waited())}
}

// poll tries probe at once and then every pollEvery until it succeeds;
// what it returns on success names what answered.
func (w *waiter) poll(ctx context.Context, probe func(context.Context) (string, error)) waitResult {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		answer, err := probe(ctx)
		if err == nil {
			return waitResult{acp.StatusCompleted, answer + "; waited " + w.waited() + "."}
		}
		select {
		case <-ctx.Done():
			return w.ended(ctx, err)
		case <-tick.C:
		}
	}
}

// ended is the outcome of a wait whose context ended: the timeout, with
// the last error of a poll, or none if the wait was stopped.
func (w *waiter) ended(ctx context.Context, last error) waitResult {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return waitResult{}
	}
	var text string
	switch d := w.spec.timeout; {
	case w.spec.pattern != nil:
		text = fmt.Sprintf("%s printed no line that matches %s within %s.", w.spec.term, quoted(w.spec.text), d)
	case w.spec.port != 0:
		text = fmt.Sprintf("Port %d accepted no connection within %s (the last try: %v).", w.spec.port, d, last)
	case w.spec.url != "":
		text = fmt.Sprintf("%s did not answer within %s (the last try: %v).", w.spec.url, d, last)
	default:
		text = fmt.Sprintf("%s was still running after %s.", w.spec.term, d)
	}
	return waitResult{acp.StatusFailed, text}
}

func (w *waiter) waited() string {
	return time.Since(w.started).Round(time.Millisecond).String()
}

// terminalExited serves the exit of w's terminal t: a wait for the exit
// completes, a wait for a port or URL fails, and a wait for a pattern
// reads the last lines first (watchOutput).
func (w *waiter) terminalExited(st *state, t *terminal) {
	w.exit = t.exit
	switch {
	case w.spec.pattern != nil:
		close(w.exited)
	case w.spec.port == 0 && w.spec.url == "":
		w.end(st, acp.StatusCompleted, fmt.Sprintf("%s %s; waited %s.", t.id, exitText(t.exit), w.waited()), true, acp.StopEndTurn)
	default:
		w.end(st, acp.StatusFailed, fmt.Sprintf("%s %s before %s; waited %s.", t.id, exitText(t.exit), w.spec.awaited(), w.waited()), true, acp.StopEndTurn)
	}
}

// waitsExited serves the exit of terminal t to the waits on it.
func waitsExited(st *state, t *terminal) {
	for _, w := range slices.Clone(st.waits) {
		if w.term == t {
			w.terminalExited(st, t)
		}
	}
}

// end ends w with a final status and the text that says why, in its
// content and, with say, in an agent message. A foreground wait ends its
// turn with stopReason; a listed one leaves the list.
func (w *waiter) end(st *state, status, text string, say bool, stopReason string) {
	if w.call.state >= callDone {
		return
	}
	w.stop()
	w.term = nil
	st.waits = slices.DeleteFunc(st.waits, func(x *waiter) bool { return x == w })
	w.call.content = w.content(text)
	endCall(st, w.call, status) // a foreground wait is not listed
	if say {
		st.out.agentMessage(text)
	}
	if fg := st.turns.fg; fg != nil && fg.call == w.call {
		st.turns.release(fg)
		st.endTurn(stopReason)
	}
}

// toBackground serves /bg during wait w, the foreground work of turn fg:
// the wait goes on as a listed tool call, and the turn ends.
func (w *waiter) toBackground(st *state, fg *turn) {
	w.listed = true
	w.call.content = w.content(fmt.Sprintf("Moved to the background by /bg: still waiting for %s; /stop %s ends the wait.", w.spec.what(), w.call.id))
	st.out.send(w.call.update())
	st.turns.release(fg)
	st.list.addCall(w.call)
	st.endTurn(acp.StopEndTurn)
}

// cancellable implements task: a wait is cancelled until it ends.
func (w *waiter) cancellable() bool { return true }

// cancel implements task.
func (w *waiter) cancel(st *state) {
	w.end(st, acp.StatusCancelled, "Cancelled.", false, acp.StopEndTurn)
}

// close implements task.
func (w *waiter) close(st *state) {
	w.end(st, acp.StatusCancelled, "Cancelled: the session closed.", false, acp.StopCancelled)
}

// cancelTurn implements foreground: session/cancel ends the wait of
// turn fg.
func (w *waiter) cancelTurn(st *state, _ *turn) {
	w.end(st, acp.StatusCancelled, "Cancelled by session/cancel.", false, acp.StopCancelled)
}

// listing implements task: the wait's line in /ps.
func (w *waiter) listing(now time.Time) string {
	left := w.started.Add(w.spec.timeout).Sub(now)
	return fmt.Sprintf("%s  wait  for %s  age %s  %s, times out in %s", w.call.id, w.spec.what(), age(now.Sub(w.started)), w.call.status(), age(left))
}

// quoted quotes text for a message. Lines of output come without control
// characters but tabs (termtext.Plain), and patterns are one prompt's
// words, so nothing needs escaping: a pattern is shown as written.
func quoted(text string) string { return `"` + text + `"` }

// shorten cuts text to at most n runes, marking the cut.
func shorten(text string, n int) string {
	if r := []rune(text); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return text
}
