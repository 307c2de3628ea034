// Package lineclient is a line-mode Agent Client Protocol (ACP) v2 client.
//
// [Run] starts an agent, opens one session and sends each input line as a
// prompt (slash commands pass through to the agent). It prints what the
// agent reports: each terminal's output live and decoded (every line
// labelled "term_N| " while several terminals run), agent messages,
// notices (their title and description), tool calls that are not plain
// commands, exit statuses as they arrive, and the background list
// whenever it changes. It applies the client-side rules of
// the v2 Background Work RFD: a session is quiet when it is idle with an
// empty list; work that reported its end is never called abandoned, and an
// unfinished item left out of the list while idle is; before closing it
// says how many background items the close will stop.
//
// An interrupt sends session/cancel (the foreground command stops,
// background work runs on); a second interrupt or the end of the input
// closes the session and returns.
//
// On a terminal (Config.Terminal), with an agent that offers the
// _shellagent/terminal/write and _shellagent/terminal/resize methods
// (initialize's _meta.shellagent.methods), the client is a terminal
// instead (tty.go): the terminal is in raw mode; at the prompt a line
// editor with history reads each line, and the terminal's replies (a
// cursor position report) never become part of one; while a command that
// a line started runs, every keystroke (Ctrl-C too: the command's own
// interrupt) goes to its PTY and its output alone is shown as it is,
// with the screen's size given at the start and on SIGWINCH. Ctrl-B is
// the prefix of the client's keys: b moves the command to the
// background, c stops it, d detaches, Ctrl-B types Ctrl-B. /attach ID
// gives a background terminal the keyboard and the screen the same way,
// redrawn from the client's copy of its output; /help and /quit are the
// client's own. Closing with background work asks first (y/N; Ctrl-C
// means no). With an agent that lacks the methods, the client says so
// once and runs as on any other input. The client's own messages name
// what the user can type (/stop term_1), never a wire method.
//
// With a daemon (Config.Daemon: the agent is a relay to a daemon that
// keeps sessions without a client), leaving detaches rather than closes:
// the end of the input, a second interrupt, /quit, or Ctrl-D then any key
// but c in terminal mode end the client with the session left running,
// and it says how to come back. /close closes the session. With
// Config.Resume the client reattaches (session/resume) to a session that
// session/list names instead of opening one, and shows the last lines of
// each terminal that runs, then live output. /sessions lists the agent's
// sessions. With Config.Reconnect, an end of the agent's output while
// the session runs (a daemon's upgrade in place ends every connection)
// is not the end of the client: if the daemon still has the session
// live, the client starts the agent again, resumes the session, shows
// what its terminals wrote meanwhile and goes on (reconnect.go).
//
// The client never waits on the agent without a bound, and never passes
// the agent's bytes to the user's terminal unchecked, except a terminal's
// output:
//   - each start-up request (initialize, session/new, each setting) waits
//     at most 10 s for its answer; the end of the input before the first
//     line (without a daemon), or an interrupt, ends the start-up at once;
//   - session/close waits at most the session's kill grace plus 2 s; an
//     interrupt while it waits, or the end of ctx at any time, ends the
//     agent at once;
//   - the agent is ended with SIGTERM to its process group, then SIGKILL
//     after the kill grace plus 2 s (1 s during start-up) or at the next
//     interrupt;
//   - messages to the agent are written by a goroutine of their own, so an
//     agent that does not read never blocks the client; past 16 MiB
//     unread, the agent is ended;
//   - a line from the agent longer than 16 MiB is refused without being
//     held in memory, and ends the agent;
//   - agent text (messages, titles, tool call content, error messages, and
//     so every note) is printed with its control characters escaped as Go
//     escapes (ESC as \x1b; see visible in printer.go).
//
// In script mode (input that is not a terminal) the client sends the next
// line only once the previous prompt's turn has ended, and after "/stop
// ID" of a listed item only once the item has left the list, so that the
// same script prints the same thing on every run. Interactively every line
// is sent at once; the agent holds prompts that arrive while a command
// runs.
//
// The code is in parts: conn.go is the JSON-RPC side (framing, ids,
// pending calls, the agent's lines with their cap), safe to send on from
// any goroutine, over the messages of wire.go; agent.go is the agent's
// process; client.go is the event loop, the UI state machine, which
// takes input events from a channel whatever their source (input.go
// handles the input lines); start.go sends the start-up requests,
// reconnect.go starts them again after the agent's output ended, and
// sessions.go serves /sessions and chooses the session to resume. It
// prints through updates.go (the session's updates, applied to
// internal/clientview's model of the session, which keeps the RFD's
// rules), session.go (how the session's work is named to the user),
// permissions.go and printer.go. In terminal mode tty.go
// routes keys (keys.go reads them) and the screen, question.go asks
// whether to close or detach, and editor.go (golang.org/x/term's line
// editor) reads lines on a goroutine of its own.
package lineclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"shellagent/acp"
	"shellagent/internal/jsonrpcline"
)

