// Package supervisor owns shellagent's sessions and the work they run:
// foreground commands, background terminals, the kinds of work in
// packages of their own, and the background list that every state_update
// carries. The rules are the manual's (docs/); docs/architecture.md maps
// where each is kept, and names the packages this one uses.
//
// Sessions belong to the Supervisor, not to a connection: a session
// reports to the connection that attached it last (session/new,
// session/resume), and is no longer active on one it was taken from that
// way until that one resumes it again (outbox.attach). What a session
// does when its connection goes away is Config.Detached's (Detach). How
// commands start is behind ptyio.Launcher.
//
// # Structure
//
// Files call downward, in this order; the only calls that run back up are
// callbacks that enter later (a timer, a permission answer) through a way
// in, and a closing session leaving the Supervisor's table.
//
//   - supervisor.go: the Supervisor, its session table, protocol.Agent.
//   - session.go: the Session and the ways in: settle, and one method per
//     thing that enters (each request, a process's events, a timer);
//     closing. A kind of work's own callbacks enter through do, into a
//     method of that kind.
//   - commands.go: the command table: each slash command is one entry
//     (its syntax, hint, parser, whether it acts at once, what it runs),
//     from which availableCommands, parseInput and dispatch come: the
//     session's own (/bg, /ps, /stop, /scenario), and those a kind of
//     work declares in its package (work.Command), assembled
//     (kindCommand).
//   - turns.go: the turn queue and the turn engine: held prompts, the
//     foreground turn (a command, a kind's work, a scenario's), starting
//     and ending turns, /stop.
//   - terminal.go: one command line's life: launch, hand-off to the
//     background, exit status.
//   - kinds.go: the kinds of work in packages of their own, which see the
//     session only through supervisor/work: a work.Task is a tool call's
//     task (kindTask), the session their work.Host (host), a tool call a
//     work.Call (callHandle), a turn a work.Turn (kindTurn); workKinds
//     thaws their frozen forms (a service's into the session's stack:
//     host.Stack). permission.go: the session as an approval.Host, for a
//     command that waits for the user's permission.
//   - background.go: the background list and the RFD rules it keeps, and
//     the only code that sends a state_update.
//   - history.go: the outbox: the attached client, what is sent to it,
//     and the replay of the history to a client that attaches; the
//     history's rules (each item once, in order, what it keeps) are
//     supervisor/history's.
//   - work.go: the registry of work: terminals and tool calls, each with
//     one state, and retention.
//   - actor.go: a session's actor (internal/actor), which owns its state:
//     do, doWait, peek, slow work, and the snapshot it publishes.
//   - input.go: typing into terminals, sizing them, /tail, and the
//     notices (what of them needs nothing of the session is
//     supervisor/terminput's).
//   - prompt.go: a prompt's blocks read into a line; config.go: the
//     Config, which a session's settings start from (the settings, their
//     options and what a request changes are supervisor/settings');
//     clock.go: the clock of the timed rules.
//   - status.go: what a server that outlives its connections shows of
//     each session (Sessions), and the detached TTL.
//   - clientcheck.go: when a session reports a client check, and to whom
//     (the rules are internal/clientcheck's).
//   - freeze.go and thaw.go: an upgrade in place (the daemon's Host):
//     every session's actor held in one entry, its terminals' readers
//     parked, what is not handed over ended, and the sessions written
//     out (Freeze); rebuilt, detached, with the terminals adopted, in the
//     new image (Restore); what needs none of a session's state (the
//     format, the files, the hold) is supervisor/handover's. probes.go:
//     the kinds' checks without a terminal (a service's exec: ready
//     probe), whose tries in flight Freeze ends first, and its thaw
//     lets run again.
//
// # Concurrency
//
// Each session's state belongs to one goroutine, its actor (actor.go: an
// internal/actor.Actor, whose doc has the rules), started with the
// session and ended once it has closed. Session.do queues a function on
// its bounded inbox, and the actor runs the entries one at a time, in
// order, each followed by settle (the repeated state_update for a list
// change; the end of a close once nothing runs). doWait also waits for
// the entry to have run: for the ways in that answer with what they
// changed (session/set_config_option, session/resume; Detach), Sessions,
// and the kit's Session.Do. Neither is called from the actor: code there
// runs inline what it would queue. Once the actor has ended, an entry
// runs on the goroutine that brings it, under the actor's late mutex.
// These goroutines bring entries:
//
//   - the connection's request loop, through the protocol.Agent methods:
//     any request. It must not block, so an answer that comes later (a
//     held prompt, session/close, tool_call/cancel) goes through a
//     protocol.Reply, which the actor calls;
//   - a terminal's process goroutine (ptyio.Events): ShellReturned, then
//     Exited, at most once each;
//   - timers (time.AfterFunc): a turn's foreground timeout, a job's
//     firing, a watch's changes once they have stopped, a service's
//     restart delay, the detached TTL. Each checks first that what it
//     fires for is still current;
//   - a kind's goroutines, with what they found: a wait's outcome
//     (supervisor/wait), a service's readiness (supervisor/service,
//     which checks that its run is still current; its log copier enters
//     nothing), a watch's failure when what it watches goes away;
//   - a terminal's input watch (a timer of supervisor/terminput's Watch,
//     started in input.go): it looks at /proc off the actor, and enters
//     only to notice a program waiting for input;
//   - a permission answer (the callback of
//     protocol.Client.RequestPermission, through host.Ask), which changes
//     nothing if the request was answered, withdrawn or cancelled
//     meanwhile;
//   - context.AfterFunc: a held prompt that the client withdrew with
//     $/cancel_request;
//   - a playing scenario's goroutine (package scenario), one Stage call
//     at a time, through Session.Do (doWait); it waits for what it needs
//     (a terminal's exit, the client's cancel) off the actor;
//   - the owner of a connection, through Detach and Shutdown.
//
// Slow work runs inline on the actor, so an event reads straight down:
// launching a command (a fork and exec, a cgroup, and in subreaper mode
// the containment's fork lock, which a reap pass holds while it scans
// /proc), /ps's scan of each listed terminal's processes, and a watch's
// walk of the tree it watches (/watch, /resume). It holds up only its own
// session: later entries wait in the inbox, so no one sees an event half
// done (a terminal's events come after its announcement; a session/cancel
// or a close that arrives during a launch stops what the launch started),
// and no request waits for another session's launch. Before slow work the
// entry calls slow, which publishes a snapshot (its title, settings, when
// it last reported, whether it is idle). The reads that must answer while
// the session is busy (session/list, session/new's config options,
// Shutdown's kill grace, a scenario's Idle) use peek: it waits for the
// entries that came before it, never for slow work, and answers with the
// snapshot published last. A prompt that acts at
// once beside the foreground turn (/bg, /ps, /stop, /pause, /resume while
// a command runs) ends no turn, so the session tells its client when it
// is done (protocol.PromptActed, after its slow work if it has any), in
// order with what it reported.
//
// Nothing on the actor waits for a client: updates are queued on it
// (protocol.Client never blocks), and processes are signalled without
// waiting (the escalation runs on a goroutine of its own). The PTY
// readers only write the rings, and the connection's writer and a wait's
// goroutine only read them; none of them enters a session but through
// the ways in above.
//
// Locks, in the order they may be taken: a session's actor's late mutex
// (after the actor ended), then its shown (the snapshot's hand-off, a
// leaf; both internal/actor's), and the Supervisor's mu, which guards its
// session table only. A session's actor takes mu (to leave the table when
// it closes); the Supervisor never sends to an actor, nor waits for one,
// while it holds mu.
package supervisor

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"shellagent/acp"
	"shellagent/protocol"
	"shellagent/supervisor/record"
)

