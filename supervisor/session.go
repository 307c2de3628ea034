package supervisor

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"shellagent/protocol"
)

// A Session is one conversation: its prompts, its foreground work, its
// background list, and the history of everything it reported.
type Session struct {
	sv  *Supervisor
	id  string
	cwd string

	mu        sync.Mutex // guards everything below
	client    protocol.Client
	settings  settings
	seq       map[string]int // last id issued per prefix: msg, call, term
	title     string
	updatedAt time.Time
	state     string    // running, requires_action, idle
	fg        *terminal // the foreground command, once it runs
	waiting   *approval // the foreground command, while it waits for permission
	queue     []*turn   // prompts (and firings) waiting for the foreground
	list      backgroundList
	listDirty bool // the list changed since the last state_update
	terminals map[string]*terminal
	calls     map[string]*toolCall
	history   []any                 // updates as sent, for replay (history.go); no state_update:
	lastState *protocol.StateUpdate // each is complete, so only the latest is kept
	retired   []*terminal           // exited terminals that keep their output, oldest first
	closing   bool
	closed    bool
	closeFg   bool     // closing cancelled foreground work
	closeList bool     // the list was not empty when closing began
	closeDone []func() // called once the close is complete
}

// turn is foreground work waiting for its turn: a held prompt, answered
// when it is inserted.
type turn struct {
	blocks  []protocol.ContentBlock
	in      input
	reply   protocol.Reply // nil for the firing of a scheduled job
	job     *job           // the job that fired
	unwatch func() bool    // stops watching for the client's withdrawal
}

// withdrawHeld answers a held prompt that the client withdrew
// ($/cancel_request) before it was inserted.
func (s *Session) withdrawHeld(t *turn) {
	s.mu.Lock()
	defer s.unlock()
	if i := slices.Index(s.queue, t); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		t.reply(nil, protocol.RequestCancelled("withdrawn by $/cancel_request before it was inserted"))
	}
}

func newSession(sv *Supervisor, id, cwd string, c protocol.Client) *Session {
	now := time.Now()
	return &Session{
		sv: sv, id: id, cwd: cwd,
		client:    c,
		settings:  settings{foregroundTimeout: sv.cfg.ForegroundTimeout, killGrace: sv.cfg.KillGrace},
		seq:       make(map[string]int),
		updatedAt: now,
		state:     protocol.StateIdle,
		terminals: make(map[string]*terminal),
		calls:     make(map[string]*toolCall),
	}
}

// unlock sends the repeated snapshot owed for a list change, then releases
// the session. Every method that takes s.mu releases it with unlock.
func (s *Session) unlock() {
	s.flushList()
	s.mu.Unlock()
}

func (s *Session) newID(prefix string) string {
	s.seq[prefix]++
	return prefix + "_" + strconv.Itoa(s.seq[prefix])
}

// emit records an update in the history and sends it.
func (s *Session) emit(u any) {
	s.record(u)
	s.send(u)
}

// send sends an update without recording it (resume snapshots).
func (s *Session) send(u any) {
	if s.closed || s.client == nil {
		return
	}
	s.updatedAt = time.Now()
	s.client.Update(s.id, u)
}

func (s *Session) agentMessage(text string) {
	s.emit(&protocol.Message{SessionUpdate: protocol.KindAgentMessage, MessageID: s.newID("msg"), Content: []protocol.ContentBlock{protocol.TextBlock(text)}})
}

func (s *Session) info() protocol.SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return protocol.SessionInfo{SessionID: s.id, Cwd: s.cwd, Title: s.title, UpdatedAt: s.updatedAt.UTC().Format(time.RFC3339)}
}