// Permissions is how the client answers session/request_permission.
type Permissions string

// The answers to permission requests.
const (
	// PermissionsAsk has the user answer: the next input line is the
	// answer (allow, reject, or an option id).
	PermissionsAsk Permissions = "ask"
	// PermissionsAllow selects the first allow option.
	PermissionsAllow Permissions = "allow"
	// PermissionsReject selects the first reject option (or answers
	// cancelled if there is none).
	PermissionsReject Permissions = "reject"
)

// Setting is a session config option set right after session/new.
type Setting struct {
	ID, Value string
}

// Config says which agent Run starts and how it talks to the user. The
// zero value of each field is documented.
type Config struct {
	// Agent is the agent's command line; Agent[0] is looked up in $PATH.
	// It must not be empty.
	Agent []string
	// Env is the agent's environment; nil means the client's.
	Env []string
	// AgentStderr receives the agent's stderr; nil discards it. With a
	// Terminal, what the agent writes to it while the terminal is in raw
	// mode has each line end with CRLF (raw mode does not return the
	// carriage), so it passes through a pipe of the client's.
	AgentStderr io.Writer
	// Cwd is the session's working directory, an absolute path; "" means
	// the client's working directory.
	Cwd string
	// Input holds the user's lines. Run reads it from a goroutine of its
	// own, which stays blocked in Read after Run returns if Input neither
	// ends nor is closed.
	Input io.Reader
	// Output is where the user reads the session. Run writes it from one
	// goroutine at a time.
	Output io.Writer
	// Interactive says that Input is a person at a terminal: lines are sent
	// as they are typed. Otherwise each line waits for the previous turn.
	Interactive bool
	// Trace, if not nil, receives every JSON-RPC line in both directions,
	// one JSON object per line: {"client":MSG} or {"agent":MSG}.
	Trace io.Writer
	// Permissions is how permission requests are answered; "" means
	// PermissionsAsk when Interactive, else PermissionsReject.
	Permissions Permissions
	// Settings are set with session/set_config_option after session/new;
	// a rejected setting ends the run with an error.
	Settings []Setting
	// Interrupts delivers the user's interrupts (Ctrl-C); nil means none.
	// While Run stops the agent, an interrupt sends it SIGKILL.
	Interrupts <-chan os.Signal
	// Terminal, if not nil, is the user's terminal, which Input reads and
	// Output writes. If the agent offers the input methods, the client
	// runs in terminal mode (see the package doc); otherwise it says so
	// and runs as on any other input. Run restores the terminal's mode
	// before it returns.
	Terminal *os.File
	// Resizes delivers the terminal's SIGWINCH; nil means none.
	Resizes <-chan os.Signal
	// Version is the client's version for initialize; "" means "devel".
	Version string
	// StartTimeout bounds the wait for the answer to each start-up
	// request; 0 means 10 s.
	StartTimeout time.Duration
	// Daemon says that the agent is a relay to a daemon that keeps
	// sessions running without a client: the end of the input, Ctrl-D and
	// /quit detach from the session instead of closing it, and the client
	// says how to come back (ResumeCommand). /close closes it.
	Daemon bool
	// Resume reattaches to a session of the agent with session/resume
	// instead of opening one: SessionID, or if that is "" the newest
	// session whose cwd is Cwd.
	Resume    bool
	SessionID string
	// ResumeCommand returns the command line that reattaches to session
	// id; nil means "shellagent client --daemon --resume ID".
	ResumeCommand func(id string) string
	// Reconnect, with Daemon, is called from a goroutine of its own when
	// the agent's output ends while the session runs, or while the
	// start-up that named it (Resume's session/resume, the settings) is
	// under way (a daemon's upgrade in place ends every connection): it
	// checks that the daemon still has session id live, waiting a
	// bounded time for it to answer, and less once ctx ends (when Run
	// returns), and returns the agent's command line from now on (nil:
	// Agent as Run was given it, even after an earlier reconnect through
	// another command; an upgrade to another build needs that build's
	// relay). Then the client starts
	// the agent again, resumes the session, shows what its terminals
	// wrote meanwhile, and goes on (at most 3 times a minute). If it
	// returns an error (the session is not live; no relay can reach it),
	// or with Reconnect nil, the client says why and Run returns
	// ErrAgentExited. With Reconnect set, an end of the agent's output
	// before the first start-up named the session (initialize or
	// session/list unanswered) starts Agent again, and the start-up from
	// initialize, without calling it.
	Reconnect func(ctx context.Context, id string) (agent []string, err error)

	// raw is set while the client has Terminal in raw mode: the agent's
	// stderr then ends its lines with CRLF (crlfWriter). Run makes it
	// when there is a Terminal; the copies of the Config share it.
	raw *atomic.Bool
}