// Supervisor owns every session of the process and serves them as a
// protocol.Agent.
type Supervisor struct {
	cfg       Config
	env       []string         // cfg.Env, with TERM set when it was not
	histories record.Histories // cfg.History's
	probes    *probes          // the kinds' tries without a terminal, through cfg.Launcher

	live sessionTable
	// reviving is held while a past session is made live (revivePast):
	// one at a time, so that two resumes of one past session make it live
	// once, the later finding it live.
	reviving sync.Mutex
}

// sessionTable is a Supervisor's live sessions, and what it remembers of
// those that closed. Any goroutine may use it: its mutex guards it all.
type sessionTable struct {
	mu       sync.Mutex // guards what follows
	sessions map[string]*Session
	order    []string // session ids, oldest first
	created  int      // sessions created so far
	closed   []string // the ids of the last keepClosed sessions that closed, oldest first
}

var _ protocol.Agent = (*Supervisor)(nil)

// New returns a Supervisor with no sessions.
func New(cfg Config) *Supervisor {
	cfg = cfg.withDefaults()
	env := slices.Clone(cfg.Env)
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TERM=") }) {
		env = append(env, "TERM=xterm-256color")
	}
	sv := &Supervisor{cfg: cfg, env: env, histories: record.Histories{Store: cfg.History, Log: cfg.Log},
		live: sessionTable{sessions: make(map[string]*Session)}}
	sv.probes = &probes{run: sv.cfg.probe}
	return sv
}