// prompt inserts a prompt now, or holds it until the foreground is free.
// A held prompt is withdrawn (-32800, never inserted) when ctx ends first.
func (s *Session) prompt(ctx context.Context, blocks []protocol.ContentBlock, reply protocol.Reply) {
	line, err := promptLine(blocks)
	if err != nil {
		reply(nil, err)
		return
	}
	in := parseInput(line)
	s.mu.Lock()
	defer s.unlock()
	if s.closing {
		reply(nil, protocol.RequestCancelled("session is closing"))
		return
	}
	t := &turn{blocks: blocks, in: in, reply: reply}
	switch {
	case in.immediate() && s.busy():
		s.insert(t)
		s.act(in)
	case s.busy() || len(s.queue) > 0:
		t.unwatch = context.AfterFunc(ctx, func() { s.withdrawHeld(t) })
		s.queue = append(s.queue, t)
	default:
		s.start(t)
	}
}

// busy reports whether foreground work is under way.
func (s *Session) busy() bool { return s.fg != nil || s.waiting != nil }

// insert adds the prompt to the conversation: user_message, then the
// response with its id.
func (s *Session) insert(t *turn) {
	id := s.newID("msg")
	if s.title == "" {
		s.title = t.in.line
	}
	s.emit(&protocol.Message{SessionUpdate: protocol.KindUserMessage, MessageID: id, Content: t.blocks})
	t.reply(&protocol.PromptResponse{MessageID: id}, nil)
}

// start runs a turn on an idle session: a prompt (inserted first) or the
// firing of a scheduled job (agent-initiated: no user message). The turn
// reports running (or requires_action), its work, and idle once the work
// is done: at once for everything but a foreground command.
func (s *Session) start(t *turn) {
	if t.reply != nil {
		s.insert(t)
	}
	if t.in.kind == runCommand {
		s.runForeground(t.in.line, t.job)
		return
	}
	s.transition(protocol.StateRunning, "")
	s.act(t.in)
	s.endTurn(protocol.StopEndTurn)
}

// endTurn reports the end of foreground work and starts the next turn.
func (s *Session) endTurn(stopReason string) {
	if s.busy() {
		return
	}
	s.transition(protocol.StateIdle, stopReason)
	s.next()
}

// next starts the first waiting turn, if the foreground is free.
func (s *Session) next() {
	if s.busy() || s.closing || len(s.queue) == 0 {
		return
	}
	t := s.queue[0]
	s.queue = s.queue[1:]
	if t.job != nil {
		t.job.queued = false
	}
	if t.unwatch != nil {
		t.unwatch()
	}
	s.start(t)
}

// runForeground runs line as foreground work: at once, or after the user
// allows it in permission mode "ask".
func (s *Session) runForeground(line string, j *job) {
	call := s.newCall(line)
	if s.settings.ask {
		s.ask(&approval{call: call, line: line, job: j})
		return
	}
	s.transition(protocol.StateRunning, "")
	s.startForeground(call, line, j)
}

// act carries out everything but a foreground command.
func (s *Session) act(in input) {
	switch in.kind {
	case bgCommand:
		s.runBackground(in.line)
	case bgDetach:
		switch {
		case s.fg != nil && s.fg.stopping:
			s.agentMessage("The foreground command is being stopped; it stays in the foreground until it exits.")
		case s.fg != nil:
			s.detach(s.fg, "Moved to the background by /bg.")
		case s.waiting != nil:
			s.agentMessage("The foreground command is waiting for permission; it can move to the background once it runs.")
		default:
			s.agentMessage("Nothing is running in the foreground: /bg alone moves the running command to the background. To start a command in the background, write /bg CMD.")
		}
	case listWork:
		s.agentMessage(s.listing())
	case stopWork:
		s.stopByID(in.id)
	case afterWork, everyWork:
		s.schedule(in)
	case badInput:
		s.agentMessage(in.problem)
	}
}

// runBackground starts line directly as background work.
func (s *Session) runBackground(line string) {
	call := s.newCall(line)
	if s.settings.ask {
		s.ask(&approval{call: call, line: line, background: true})
		return
	}
	if t := s.launch(call, line); t != nil {
		s.detach(t, "Started in the background.")
	}
}