// Bounds of the client's own waits.
const (
	// startTimeout is Config.StartTimeout's default.
	startTimeout = 10 * time.Second
	// closeSlack is added to the session's kill grace to bound the wait
	// for the answer to session/close, and the wait for the agent to exit
	// after SIGTERM.
	closeSlack = 2 * time.Second
	// startGrace bounds the wait for the agent to exit after SIGTERM
	// during start-up, when it runs nothing yet.
	startGrace = 1 * time.Second
	// defaultKillGrace is the kill grace assumed until the agent reports
	// the session's (the kill_grace config option).
	defaultKillGrace = 3 * time.Second
	// stopWaitTimeout bounds how long a script waits after "/stop ID" for
	// the item to leave the background list.
	stopWaitTimeout = 60 * time.Second
)

// ErrAgentExited is returned when the agent's output ends before the
// session was closed.
var ErrAgentExited = errors.New("the agent exited")

// ErrShown is in the chain of an error Run has already told the user
// about in its output (a setting the agent refused): a caller exits
// non-zero without printing it again.
var ErrShown = errors.New("shown in the output")

// Run starts the agent, runs one session until the input ends or a second
// interrupt arrives, closes the session (with Config.Daemon, detaches
// from it), and waits for the agent to exit. It returns nil when the
// session was closed or left as asked, or when the input ended before the
// session had started. When ctx ends, when the agent
// does not answer in time, or at an interrupt during start-up or while
// the session closes, Run ends the agent (SIGTERM, then SIGKILL) and
// returns an error.
func Run(ctx context.Context, cfg Config) error {
	if len(cfg.Agent) == 0 {
		return errors.New("lineclient: no agent command")
	}
	if cfg.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("lineclient: working directory: %w", err)
		}
		cfg.Cwd = wd
	}
	if !filepath.IsAbs(cfg.Cwd) {
		return fmt.Errorf("lineclient: cwd %q is not an absolute path", cfg.Cwd)
	}
	if cfg.Permissions == "" {
		cfg.Permissions = PermissionsReject
		if cfg.Interactive {
			cfg.Permissions = PermissionsAsk
		}
	}
	if cfg.Version == "" {
		cfg.Version = "devel"
	}
	if cfg.Terminal != nil {
		cfg.raw = new(atomic.Bool)
	}
	a, err := startAgent(cfg)
	if err != nil {
		return err
	}
	c := newClient(cfg, a)
	if cfg.Terminal == nil {
		c.startInput()
	} // else once the agent has said whether it takes keystrokes
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends a Config.Reconnect still asking
	runErr := c.loop(ctx)
	close(c.done)
	if c.tty != nil {
		c.tty.close()
		c.p.w = cfg.Output
	}
	c.rpc.hangUp(!c.endNow)
	if err := c.agent.stop(c.endNow, c.stopGrace(), cfg.Interrupts, c.p.note); err != nil && runErr == nil && !c.stillLive(ctx) {
		runErr = err
	}
	c.rpc.close()
	if runErr == nil && c.p.err != nil {
		runErr = fmt.Errorf("lineclient: writing the output: %w", c.p.err)
	}
	return runErr
}