// Initialize implements protocol.Agent. The connection has negotiated
// the version already: it calls Initialize only for a v2 client.
func (sv *Supervisor) Initialize(_ protocol.Client, _ *acp.InitializeRequest) (*acp.InitializeResponse, error) {
	res := &acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersion,
		Info:            acp.Implementation{Name: "shellagent", Title: "shellagent", Version: sv.cfg.Version},
		Capabilities:    acp.AgentCapabilities{Session: &acp.SessionCapabilities{}},
	}
	if sv.cfg.History != nil {
		res.Capabilities.Session.Delete = &struct{}{}
	}
	meta := map[string]any{"methods": []string{acp.MethodWriteTerminal, acp.MethodResizeTerminal, acp.MethodLookSession, acp.MethodReadService}}
	if sv.cfg.Containment != "" {
		meta["containment"] = sv.cfg.Containment
	}
	res.Meta = map[string]any{"shellagent": meta}
	return res, nil
}

// NewSession implements protocol.Agent: the new session is attached to c.
func (sv *Supervisor) NewSession(c protocol.Client, p *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	if err := noMCPServers(p.McpServers); err != nil {
		return nil, err
	}
	if err := checkDir("cwd", p.Cwd); err != nil {
		return nil, err
	}
	if err := sv.live.room("session/new"); err != nil {
		return nil, err
	}
	s := newSession(sv, sv.live.newID(sv.cfg.SequentialIDs, sv.histories.Has), p.Cwd, c)
	s.disk.Create(p.Cwd)
	sv.live.add(s)
	return &acp.NewSessionResponse{
		SessionID:         s.id,
		ConfigOptions:     s.peek().settings.Options(),
		AvailableCommands: availableCommands(),
	}, nil
}

// noMCPServers refuses the first MCP server of a session/new or
// session/resume, -32602: shellagent connects to none, and its Initialize
// advertises no transport (capabilities.session.mcp), so each is one it
// does not support, which the schema's McpServer says to reject.
func noMCPServers(servers []json.RawMessage) error {
	if len(servers) == 0 {
		return nil
	}
	var s struct {
		Type string `json:"type"`
	}
	json.Unmarshal(servers[0], &s) // a server without a type is refused all the same
	return acp.InvalidParams("mcpServers[0]: transport %q is not supported (shellagent advertises no MCP transport; send none)", s.Type)
}

// checkDir refuses a dir that is not an existing directory; it is
// absolute already (the params' Validate).
func checkDir(field, dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return acp.InvalidParams("%s: %v", field, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return acp.InvalidParams("%s: %s is not a directory", field, dir)
	}
	return nil
}

// get returns the live session id, or the -32002 error.
func (t *sessionTable) get(id string) (*Session, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.sessions[id]; s != nil {
		return s, nil
	}
	return nil, acp.SessionNotFound(id)
}

// list returns the live sessions, oldest first.
func (t *sessionTable) list() []*Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := make([]*Session, 0, len(t.order))
	for _, id := range t.order {
		list = append(list, t.sessions[id])
	}
	return list
}

// newID returns the id of a new session: random, or, sequential, the
// next number that no session taken (an earlier agent's) has.
func (t *sessionTable) newID(sequential bool, taken func(id string) bool) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.created++
	if !sequential {
		return "sess_" + rand.Text()
	}
	id := "sess_" + strconv.Itoa(t.created)
	for taken(id) {
		t.created++
		id = "sess_" + strconv.Itoa(t.created)
	}
	return id
}

// maxLive bounds the live sessions of a Supervisor (the agent on stdio,
// or the daemon's for all its connections): each holds memory, a
// goroutine and its history file open until it is closed, and a client
// can create them faster than anything closes them. The sessions of an
// upgrade in place are made live whatever their number.
const maxLive = 1000

// room returns nil if one more session may be made live by op (a
// session/new, or the resume of a past session), else the -32600 that
// says why. Sessions being made live at the same moment on other
// connections may each pass it.
func (t *sessionTable) room(op string) error {
	t.mu.Lock()
	n := len(t.sessions)
	t.mu.Unlock()
	if n < maxLive {
		return nil
	}
	return &acp.Error{Code: acp.CodeInvalidRequest,
		Message: fmt.Sprintf("%s: %d sessions are live already, the most shellagent keeps; close one (session/close) first", op, n),
		Data:    map[string]int{"live": n}}
}