func (s *Session) newCall(line string) *toolCall {
	c := &toolCall{id: s.newID("call"), title: line, kind: "execute"}
	s.calls[c.id] = c
	return c
}

// stopByID serves /stop: the same acceptance and errors as the cancel
// methods, told as an agent message.
func (s *Session) stopByID(id string) {
	if s.terminals[id] != nil || s.calls[id] == nil {
		if err := s.cancelTerminalLocked(id); err != nil {
			s.agentMessage("Cannot stop " + id + ": " + err.(*protocol.Error).Message + ".")
			return
		}
		s.agentMessage("Stopping " + id + ": SIGTERM sent; its exit status follows.")
		return
	}
	stop, err := s.cancelToolCallLocked(id)
	if err != nil {
		s.agentMessage("Cannot stop " + id + ": " + err.(*protocol.Error).Message + ".")
		return
	}
	s.agentMessage("Cancelling " + id + ".")
	stop()
}

// transition reports a foreground state change with the current list.
// While closing, nothing is reported: close sends one final snapshot.
func (s *Session) transition(state, stopReason string) {
	s.state = state
	if !s.closing {
		s.snapshot(stopReason)
	}
}

// cancel serves session/cancel: held prompts are answered -32800 and the
// foreground command is stopped; background work goes on.
func (s *Session) cancel() {
	s.mu.Lock()
	defer s.unlock()
	s.dropQueue("cancelled by session/cancel")
	if t := s.fg; t != nil {
		t.cancelled = true
		s.stop(t)
	}
	if a := s.waiting; a != nil {
		s.withdraw(a, protocol.StatusCancelled, "Cancelled by session/cancel while waiting for permission.")
		s.endTurn(protocol.StopCancelled)
	}
}

// dropQueue answers held prompts -32800; queued firings are dropped.
func (s *Session) dropQueue(why string) {
	for _, t := range s.queue {
		if t.unwatch != nil {
			t.unwatch()
		}
		if t.reply != nil {
			t.reply(nil, protocol.RequestCancelled(why))
		}
		if t.job != nil {
			t.job.queued = false
		}
	}
	s.queue = nil
}

// cancelTerminal serves terminal/cancel.
func (s *Session) cancelTerminal(id string) error {
	s.mu.Lock()
	defer s.unlock()
	return s.cancelTerminalLocked(id)
}

func (s *Session) cancelTerminalLocked(id string) error {
	t := s.terminals[id]
	switch {
	case t == nil:
		return protocol.InvalidParams("terminalId: no terminal %q in this session", id)
	case t.exited:
		return protocol.InvalidParams("terminalId: %s has already exited", id)
	}
	s.stop(t)
	return nil
}

// cancelToolCall serves tool_call/cancel: the answer goes out first, then
// the tool call's final status.
func (s *Session) cancelToolCall(id string, reply protocol.Reply) {
	s.mu.Lock()
	defer s.unlock()
	stop, err := s.cancelToolCallLocked(id)
	if err != nil {
		reply(nil, err)
		return
	}
	reply(struct{}{}, nil)
	stop()
}

// cancelToolCallLocked accepts the cancellation of a tool call and returns
// what stops it.
func (s *Session) cancelToolCallLocked(id string) (stop func(), err error) {
	c := s.calls[id]
	switch {
	case c == nil:
		return nil, protocol.InvalidParams("toolCallId: no tool call %q in this session", id)
	case c.final():
		return nil, protocol.InvalidParams("toolCallId: %s is already %s", id, c.status)
	case c.job != nil:
		return func() { s.cancelJob(c.job) }, nil
	case c.appr != nil && c.appr.background:
		return func() {
			s.withdraw(c.appr, protocol.StatusCancelled, "Cancelled before it was allowed to run.")
		}, nil
	}
	return nil, protocol.InvalidParams("toolCallId: %s is not cancellable (a command is stopped with terminal/cancel on its terminal)", id)
}