// inputEvent is a line of input, keys read from a terminal in raw mode,
// or the end of the input.
type inputEvent struct {
	line string
	keys []byte
	eof  bool
	err  error // a read error other than io.EOF
}

// startInput starts reading the input: keys in terminal mode, else lines.
func (c *client) startInput() {
	if c.tty != nil {
		go readKeys(c.cfg.Input, c.input, c.done)
		return
	}
	go readInput(c.cfg.Input, c.input, c.done)
}

// readKeys sends what each read of r returns, then an eof event, until
// done closes. The keys a read returns along with its error are sent
// first, as io.Reader asks.
func readKeys(r io.Reader, out chan<- inputEvent, done <-chan struct{}) {
	buf := make([]byte, 4<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 && !sendInput(out, done, inputEvent{keys: bytes.Clone(buf[:n])}) {
			return
		}
		if err != nil {
			sendInput(out, done, inputEvent{eof: true})
			return
		}
	}
}

// readInput sends each line of r, then an eof event, until done closes.
func readInput(r io.Reader, out chan<- inputEvent, done <-chan struct{}) {
	if r == nil {
		sendInput(out, done, inputEvent{eof: true})
		return
	}
	lr := jsonrpcline.NewReader(r, maxLine)
	for {
		line, err := lr.Line()
		if errors.Is(err, jsonrpcline.ErrTooLong) {
			err = errLineTooLong
		}
		if err != nil {
			ev := inputEvent{eof: true}
			if !errors.Is(err, io.EOF) {
				ev.err = err
			}
			sendInput(out, done, ev)
			return
		}
		if !sendInput(out, done, inputEvent{line: string(line)}) {
			return
		}
	}
}

// sendInput sends ev to out unless done closes first, and reports
// whether it did.
func sendInput(out chan<- inputEvent, done <-chan struct{}, ev inputEvent) bool {
	select {
	case out <- ev:
		return true
	case <-done:
		return false
	}
}

// phase is where the client is in its life.
type phase int

const (
	starting phase = iota // initialize, session/new and settings in flight
	running               // reading input
	closing               // session/close sent
	finished              // nothing more to do
)

// client is the event loop's state; only the loop goroutine touches it.
type client struct {
	cfg       Config
	p         *printer
	agent     *agentProc
	rpc       *conn // the agent's
	perms     *permissions
	phase     phase
	ran       bool  // the session reached running
	endNow    bool  // end the agent at once (SIGTERM), not wait for it to exit
	err       error // the first failure; Run returns it
	seq       int   // agent messages read so far
	sess      *session
	commands  []command       // the agent's slash commands, in its order
	killGrace time.Duration   // the session's kill grace, as the agent last reported it
	input     chan inputEvent // from the reader, once started
	done      chan struct{}   // closed when the loop has returned: the reader stops
	tty       *tty            // terminal mode; nil otherwise

	held       *inputEvent // the first input event, read during start-up
	interrupts int         // Ctrl-C presses since the last line sent
	wait       *turnWait   // script mode: what the next line waits for
	view       *view       // prints the session's updates; set with sess

	boot       startup // the start-up's requests
	closeTimer <-chan time.Time
	stopTimer  <-chan time.Time

	// reconnect delivers Config.Reconnect's answer while the client
	// reconnects (reconnect.go); reconnects holds when it did lately.
	reconnect  <-chan reconnectAnswer
	reconnects reconnects
	ownAgent   []string // Config.Agent as Run was given it: what a Reconnect's nil starts
	taken      bool     // another client took the session: no reconnect takes it back
	detached   bool     // the client left the session running in the daemon
}