// add makes s live, the newest, unless a session of its id is live
// already: it returns that one then, else nil.
func (t *sessionTable) add(s *Session) (live *Session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if other := t.sessions[s.id]; other != nil {
		return other
	}
	t.sessions[s.id] = s
	t.order = append(t.order, s.id)
	return nil
}

// len returns how many sessions the table holds, closing ones included.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sessions)
}

// wasClosed reports whether id is one of the last keepClosed sessions that
// closed.
func (t *sessionTable) wasClosed(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Contains(t.closed, id)
}

// marks returns how many sessions were created and the last that closed,
// for the next image of an upgrade in place (setMarks).
func (t *sessionTable) marks() (created int, closed []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.created, slices.Clone(t.closed)
}

// setMarks restores what marks returned in the image before.
func (t *sessionTable) setMarks(created int, closed []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.created, t.closed = created, closed
}

// forget takes session id, which closed, off the live ones.
func (t *sessionTable) forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sessions, id)
	t.order = slices.DeleteFunc(t.order, func(s string) bool { return s == id })
	if t.closed = append(t.closed, id); len(t.closed) > keepClosed {
		t.closed = slices.Delete(t.closed, 0, 1)
	}
}

// ListSessions implements protocol.Agent.
func (sv *Supervisor) ListSessions(_ protocol.Client, p *acp.ListSessionsRequest) (*acp.ListSessionsResponse, error) {
	return sv.histories.List(p, listed(sv.live.list()))
}

// ResumeSession implements protocol.Agent: the session is attached to c,
// in place of the connection it reported to, if any. A session that is
// not live but in the history is made live again under its id, with what
// it recorded (revive), and resumed. A session that is neither answers
// -32002.
func (sv *Supervisor) ResumeSession(c protocol.Client, p *acp.ResumeSessionRequest) (*acp.ResumeSessionResponse, error) {
	if err := noMCPServers(p.McpServers); err != nil {
		return nil, err
	}
	s, err := sv.live.get(p.SessionID)
	if err == nil {
		return s.resume(c, p, nil)
	}
	if !sv.histories.Has(p.SessionID) {
		violations{sv}.closed(c, "session/resume", p.SessionID)
		return nil, err
	}
	s, notice, err := sv.revivePast(p)
	if err != nil {
		return nil, err
	}
	return s.resume(c, p, notice)
}

// revivePast makes past session p.SessionID live again under its id, from
// its history, and returns it with the notice of its resume; if another
// resume made it live meanwhile, it returns that session and no notice.
func (sv *Supervisor) revivePast(p *acp.ResumeSessionRequest) (*Session, *acp.Notice, error) {
	sv.reviving.Lock()
	defer sv.reviving.Unlock()
	if s, err := sv.live.get(p.SessionID); err == nil {
		return s, nil, nil
	}
	if err := sv.live.room("session/resume"); err != nil {
		return nil, nil, err
	}
	h, err := sv.histories.Resume(p, func() error { _, err := replayFrom(p.ReplayFrom); return err })
	if err != nil {
		return nil, nil, err
	}
	s, lost := revive(sv, h)
	if other := sv.live.add(s); other != nil {
		return other, nil, nil // made live by another way meanwhile
	}
	s.doWait(func(st *state) { settleRevived(st, lost) })
	return s, record.PastNotice(h, termIDs(lost)), nil
}

// CloseSession implements protocol.Agent. Closing an unknown session
// succeeds, and so does closing one that another connection took from c,
// which goes on.
func (sv *Supervisor) CloseSession(c protocol.Client, p *acp.CloseSessionRequest, reply protocol.Reply) {
	s, err := sv.live.get(p.SessionID)
	if err != nil {
		reply(struct{}{}, nil)
		return
	}
	s.closeFrom(c, false, func() { reply(struct{}{}, nil) }, nil)
}

// Prompt implements protocol.Agent.
func (sv *Supervisor) Prompt(ctx context.Context, c protocol.Client, p *acp.PromptRequest, reply protocol.Reply) {
	s, err := sv.live.get(p.SessionID)
	if err != nil {
		reply(nil, err)
		violations{sv}.closed(c, "session/prompt", p.SessionID)
		return
	}
	if p.IdempotencyKey != "" {
		s.disk.PromptOnce(p.IdempotencyKey, func(reply protocol.Reply) { s.prompt(ctx, c, p.Prompt, reply) }, reply)
		return
	}
	s.prompt(ctx, c, p.Prompt, reply)
}

