// Package supervisor owns shellagent's sessions and the work they run:
// foreground commands, background terminals, scheduled jobs, and the
// background list that every state_update carries.
//
// Sessions belong to the Supervisor, not to a connection. A connection
// attaches to the sessions it creates (session/new) or resumes
// (session/resume); a session reports to the connection that attached it
// last. A connection that another one took a session from that way is
// told so (a notice), its held prompts are dropped, and the session is no
// longer active on it: its requests for it are answered -32002, until it
// resumes it again (outbox.attach). When a connection goes away, its owner calls Detach, and
// Config.Detached decides what that means: on stdio every session closes
// (CloseDetached); under KeepDetached a session's work runs on with no one
// attached, until session/resume from another connection attaches it
// again. How commands start is behind ptyio.Launcher.
//
// # Structure
//
// Files call downward, in this order; the only calls that run back up are
// callbacks that enter later (a timer, a permission answer) through a way
// in, and a closing session leaving the Supervisor's table.
//
//   - supervisor.go: the Supervisor, its session table, protocol.Agent.
//   - session.go: the Session and the ways in: settle, and one
//     method per thing that enters: each request, a process's events, a
//     timer; closing. A kind of work's own callbacks (a job's timer, a
//     permission answer, a watch's change) enter through do, into a method
//     of that kind.
//   - commands.go: the command table: each slash command is one entry
//     (its syntax, hint, parser, whether it acts at once, what it runs),
//     from which availableCommands, parseInput and dispatch come. The
//     session's own (/bg, /ps, /stop, /scenario) are written here; a kind
//     of work declares its commands in its package (work.Command: the
//     Commands of supervisor/jobs, terminput, wait, watch and service),
//     which the table assembles (kindCommand); stackOf is the session's
//     stack, which the stack's commands act on.
//   - turns.go: the turn queue and the turn engine: held prompts, the
//     foreground turn (what it runs is a foreground: a command, a wait, a
//     scenario's), starting and ending turns, /stop.
//   - terminal.go: one command line's life: launch, hand-off to the
//     background, exit status. package supervisor/approval (through
//     permission.go) and package supervisor/jobs are the detours it can
//     take: asking the user first, and scheduled firings.
//   - kinds.go: the kinds of work in packages of their own, work without
//     a process of its own that a tool call reports: supervisor/jobs
//     (/after, /every), supervisor/wait (/wait, foreground work that
//     watches a terminal; lines found by internal/linescan, URLs probed by
//     internal/probe) and supervisor/watch (/watch, listed work that runs
//     a command as new foreground work when files change, the tree
//     watched by internal/fswatch; /pause and /resume). They see the
//     session only through package supervisor/work: a work.Task is a task
//     (kindTask), the session its work.Host (host), its tool call a
//     work.Call (callHandle), the turn of /wait a work.Turn (kindTurn);
//     workKinds thaws their frozen forms, a service's too (into the
//     session's stack: host.Stack). These, a service and a request
//     for permission are each a task (work.go), which the session lists,
//     cancels and closes without asking which kind it is.
//     A project's stack (SPEC "Stacks") lives in package
//     supervisor/service with its commands (service.Stack: the services
//     it manages, started in dependency order once ready; /up, /down,
//     /restart, foreground work through a work.Turn; /status and /logs,
//     at once), and each service, a work.Task whose runs are terminals it
//     launches through the session as a work.RunHost (host.Launch;
//     runExited gives it their exits), its ready condition a wait's watch
//     or poll, restarted by its internal/stack Restarter.
//   - permission.go: a command that waits for the user's permission
//     (permission mode "ask"): an approval, package supervisor/approval
//     (the request, its answer, what session/cancel, a resume on another
//     connection, the close and an upgrade do to it), whose session is an
//     approval.Host: reporting it waiting (requires_action, or listed),
//     asking the client, and running the command once it is allowed.
//   - background.go: the background list and the RFD rules it keeps, and
//     the only code that sends a state_update.
//   - history.go: the outbox: the attached client, and the history that a
//     replay re-sends.
//   - work.go: the registry of work: terminals and tool calls, each with
//     one state, and retention.
//   - actor.go: the goroutine that owns a session's state (do, doWait,
//     peek, slow work) and the snapshot it publishes.
//   - input.go: typing into terminals, sizing them, /tail, and the
//     notices; what of them needs nothing of the session (the commands
//     /send, /keys, /resize and /tail, their arguments, the text of /tail
//     and of the notices, the notify setting, and when to look for a
//     program waiting for input) is package supervisor/terminput's.
//   - prompt.go reads a prompt's blocks into a line, and internal/words
//     the words of a slash command (and the shell quoting of a link's
//     path); config.go holds the configuration and the per-session
//     settings (the options' shape, and the check of a request that sets
//     one, are internal/configopt's); clock.go the clock of jobs, timeouts and expiries.
//   - status.go: what a server that outlives its connections shows of
//     each session (Sessions), and the detached TTL.
//   - freeze.go and thaw.go: an upgrade in place (the daemon's Host):
//     every session's actor held in one entry, its terminals' readers
//     parked, what is not handed over ended, and the sessions written
//     out (Freeze); rebuilt, detached, with the terminals adopted, in the
//     new image (Restore). What needs none of a session's state (the
//     format, the files, the hold) is package supervisor/handover's.
//   - kit.go: the session's side of the client developers' kit, whose
//     scenarios play in package scenario through the contract of package
//     supervisor/kit: Config.Kit serves /scenario; a playing scenario's
//     kit.Overlay, consulted where the session reports its list and where
//     it dispatches a cancel, and its kit.Foreground, the work of its
//     turns; Session.Do, and scene, the kit.Host of the kit.Scene through
//     which it drives the session. clientcheck.go: when a session reports a client
//     check, and to whom (the rules, their notices and what the session
//     told its client about cancelling each item are
//     internal/clientcheck's).
//   - durable.go and revive.go: each session's history on disk, which
//     package supervisor/record keeps (a session's Recorder: what it
//     records, its prompts' idempotency keys; Histories: past sessions
//     listed, resumed and deleted): the live sessions as session/list
//     lists them, session/delete of a live one, and a session made live
//     again from its history (revive: assembled from the record.Past that
//     package supervisor/record reads from it).
//
// # Concurrency
//
// Each session's state belongs to one goroutine, its actor (actor.go),
// started with the session and ended once it has closed. Session.do
// queues a function on the actor's bounded inbox (waiting only while
// maxQueued entries wait), and the actor runs the entries one at a time,
// in order, each followed by settle (the repeated state_update for a list
// change; the end of a close once nothing runs). doWait also waits for
// the entry to have run and settled: for the ways in that answer with
// what they changed (session/set_config_option, session/resume; Detach),
// Sessions, and the kit's Session.Do. Neither is called from the
// actor itself: code there runs inline what it would queue. An entry that
// comes after the actor ended runs on the goroutine that brings it, under
// the actor's late mutex, which owns the state from then on. These
// goroutines bring entries:
//
//   - the connection's request loop, through the protocol.Agent methods:
//     any request. It must not block, so an answer that comes later (a held
//     prompt, session/close, tool_call/cancel) goes through a
//     protocol.Reply, which the actor calls;
//   - a terminal's process goroutine (ptyio.Events): ShellReturned, then
//     Exited, at most once each;
//   - time.AfterFunc: a turn's foreground timeout, a job's firing, a
//     watch's changes once they have stopped, the detached TTL. Each
//     checks first that what it fires for is still current;
//   - a wait's goroutine (supervisor/wait), with the outcome it found: a match, an
//     answer, the timeout;
//   - a service's ready goroutine and its restart's delay
//     (supervisor/service, time.AfterFunc), each checking that its run is still current; its
//     log copier enters nothing;
//   - a watch's failure, on a goroutine of its own, when what it watches
//     goes away;
//   - a permission answer (the callback of protocol.Client.
//     RequestPermission, through host.Ask): runs or refuses the command
//     (supervisor/approval), unless the request was answered, withdrawn or
//     cancelled in the meantime;
//   - context.AfterFunc: a held prompt that the client withdrew with
//     $/cancel_request;
//   - a terminal's input watch (time.AfterFunc: supervisor/terminput's
//     Watch, started in input.go), when it found a program waiting for
//     input: it looks at /proc off the actor, and enters only to notice
//     what it found;
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
// entry calls slow (actor.go), which publishes a snapshot of the state (its
// title, settings, when it last reported, whether it is idle). The reads
// that must answer while the session is busy (session/list, session/new's
// config options, Shutdown's kill grace, a scenario's Idle) use peek: it
// waits for the entries that came before it, but never for slow work, and
// then answers with the snapshot the actor published last. No prompt
// waits: one that acts at once beside the foreground turn (/bg, /ps,
// /stop, /pause, /resume while a command runs) ends no turn, so the
// session tells its client when it is done (protocol.PromptActed, after
// its slow work if it has any), in order with what it reported.
//
// Nothing on the actor waits for a client: updates are queued on it
// (protocol.Client never blocks), and processes are signalled without
// waiting (the escalation runs on a goroutine of its own). The PTY
// readers only write the rings, and the connection's writer and a wait's
// goroutine only read them; none of them enters a session but through
// the ways in above.
//
// Locks, in the order they may be taken: a session's late (after its
// actor ended), then its shown (the snapshot's hand-off, a leaf), and
// the Supervisor's mu, which guards its session table only. A session's
// actor takes mu (to leave the table when it closes); the Supervisor
// never sends to an actor, nor waits for one, while it holds mu.
package supervisor

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	return &Supervisor{cfg: cfg, env: env, histories: record.Histories{Store: cfg.History, Log: cfg.Log}, sessions: make(map[string]*Session)}
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
	meta := map[string]any{"methods": []string{acp.MethodWriteTerminal, acp.MethodResizeTerminal}}
	if sv.cfg.Containment != "" {
		meta["containment"] = sv.cfg.Containment
	}
	res.Meta = map[string]any{"shellagent": meta}
	return res, nil
}