// turnWait is what a script waits for before its next line: the end of
// the turn of the prompt it sent, then, after "/stop ID" of a listed item,
// the item leaving the list.
type turnWait struct {
	line      string // the prompt
	answered  bool   // the prompt's response arrived
	respSeq   int    // seq of the response
	messageID string // the inserted message
	userSeq   int    // seq of its user_message, if seen
	ended     bool   // its turn has ended
	stopID    string // "/stop ID": wait for ID to leave the list
}

func newClient(cfg Config, a *agentProc) *client {
	p := newPrinter(cfg.Output)
	rpc := newConn(a.stdout, a.stdin, cfg.Trace)
	c := &client{
		cfg:       cfg,
		ownAgent:  cfg.Agent,
		p:         p,
		agent:     a,
		rpc:       rpc,
		perms:     &permissions{mode: cfg.Permissions, rpc: rpc, p: p},
		killGrace: defaultKillGrace,
		input:     make(chan inputEvent),
		done:      make(chan struct{}),
	}
	c.boot.c = c
	return c
}

// command is one of the agent's slash commands.
type command struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Input       *struct {
		Hint string `json:"hint"`
	} `json:"input"` // nil: it takes no arguments
}

// offers reports whether the agent has the slash command name (without
// "/").
func (c *client) offers(name string) bool {
	return slices.ContainsFunc(c.commands, func(cmd command) bool { return cmd.Name == name })
}

// loop runs the client until it has finished.
func (c *client) loop(ctx context.Context) error {
	c.boot.start()
	ctxDone := ctx.Done()
	for c.phase != finished {
		if c.tty != nil {
			c.tty.settle()
		}
		if c.phase == running && c.held != nil {
			ev := *c.held
			c.held = nil
			c.handleInput(ev)
			continue
		}
		var lines <-chan inputEvent
		if c.tty != nil || c.wantsInput() {
			lines = c.input
		}
		var edited <-chan editResult
		if c.tty != nil {
			edited = c.tty.ed.lines
		}
		agentLines, agentFailed := c.rpc.lines, c.rpc.failed()
		if c.reconnect != nil { // the old agent is gone
			agentLines, agentFailed = nil, nil
		}
		select {
		case in, ok := <-agentLines:
			switch {
			case !ok:
				c.agentGone(ctx)
			case in.err != nil:
				c.abort("the agent sent "+in.err.Error()+", which the client refuses: stopping the agent",
					fmt.Errorf("lineclient: the agent sent %w", in.err))
			default:
				c.handleLine(in.line)
			}
		case ev := <-lines:
			c.handleInput(ev)
		case r := <-edited:
			c.tty.line(r)
		case <-c.cfg.Resizes:
			if c.tty != nil {
				c.tty.resized()
			}
		case <-c.cfg.Interrupts:
			c.interrupt()
		case <-ctxDone:
			ctxDone = nil
			cause := context.Cause(ctx)
			c.abort(fmt.Sprintf("%v: stopping the agent", cause), fmt.Errorf("lineclient: %w", cause))
		case a := <-c.reconnect:
			c.reconnected(a)
		case <-agentFailed:
			c.abort("stopping the agent: "+c.rpc.err().Error(), c.rpc.err())
		case <-c.boot.timer:
			c.boot.late()
		case <-c.boot.retryAt:
			c.boot.retryNow()
		case <-c.closeTimer:
			wait := c.killGrace + closeSlack
			c.abort(fmt.Sprintf("no answer to session/close within %v: stopping the agent", wait),
				fmt.Errorf("lineclient: no answer to session/close within %v", wait))
		case <-c.stopTimer:
			c.stopTimer = nil
			if c.wait != nil {
				c.p.note(fmt.Sprintf("%s is still listed after %v; going on", c.wait.stopID, stopWaitTimeout))
				c.wait = nil
			}
		}
	}
	c.fail(c.rpc.err())
	return c.err
}