// CancelSession implements protocol.Agent.
func (sv *Supervisor) CancelSession(c protocol.Client, p *acp.CancelSessionNotification) {
	if s, err := sv.live.get(p.SessionID); err == nil {
		s.cancel(c)
	}
}

// CancelTerminal implements protocol.Agent.
func (sv *Supervisor) CancelTerminal(c protocol.Client, p *acp.CancelTerminalRequest, reply protocol.Reply) {
	s, err := sv.live.get(p.SessionID)
	if err != nil {
		reply(nil, err)
		violations{sv}.closed(c, "terminal/cancel", p.SessionID)
		return
	}
	s.cancelTerminal(c, p.TerminalID, reply)
}

// CancelToolCall implements protocol.Agent.
func (sv *Supervisor) CancelToolCall(c protocol.Client, p *acp.CancelToolCallRequest, reply protocol.Reply) {
	s, err := sv.live.get(p.SessionID)
	if err != nil {
		reply(nil, err)
		violations{sv}.closed(c, "tool_call/cancel", p.SessionID)
		return
	}
	s.cancelToolCall(c, p.ToolCallID, reply)
}

// SetConfigOption implements protocol.Agent.
func (sv *Supervisor) SetConfigOption(c protocol.Client, p *acp.SetConfigOptionRequest) (*acp.SetConfigOptionResponse, error) {
	s, err := sv.live.get(p.SessionID)
	if err != nil {
		violations{sv}.closed(c, "session/set_config_option", p.SessionID)
		return nil, err
	}
	return s.setConfigOption(c, p)
}

// Detach tells the Supervisor that connection c has gone away (its input
// ended); c is the protocol.Client the connection passed to the Agent
// methods. Each session attached to c does what Config.Detached says: it
// closes, as session/close does, and Detach returns once those sessions
// have reported their final updates (to c, if it can still write) or ctx
// ends; or it runs on with no client, and Detach returns at once. Sessions
// attached to other connections run on; only the prompts that c left held
// in them are answered -32800, never to be inserted.
func (sv *Supervisor) Detach(ctx context.Context, c protocol.Client) error {
	return waitEach(ctx, "detach", sv.live.list(), func(s *Session, done func()) bool {
		return s.detach(c, sv.cfg.Detached, done)
	})
}

// shutdownSlack is how long Shutdown waits, beyond the longest kill grace
// in use, for the last processes to die and their final updates to go out.
// A variable only so that the tests can give it testloop.Bound for a
// loaded machine.
var shutdownSlack = 700 * time.Millisecond

// LongestGrace returns the longest kill grace in use: the Config's, or a
// session's own.
func (sv *Supervisor) LongestGrace() time.Duration {
	grace := sv.cfg.KillGrace
	for _, s := range sv.live.list() {
		grace = max(grace, s.peek().settings.KillGrace) // the kill grace its next stop uses
	}
	return grace
}

// Shutdown closes every session in parallel, as session/close does, each
// stopping its work with its own kill grace. It returns once all of them
// have reported their final updates, or with an error once ctx ends or the
// longest kill grace in use plus shutdownSlack has passed.
func (sv *Supervisor) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, sv.LongestGrace()+shutdownSlack)
	defer cancel()
	return waitEach(ctx, "shutdown", sv.live.list(), func(s *Session, done func()) bool {
		s.close(done)
		return true
	})
}

// waitEach applies start to each of sessions and waits for the done of
// each one for which start reported that it will be called. If ctx ends
// first, the error names the sessions still waited for and the terminals
// each still runs.
func waitEach(ctx context.Context, op string, sessions []*Session, start func(s *Session, done func()) bool) error {
	var wg sync.WaitGroup
	left := make([]atomic.Bool, len(sessions))
	for i, s := range sessions {
		wg.Add(1)
		left[i].Store(true)
		done := func() { left[i].Store(false); wg.Done() }
		if !start(s, done) {
			done()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	var waiting []string
	for i, s := range sessions {
		if left[i].Load() { // Shown waits for nothing: the actor may be what is stuck
			running := cmp.Or(strings.Join(s.actor.Shown().terminals, ", "), "none")
			waiting = append(waiting, s.id+" (running: "+running+")")
		}
	}
	return fmt.Errorf("%s: %w; still waiting for %s", op, ctx.Err(), strings.Join(waiting, "; "))
}
