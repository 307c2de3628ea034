// Package lineclient is a line-mode Agent Client Protocol (ACP) v2 client.
//
// [Run] starts an agent, opens one session and sends each input line as a
// prompt (slash commands pass through to the agent). It prints what the
// agent reports: each terminal's output live and decoded (every line
// labelled "term_N| " while several terminals run), agent messages, tool
// calls that are not plain commands, exit statuses as they arrive, and the
// background list whenever it changes. It applies the client-side rules of
// the v2 Background Work RFD: a session is quiet when it is idle with an
// empty list; work that reported its end is never called abandoned, and an
// unfinished item left out of the list while idle is; before closing it
// says how many background items the close will stop.
//
// An interrupt sends session/cancel (the foreground command stops,
// background work runs on); a second interrupt, the end of the input or
// the end of ctx closes the session and returns.
//
// In script mode (input that is not a terminal) the client sends the next
// line only once the previous prompt's turn has ended, and after "/stop
// ID" of a listed item only once the item has left the list, so that the
// same script prints the same thing on every run. Interactively every line
// is sent at once; the agent holds prompts that arrive while a command
// runs.
package lineclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
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
	// AgentStderr receives the agent's stderr; nil discards it.
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
	Interrupts <-chan os.Signal
	// Version is the client's version for initialize; "" means "devel".
	Version string
}

// Timeouts of the client's own waits.
const (
	// closeTimeout bounds the wait for the session/close answer.
	closeTimeout = 60 * time.Second
	// stopWaitTimeout bounds how long a script waits after "/stop ID" for
	// the item to leave the background list.
	stopWaitTimeout = 60 * time.Second
	// exitTimeout bounds the wait for the agent to exit once its stdin is
	// closed; then it is killed.
	exitTimeout = 10 * time.Second
)

// ErrAgentExited is returned when the agent's output ends before the
// session was closed.
var ErrAgentExited = errors.New("the agent exited")

// Run starts the agent, runs one session until the input ends, a second
// interrupt arrives or ctx ends, closes the session, and waits for the
// agent to exit. It returns nil when the session was closed as asked.
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
	a, err := startAgent(cfg)
	if err != nil {
		return err
	}
	c := newClient(cfg, a.stdin)
	done := make(chan struct{})
	lines := make(chan inputEvent)
	go readInput(cfg.Input, lines, done)
	runErr := c.loop(ctx, a.lines, lines)
	close(done)
	if err := a.stop(); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// agentProc is the agent process and the goroutine that reads its stdout.
type agentProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	lines  chan []byte   // the agent's lines; closed at the end of its output
	read   chan struct{} // closed when the reader has returned
}

// startAgent starts the agent in a process group of its own, so that a
// Ctrl-C at the terminal reaches the client only.
func startAgent(cfg Config) (*agentProc, error) {
	cmd := exec.Command(cfg.Agent[0], cfg.Agent[1:]...)
	cmd.Env = cfg.Env
	cmd.Stderr = cfg.AgentStderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("lineclient: agent stdin: %w", err)
	}
	// An os.Pipe of our own is not closed by cmd.Wait, so the reader
	// always sees the agent's last line.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("lineclient: agent stdout: %w", err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		_ = pr.Close() // Best effort: nothing was read.
		_ = pw.Close() // Best effort: nothing was written.
		return nil, fmt.Errorf("lineclient: starting the agent %s: %w", cfg.Agent[0], err)
	}
	_ = pw.Close() // Safe: the agent holds its own copy.
	a := &agentProc{cmd: cmd, stdin: stdin, stdout: pr, lines: make(chan []byte, 64), read: make(chan struct{})}
	go a.readLines()
	return a, nil
}

// readLines sends each line of the agent's stdout to a.lines until EOF or
// until stdout is closed.
func (a *agentProc) readLines() {
	defer close(a.read)
	defer close(a.lines)
	r := newLineReader(a.stdout)
	for {
		line, err := r.next()
		if err != nil {
			return
		}
		a.lines <- append([]byte(nil), line...)
	}
}

// stop closes the agent's stdin, waits for it to exit (killing its
// process group after exitTimeout) and for the reader to end.
func (a *agentProc) stop() error {
	// Whatever the agent still writes is read and dropped, so that a full
	// pipe never keeps it from exiting.
	drained := make(chan struct{})
	go func() {
		for range a.lines {
		}
		close(drained)
	}()
	_ = a.stdin.Close() // Best effort: the agent may already be gone.
	exited := make(chan error, 1)
	go func() { exited <- a.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(exitTimeout):
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL) // Best effort: it may exit meanwhile.
		err = <-exited
		err = fmt.Errorf("lineclient: the agent did not exit within %v of its stdin closing; killed: %v", exitTimeout, err)
	}
	_ = a.stdout.Close() // Safe: ends the reader if a leftover process holds the pipe.
	<-drained
	<-a.read
	if err != nil {
		return fmt.Errorf("lineclient: agent %s: %w", a.cmd.Path, err)
	}
	return nil
}