// fail records the first failure; a nil err is none.
func (c *client) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// abort finishes at once: it tells the user why, records err (nil: the
// run still succeeds) and has Run end the agent without waiting for it.
func (c *client) abort(why string, err error) {
	c.p.note(why)
	c.fail(err)
	c.phase = finished
	c.endNow = true
}

// stopGrace is how long the agent has to exit after SIGTERM: the
// session's kill grace plus closeSlack, as the agent may have to stop the
// session's work; startGrace if the session never ran.
func (c *client) stopGrace() time.Duration {
	if !c.ran {
		return startGrace
	}
	return c.killGrace + closeSlack
}

// agentGone handles the end of the agent's output: the client reconnects
// if it may, else it finishes.
func (c *client) agentGone(ctx context.Context) {
	if c.mayReconnect(time.Now()) {
		c.startReconnect(ctx)
		return
	}
	if c.boot.mayStartOver(time.Now()) {
		c.boot.startOver()
		return
	}
	if c.taken && c.phase == running {
		c.p.note("another client has the session: not reconnecting")
	}
	if c.reconnectable() { // the bound on reconnects refused it
		c.p.note(limitNote(c.sess.ID))
	}
	if c.phase != finished {
		c.p.note("the agent closed its output")
		c.fail(ErrAgentExited)
	}
	c.phase = finished
}

// wantsInput reports whether the loop takes the next input event now:
// during start-up only the first (an end of the input ends the start-up;
// a line waits in held).
func (c *client) wantsInput() bool {
	switch {
	case c.phase == starting:
		return c.held == nil
	case c.phase != running:
		return false
	case c.perms.waiting():
		return true
	}
	return c.cfg.Interactive || c.wait == nil
}

// handleLine handles one line from the agent.
func (c *client) handleLine(line []byte) {
	c.seq++
	m, then, err := c.rpc.receive(line)
	if err != nil {
		c.p.note(fmt.Sprintf("the agent sent a line that is not JSON-RPC: %.80q", line))
		return
	}
	switch {
	case m.isResponse() && then == nil:
		c.p.note("an answer to no request: id " + string(m.ID))
	case m.isResponse():
		then(m)
	case m.isRequest() && m.Method == "session/request_permission":
		c.perms.request(m)
	case m.isRequest():
		c.rpc.replyError(m.ID, acp.CodeMethodNotFound, "method not found: "+m.Method)
	case m.Method == "session/update":
		var n sessionNotification
		if err := json.Unmarshal(m.Params, &n); err != nil {
			c.p.note(fmt.Sprintf("a session/update the client cannot read: %v", err))
			return
		}
		if c.sess != nil && n.SessionID == c.sess.ID {
			c.handleUpdate(&n.Update)
		}
	case m.Method == "$/cancel_request":
		c.perms.withdrawn(m.Params)
	}
}

// interrupt handles a Ctrl-C: the first sends session/cancel, the second
// closes the session; one during start-up or while closing ends the agent.
func (c *client) interrupt() {
	switch c.phase {
	case starting:
		c.abort("interrupted while starting: stopping the agent", errors.New("lineclient: interrupted while starting"))
		return
	case closing:
		c.abort("interrupted again: stopping the agent", errors.New("lineclient: interrupted while closing the session"))
		return
	case finished:
		return
	}
	switch {
	case c.tty != nil && c.tty.q.open():
		c.tty.q.declined()
		return
	case c.tty == nil && c.cfg.Interactive:
		c.p.write([]byte("\n")) // the terminal echoed ^C where the cursor was
	}
	c.interrupts++
	if c.interrupts > 1 {
		c.askQuit()
		return
	}
	again := "closes the session"
	if c.cfg.Daemon {
		again = "detaches (the session runs on; /close closes it)"
	}
	if c.tty != nil && c.sess.State == "idle" {
		if c.cfg.Daemon {
			c.p.note("Ctrl-C again, Ctrl-D or /quit detaches (the session runs on); /close closes it")
		} else {
			c.p.note("Ctrl-C again, Ctrl-D or /quit closes the session")
		}
		return
	}
	c.rpc.notify("session/cancel", map[string]string{"sessionId": c.sess.ID})
	// Permission requests for the cancelled foreground work are answered
	// cancelled; those for listed work stay open.
	c.perms.cancelAll(func(p *permission) bool { return slices.ContainsFunc(p.req.Subject.refs(), c.sess.Listed) })
	c.p.note("cancelling the foreground command; background work runs on; Ctrl-C again " + again)
}