// close stops everything of the session in parallel, reports every final
// status and the last snapshot, and then calls done. Later calls of close
// wait for the same end.
func (s *Session) close(done func()) {
	s.mu.Lock()
	defer s.unlock()
	s.closeDone = append(s.closeDone, done)
	if s.closing {
		return
	}
	s.closing = true
	s.closeList = len(s.list.items) > 0
	s.dropQueue("session closed")
	if s.fg != nil {
		s.closeFg = true
		s.fg.cancelled = true
	}
	if a := s.waiting; a != nil {
		s.closeFg = true
		s.withdraw(a, protocol.StatusCancelled, "Cancelled: the session closed while it waited for permission.")
	}
	for _, c := range s.calls {
		switch {
		case c.final():
		case c.job != nil:
			s.cancelJob(c.job)
		case c.appr != nil:
			s.withdraw(c.appr, protocol.StatusCancelled, "Cancelled: the session closed while it waited for permission.")
		}
	}
	for _, t := range s.terminals {
		if !t.exited && !t.stopping { // a stop under way keeps its grace
			s.stop(t)
		}
	}
	s.finishClose()
}

// finishClose completes a close once no terminal is live.
func (s *Session) finishClose() {
	if !s.closing || s.closed {
		return
	}
	for _, t := range s.terminals {
		if !t.exited {
			return
		}
	}
	// The last snapshot: idle cancelled if foreground work was stopped, a
	// repeated idle if only the list emptied; an idle session with nothing
	// running needs none.
	if s.closeFg || s.closeList {
		stop := ""
		if s.closeFg {
			stop = protocol.StopCancelled
		}
		s.state = protocol.StateIdle
		s.closing = false // let the snapshot out
		s.snapshot(stop)
	}
	s.closing, s.closed = true, true
	s.sv.forget(s.id)
	for _, done := range s.closeDone {
		done()
	}
	s.closeDone = nil
}

// setConfigOption serves session/set_config_option.
func (s *Session) setConfigOption(p *protocol.SetConfigOptionRequest) (*protocol.SetConfigOptionResponse, error) {
	s.mu.Lock()
	defer s.unlock()
	if err := s.settings.set(p); err != nil {
		return nil, err
	}
	return &protocol.SetConfigOptionResponse{ConfigOptions: s.settings.options()}, nil
}

func (s *Session) configOptions() []protocol.ConfigOption {
	s.mu.Lock()
	defer s.unlock()
	return s.settings.options()
}

// resume attaches the session to c and brings c up to date: a current
// terminal_update (with an output snapshot) and tool_call_update for the
// foreground command and each listed item, then the current state.
func (s *Session) resume(c protocol.Client, p *protocol.ResumeSessionRequest) (*protocol.ResumeSessionResponse, error) {
	if filepath.Clean(p.Cwd) != filepath.Clean(s.cwd) {
		return nil, protocol.InvalidParams("cwd: %q is not this session's working directory %q", p.Cwd, s.cwd)
	}
	if len(p.ReplayFrom) > 0 && string(p.ReplayFrom) != "null" {
		var cursor struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(p.ReplayFrom, &cursor) != nil || cursor.Type != "start" {
			return nil, protocol.InvalidParams("replayFrom: unsupported cursor %s (only {\"type\":\"start\"})", p.ReplayFrom)
		}
		return nil, protocol.InvalidParams("replayFrom: replay of history is not supported yet; resume without replayFrom")
	}
	s.mu.Lock()
	defer s.unlock()
	if s.closing {
		return nil, protocol.SessionNotFound(s.id)
	}
	s.client = c
	if s.fg != nil {
		s.sendCurrent(s.fg)
	}
	if s.waiting != nil {
		s.send(s.waiting.call.update())
	}
	for _, it := range s.list.items {
		if it.term != nil {
			s.sendCurrent(it.term)
		} else {
			s.send(it.call.update())
		}
	}
	s.snapshot("")
	return &protocol.ResumeSessionResponse{ConfigOptions: s.settings.options(), AvailableCommands: availableCommands()}, nil
}