// inputEvent is a line of input, or its end.
type inputEvent struct {
	line string
	eof  bool
	err  error // a read error other than io.EOF
}

// readInput sends each line of r, then an eof event, until done closes.
func readInput(r io.Reader, out chan<- inputEvent, done <-chan struct{}) {
	send := func(ev inputEvent) bool {
		select {
		case out <- ev:
			return true
		case <-done:
			return false
		}
	}
	if r == nil {
		send(inputEvent{eof: true})
		return
	}
	lr := newLineReader(r)
	for {
		line, err := lr.next()
		if err != nil {
			ev := inputEvent{eof: true}
			if !errors.Is(err, io.EOF) {
				ev.err = err
			}
			send(ev)
			return
		}
		if !send(inputEvent{line: string(line)}) {
			return
		}
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
	cfg      Config
	p        *printer
	w        io.Writer // the agent's stdin
	phase    phase
	err      error // the first failure; Run returns it
	nextID   int64
	pending  map[string]func(*message) // answers awaited, by request id
	seq      int                       // agent messages read so far
	sess     *session
	commands map[string]bool // the agent's slash commands, without "/"

	interrupts int           // Ctrl-C presses since the last line sent
	wait       *turnWait     // script mode: what the next line waits for
	perms      []*permission // permission requests not yet answered, oldest first
	lastLine   string        // the last line sent as a prompt

	lastListing string // the last background listing printed

	closeTimer <-chan time.Time
	stopTimer  <-chan time.Time
}

// turnWait is what a script waits for before its next line: the end of
// the turn of the prompt it sent, then, after "/stop ID" of a listed item,
// the item leaving the list.
type turnWait struct {
	requestID string
	answered  bool   // the prompt's response arrived
	respSeq   int    // seq of the response
	messageID string // the inserted message
	userSeq   int    // seq of its user_message, if seen
	ended     bool   // its turn has ended
	stopID    string // "/stop ID": wait for ID to leave the list
}

// permission is a permission request waiting for its answer.
type permission struct {
	id  json.RawMessage
	req permissionRequest
}

func newClient(cfg Config, w io.Writer) *client {
	return &client{
		cfg:      cfg,
		p:        newPrinter(cfg.Output),
		w:        w,
		pending:  make(map[string]func(*message)),
		commands: make(map[string]bool),
	}
}

// loop runs the client until it has finished.
func (c *client) loop(ctx context.Context, agent <-chan []byte, input <-chan inputEvent) error {
	c.start()
	ctxDone := ctx.Done()
	for c.phase != finished {
		var lines <-chan inputEvent
		if c.wantsInput() {
			lines = input
		}
		select {
		case line, ok := <-agent:
			if !ok {
				c.agentGone()
				continue
			}
			c.handleLine(line)
		case ev := <-lines:
			c.handleInput(ev)
		case <-c.cfg.Interrupts:
			c.interrupt()
		case <-ctxDone:
			ctxDone = nil
			c.quit()
		case <-c.stopTimer:
			c.stopTimer = nil
			if c.wait != nil {
				c.p.note(fmt.Sprintf("%s is still listed after %v; going on", c.wait.stopID, stopWaitTimeout))
				c.wait = nil
			}
		case <-c.closeTimer:
			c.fail(fmt.Errorf("lineclient: no answer to session/close within %v", closeTimeout))
			c.phase = finished
		}
	}
	if c.p.err != nil && c.err == nil {
		c.err = fmt.Errorf("lineclient: writing the output: %w", c.p.err)
	}
	return c.err
}

// fail records the first failure.
func (c *client) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// agentGone handles the end of the agent's output.
func (c *client) agentGone() {
	if c.phase != finished {
		c.p.note("the agent closed its output")
		c.fail(ErrAgentExited)
	}
	c.phase = finished
}

// wantsInput reports whether the loop takes the next input line now.
func (c *client) wantsInput() bool {
	if c.phase != running {
		return false
	}
	if c.cfg.Permissions == PermissionsAsk && len(c.perms) > 0 {
		return true
	}
	return c.cfg.Interactive || c.wait == nil
}

// send writes a message to the agent, and to the trace.
func (c *client) send(m *message) {
	m.JSONRPC = "2.0"
	line, err := json.Marshal(m)
	if err != nil {
		c.fail(fmt.Errorf("lineclient: encoding %s: %w", m.Method, err))
		return
	}
	c.trace("client", line)
	if _, err := c.w.Write(append(line, '\n')); err != nil {
		// The agent is gone; the end of its output will end the loop.
		c.fail(fmt.Errorf("lineclient: writing to the agent: %w", err))
	}
}

// trace writes a line to the trace, if there is one.
func (c *client) trace(from string, line []byte) {
	if c.cfg.Trace == nil {
		return
	}
	if _, err := c.cfg.Trace.Write(traceLine(from, line)); err != nil {
		c.fail(fmt.Errorf("lineclient: writing the trace: %w", err))
		c.cfg.Trace = nil
	}
}

// request sends a request; then is called with its response.
func (c *client) request(method string, params any, then func(*message)) string {
	c.nextID++
	id := strconv.FormatInt(c.nextID, 10)
	raw, err := json.Marshal(params)
	if err != nil {
		c.fail(fmt.Errorf("lineclient: encoding %s params: %w", method, err))
		return id
	}
	c.pending[id] = then
	c.send(&message{ID: json.RawMessage(id), Method: method, Params: raw})
	return id
}

// notify sends a notification.
func (c *client) notify(method string, params any) {
	raw, err := json.Marshal(params)
	if err != nil {
		c.fail(fmt.Errorf("lineclient: encoding %s params: %w", method, err))
		return
	}
	c.send(&message{Method: method, Params: raw})
}

// respond answers an agent request.
func (c *client) respond(id json.RawMessage, result any) {
	raw, err := json.Marshal(result)
	if err != nil {
		c.fail(fmt.Errorf("lineclient: encoding a response: %w", err))
		return
	}
	c.send(&message{ID: id, Result: raw})
}

// start sends initialize, then session/new, then the settings.
func (c *client) start() {
	init := map[string]any{
		"protocolVersion": 2,
		"info":            map[string]string{"name": "shellagent-client", "version": c.cfg.Version},
		"capabilities":    map[string]any{},
	}
	c.request("initialize", init, func(m *message) {
		var res struct {
			ProtocolVersion int `json:"protocolVersion"`
			Info            struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"info"`
		}
		if !c.ok("initialize", m, &res) {
			return
		}
		if res.ProtocolVersion != 2 {
			c.fail(fmt.Errorf("lineclient: the agent speaks ACP v%d, not v2", res.ProtocolVersion))
			c.phase = finished
			return
		}
		c.p.note(fmt.Sprintf("agent: %s %s, ACP v2", res.Info.Name, res.Info.Version))
		c.newSession()
	})
}

// ok decodes a response into result, or records its error and finishes.
func (c *client) ok(method string, m *message, result any) bool {
	if m.Error != nil {
		c.fail(fmt.Errorf("lineclient: %s: %w", method, m.Error))
		c.p.note(fmt.Sprintf("%s failed: %s", method, m.Error))
		c.phase = finished
		return false
	}
	if err := json.Unmarshal(m.Result, result); err != nil {
		c.fail(fmt.Errorf("lineclient: decoding the %s result: %w", method, err))
		c.phase = finished
		return false
	}
	return true
}

func (c *client) newSession() {
	c.request("session/new", map[string]any{"cwd": c.cfg.Cwd}, func(m *message) {
		var res struct {
			SessionID         string `json:"sessionId"`
			AvailableCommands []struct {
				Name string `json:"name"`
			} `json:"availableCommands"`
		}
		if !c.ok("session/new", m, &res) {
			return
		}
		c.sess = newSession(res.SessionID)
		for _, cmd := range res.AvailableCommands {
			c.commands[cmd.Name] = true
		}
		c.p.note("session started in " + c.cfg.Cwd)
		c.applySettings(c.cfg.Settings)
	})
}

// applySettings sets the config options one after the other, then starts
// reading input.
func (c *client) applySettings(rest []Setting) {
	if len(rest) == 0 {
		c.phase = running
		return
	}
	s := rest[0]
	params := map[string]any{"sessionId": c.sess.id, "configId": s.ID, "type": "id", "value": s.Value}
	c.request("session/set_config_option", params, func(m *message) {
		if c.phase != starting { // interrupted meanwhile: the session is closing
			return
		}
		if m.Error != nil {
			c.p.note(fmt.Sprintf("cannot set %s to %s: %s", s.ID, s.Value, m.Error.Message))
			c.fail(fmt.Errorf("lineclient: setting %s=%s: %w", s.ID, s.Value, m.Error))
			c.quit()
			return
		}
		c.p.note(fmt.Sprintf("set %s to %s", s.ID, s.Value))
		c.applySettings(rest[1:])
	})
}

// handleLine handles one line from the agent.
func (c *client) handleLine(line []byte) {
	c.trace("agent", line)
	c.seq++
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		c.p.note(fmt.Sprintf("the agent sent a line that is not JSON-RPC: %.80q", line))
		return
	}
	switch {
	case m.isResponse():
		c.handleResponse(&m)
	case m.isRequest():
		c.handleRequest(&m)
	case m.Method == "session/update":
		var n sessionNotification
		if err := json.Unmarshal(m.Params, &n); err != nil {
			c.p.note(fmt.Sprintf("a session/update the client cannot read: %v", err))
			return
		}
		if c.sess != nil && n.SessionID == c.sess.id {
			c.handleUpdate(&n.Update)
		}
	case m.Method == "$/cancel_request":
		c.withdrawn(m.Params)
	}
}

func (c *client) handleResponse(m *message) {
	id := string(m.ID)
	then := c.pending[id]
	if then == nil {
		c.p.note("an answer to no request: id " + id)
		return
	}
	delete(c.pending, id)
	then(m)
}