// NewSession implements protocol.Agent: the new session is attached to c.
func (sv *Supervisor) NewSession(c protocol.Client, p *acp.NewSessionRequest) (*acp.NewSessionResponse, error) {
	if err := checkDir("cwd", p.Cwd); err != nil {
		return nil, err
	}
	sv.mu.Lock()
	sv.created++
	id := "sess_" + rand.Text()
	if sv.cfg.SequentialIDs {
		id = "sess_" + strconv.Itoa(sv.created)
		for sv.histories.Has(id) { // an id of an earlier agent's session
			sv.created++
			id = "sess_" + strconv.Itoa(sv.created)
		}
	}
	s := newSession(sv, id, p.Cwd, c)
	s.disk.Create(p.Cwd)
	sv.sessions[s.id] = s
	sv.order = append(sv.order, s.id)
	sv.mu.Unlock()
	return &acp.NewSessionResponse{
		SessionID:         s.id,
		ConfigOptions:     s.peek().settings.options(),
		AvailableCommands: availableCommands(),
	}, nil
}

func checkDir(field, dir string) error {
	if !filepath.IsAbs(dir) {
		return acp.InvalidParams("%s: must be an absolute path, got %q", field, dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return acp.InvalidParams("%s: %v", field, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return acp.InvalidParams("%s: %s is not a directory", field, dir)
	}
	return nil
}

// session returns the live session id, or the -32002 error.
func (sv *Supervisor) session(id string) (*Session, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if s := sv.sessions[id]; s != nil {
		return s, nil
	}
	return nil, acp.SessionNotFound(id)
}

// list returns the live sessions, oldest first.
func (sv *Supervisor) list() []*Session {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	list := make([]*Session, 0, len(sv.order))
	for _, id := range sv.order {
		list = append(list, sv.sessions[id])
	}
	return list
}

func (sv *Supervisor) forget(id string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	delete(sv.sessions, id)
	sv.order = slices.DeleteFunc(sv.order, func(s string) bool { return s == id })
	if sv.closed = append(sv.closed, id); len(sv.closed) > keepClosed {
		sv.closed = slices.Delete(sv.closed, 0, 1)
	}
}

// ListSessions implements protocol.Agent.
func (sv *Supervisor) ListSessions(_ protocol.Client, p *acp.ListSessionsRequest) (*acp.ListSessionsResponse, error) {
	return sv.histories.List(p, listed(sv.list()))
}

// ResumeSession implements protocol.Agent: the session is attached to c,
// in place of the connection it reported to, if any. A session that is
// not live but in the history is made live again under its id, with what
// it recorded (revive), and resumed. A session that is neither answers
// -32002.
func (sv *Supervisor) ResumeSession(c protocol.Client, p *acp.ResumeSessionRequest) (*acp.ResumeSessionResponse, error) {
	s, err := sv.session(p.SessionID)
	if err == nil {
		return s.resume(c, p, nil)
	}
	if !sv.histories.Has(p.SessionID) {
		violations{sv}.closed(c, "session/resume", p.SessionID)
		return nil, err
	}
	h, err := sv.histories.Resume(p, func() error { _, err := replayFrom(p.ReplayFrom); return err })
	if err != nil {
		return nil, err
	}
	s, lost := revive(sv, h)
	sv.mu.Lock()
	if other := sv.sessions[s.id]; other != nil {
		// Another connection made it live first: resume that one.
		sv.mu.Unlock()
		return other.resume(c, p, nil)
	}
	sv.sessions[s.id] = s
	sv.order = append(sv.order, s.id)
	sv.mu.Unlock()
	s.doWait(func(st *state) { settleRevived(st, lost) })
	return s.resume(c, p, record.PastNotice(h, termIDs(lost)))
}

// CloseSession implements protocol.Agent. Closing an unknown session
// succeeds, and so does closing one that another connection took from c,
// which goes on.
func (sv *Supervisor) CloseSession(c protocol.Client, p *acp.CloseSessionRequest, reply protocol.Reply) {
	s, err := sv.session(p.SessionID)
	if err != nil {
		reply(struct{}{}, nil)
		return
	}
	s.closeFrom(c, func() { reply(struct{}{}, nil) })
}

// Prompt implements protocol.Agent.
func (sv *Supervisor) Prompt(ctx context.Context, c protocol.Client, p *acp.PromptRequest, reply protocol.Reply) {
	s, err := sv.session(p.SessionID)
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
	if s, err := sv.session(p.SessionID); err == nil {
		s.cancel(c)
	}
}

// CancelTerminal implements protocol.Agent.
func (sv *Supervisor) CancelTerminal(c protocol.Client, p *acp.CancelTerminalRequest, reply protocol.Reply) {
	s, err := sv.session(p.SessionID)
	if err != nil {
		reply(nil, err)
		violations{sv}.closed(c, "terminal/cancel", p.SessionID)
		return
	}
	s.cancelTerminal(c, p.TerminalID, reply)
}

// CancelToolCall implements protocol.Agent.
func (sv *Supervisor) CancelToolCall(c protocol.Client, p *acp.CancelToolCallRequest, reply protocol.Reply) {
	s, err := sv.session(p.SessionID)
	if err != nil {
		reply(nil, err)
		violations{sv}.closed(c, "tool_call/cancel", p.SessionID)
		return
	}
	s.cancelToolCall(c, p.ToolCallID, reply)
}

// SetConfigOption implements protocol.Agent.
func (sv *Supervisor) SetConfigOption(c protocol.Client, p *acp.SetConfigOptionRequest) (*acp.SetConfigOptionResponse, error) {
	s, err := sv.session(p.SessionID)
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
	return waitEach(ctx, "detach", sv.list(), func(s *Session, done func()) bool {
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
	for _, s := range sv.list() {
		grace = max(grace, s.peek().settings.killGrace) // the kill grace its next stop uses
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
	return waitEach(ctx, "shutdown", sv.list(), func(s *Session, done func()) bool {
		s.close(done)
		return true
	})
}

// waitEach applies start to each of sessions and waits for the done of
// each one for which start reported that it will be called.
func waitEach(ctx context.Context, op string, sessions []*Session, start func(s *Session, done func()) bool) error {
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		if !start(s, wg.Done) {
			wg.Done()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
}