// askQuit leaves the session: with a daemon it detaches; otherwise it
// closes the session, and in terminal mode, if that would stop
// background work, it asks first.
func (c *client) askQuit() {
	switch {
	case c.cfg.Daemon:
		c.detach()
		return
	case c.tty == nil || c.phase != running:
		c.quit()
		return
	}
	if warning := c.sess.closeWarning(); warning != "" {
		c.tty.q.ask(askClose, warning)
		return
	}
	c.closeSession()
}

// detach leaves the session to the daemon, running, and says how to come
// back to it; the client then ends without closing it.
func (c *client) detach() {
	if c.phase != running {
		return
	}
	s := c.sess
	what := "the session runs on in the daemon"
	if s.Reported && len(s.Background) > 0 {
		noun := "items"
		if len(s.Background) == 1 {
			noun = "item"
		}
		what += fmt.Sprintf(", with %d background %s: %s", len(s.Background), noun, s.describeList())
	}
	c.p.note("detached: " + what)
	resume := "shellagent client --daemon --resume " + s.ID
	if c.cfg.ResumeCommand != nil {
		resume = c.cfg.ResumeCommand(s.ID)
	}
	c.p.note("to come back: " + resume)
	c.phase = finished
	c.detached = true
}

// stillLive reports, once the client has detached and its relay has then
// failed (the daemon closed the connection as the input ended: an upgrade
// in place at that moment), whether Config.Reconnect finds the session
// still live in the daemon: then the detach did what it said. If not, it
// says why.
func (c *client) stillLive(ctx context.Context) bool {
	if !c.detached || c.cfg.Reconnect == nil {
		return false
	}
	if _, err := c.cfg.Reconnect(ctx, c.sess.ID); err != nil {
		c.p.note(err.Error())
		return false
	}
	return true
}

// quit says what closing will stop, then closes the session.
func (c *client) quit() {
	if c.phase == closing || c.phase == finished {
		return
	}
	if c.sess != nil {
		if warning := c.sess.closeWarning(); warning != "" {
			c.p.note(warning)
		}
	}
	c.closeSession()
}

// closeSession closes the session. The answer is awaited for the kill
// grace plus closeSlack; at a terminal, or after a second Ctrl-C, the
// client says so.
func (c *client) closeSession() {
	if c.phase == closing || c.phase == finished {
		return
	}
	if c.sess == nil {
		c.phase = finished
		return
	}
	c.perms.cancelAll(nil)
	c.wait = nil
	c.phase = closing
	wait := c.killGrace + closeSlack
	c.closeTimer = time.After(wait)
	if c.cfg.Interactive || c.interrupts > 1 {
		c.p.note(fmt.Sprintf("waiting up to %v for the session to close; Ctrl-C again stops the agent now", wait))
	}
	c.rpc.call("session/close", map[string]string{"sessionId": c.sess.ID}, func(m *message) {
		c.phase = finished
		if m.Error != nil {
			c.p.note("session/close failed: " + m.Error.Error())
			c.fail(fmt.Errorf("lineclient: session/close: %w", m.Error))
			return
		}
		for _, note := range c.sess.closed() {
			c.p.note(note)
		}
		c.p.note("session closed")
	})
}
