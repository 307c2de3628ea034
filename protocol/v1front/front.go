package v1front

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"shellagent/acp"
	"shellagent/protocol"
)

// v1Front is the protocol.Front that serves a client that initialized the
// connection with ACP v1. It is an adapter over the same Agent the v2
// connection serves: it turns the client's v1 requests into Agent calls
// and is the protocol.Client the Agent reports to, so that the Agent never
// knows which version its client speaks. The v2-shaped updates go to the
// connection's writer unchanged (ordering, coalescing and flow control are
// the writer's) and are written as v1 messages by the v1 encoding (acpV1).
//
// What v1 needs beyond an encoding is the prompt turn: a v1 session/prompt
// is answered when its turn ends, with the stop reason. v2 answers at once
// with the inserted message's id and reports the turn's end as an idle
// state_update with a stop reason. The front follows the state_updates of
// each session as the Agent queues them and answers:
//
//   - a prompt inserted while the session is idle starts a turn: it is
//     answered right after the idle state_update that ends it (end_turn,
//     or cancelled after session/cancel or session/close), or, when that
//     update's stop reason is error (v1 has none), with the update's
//     error as a JSON-RPC error response;
//   - a prompt inserted while foreground work runs (/bg, /ps, /stop act at
//     once) is answered end_turn once the Agent has queued its effects
//     (PromptActed.Acted, called in order with those updates);
//   - a prompt that is never inserted because session/cancel or
//     session/close dropped it (-32800 in v2) is answered cancelled, as v1
//     requires of a cancelled turn; other errors are sent as they are.
//
// The answer is queued right after the update that ends the turn, as a
// complete message, so that it follows every update of the turn on the
// wire whatever the writer coalesces.
//
// Concurrency: the Client methods are called by the Agent from any
// goroutine (with its session's lock held); the request handlers run on
// the connection's read loop and call the Agent without holding mu. Lock
// order: the Agent's locks, then mu, then the writer's.
type v1Front struct {
	w       *protocol.Wire
	agent   protocol.Agent
	methods map[string]protocol.Method // the requests after initialize

	mu       sync.Mutex // guards sessions
	sessions map[string]*v1Session
}

var (
	_ protocol.Front       = (*v1Front)(nil)
	_ protocol.PromptActed = (*v1Front)(nil)
)

// v1Session is what the front knows of a session.
type v1Session struct {
	busy bool      // foreground work under way: the last state was not idle
	turn *v1Prompt // the prompt whose turn is under way
	// released: the session reports to another connection now (Release),
	// so no turn of it ends here; a prompt of this connection that the
	// Agent inserts later is answered at once.
	released bool

	// While the client attaches to the session (session/resume or
	// session/load), what the Agent reports is held until the Agent has
	// answered: then it goes out after the response (resume: a v1 client
	// knows the session only then), or before it (load: v1 wants the
	// history before the response); after an error, it goes out without
	// the attachment. While loading, user messages are replayed.
	attaching bool
	loading   bool
	held      []func()

	// acting holds the prompts inserted while foreground work ran, oldest
	// first: each is answered when the Agent says it has acted.
	acting []*v1Prompt
}

// v1Prompt is a v1 session/prompt waiting for its answer.
type v1Prompt struct {
	reply    protocol.Reply
	answered bool
}

// New makes the v1 front of a connection: Options.Fronts[ProtocolVersion].
func New(w *protocol.Wire) protocol.Front {
	f := &v1Front{w: w, agent: w.Agent(), sessions: make(map[string]*v1Session)}
	f.methods = f.requests()
	return f
}

// Version implements protocol.Front.
func (*v1Front) Version() int { return ProtocolVersion }

// session returns the state of session id, creating it; f.mu is held.
func (f *v1Front) session(id string) *v1Session {
	s := f.sessions[id]
	if s == nil {
		s = &v1Session{}
		f.sessions[id] = s
	}
	return s
}

// emit queues what send writes, or holds it while the client attaches to
// s; f.mu is held.
func (s *v1Session) emit(send func()) {
	if s.attaching {
		s.held = append(s.held, send)
		return
	}
	send()
}

// Update implements protocol.Client.
func (f *v1Front) Update(sessionID string, update acp.Update) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.session(sessionID)
	if m, ok := update.(*acp.Message); ok && s.loading && m.SessionUpdate == acp.KindUserMessage {
		for _, chunk := range v1UserChunks(m) {
			s.emit(func() { f.w.Notify(sessionID, chunk) })
		}
		return
	}
	s.emit(func() { f.w.Update(sessionID, update) })
	if st := acp.StateOf(update); st != nil {
		f.state(s, st)
	}
}

// UpdateTerminal implements protocol.Client.
func (f *v1Front) UpdateTerminal(sessionID string, u *acp.TerminalUpdate, out protocol.OutputSource, mode protocol.OutputMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.session(sessionID).emit(func() { f.w.UpdateTerminal(sessionID, u, out, mode) })
}

// Release implements protocol.Client. The turn under way here is answered
// end_turn: its end is reported to the connection that resumed the
// session.
func (f *v1Front) Release(sessionID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.session(sessionID)
	s.emit(func() { f.w.Release(sessionID) })
	if s.turn != nil {
		f.answer(s, s.turn, acp.StopEndTurn)
		s.turn = nil
	}
	s.busy, s.released = false, true
}

// RequestPermission implements protocol.Client: the request in v1's shape.
func (f *v1Front) RequestPermission(ctx context.Context, p *acp.PermissionRequest, done func(*acp.PermissionResponse, error)) {
	f.w.RequestPermission(ctx, p.SessionID, v1Permission(p), done)
}

// state follows a session's foreground state and ends the turn under way
// when the session reports idle with a stop reason; f.mu is held.
func (f *v1Front) state(s *v1Session, st *acp.StateUpdate) {
	if st.State != acp.StateIdle {
		s.busy = true
		return
	}
	s.busy = false
	if st.StopReason == "" || s.turn == nil {
		return
	}
	if st.StopReason == acp.StopError {
		f.fail(s, s.turn, st.Error)
	} else {
		f.answer(s, s.turn, st.StopReason)
	}
	s.turn = nil
}

// answer queues the response to a prompt; f.mu is held. A stop reason v1
// does not have (v2's custom ones) is end_turn.
func (f *v1Front) answer(s *v1Session, p *v1Prompt, stopReason string) {
	if p.answered {
		return
	}
	p.answered = true
	if !v1StopReasons[stopReason] {
		stopReason = acp.StopEndTurn
	}
	s.emit(func() { p.reply(&v1PromptResponse{StopReason: stopReason}, nil) })
}

// fail answers a prompt whose turn ended with v2's error stop reason: v1
// has none, and a failed turn is an error response with the failure (a
// -32603 one when the update gave none); f.mu is held.
func (f *v1Front) fail(s *v1Session, p *v1Prompt, failure *acp.Error) {
	if p.answered {
		return
	}
	p.answered = true
	if failure == nil {
		failure = &acp.Error{Code: acp.CodeInternalError, Message: "the prompt's turn failed"}
	}
	s.emit(func() { p.reply(nil, failure) })
}

// prompt serves session/prompt.
func (f *v1Front) prompt(ctx context.Context, p *acp.PromptRequest, reply protocol.Reply) {
	pr := &v1Prompt{reply: reply}
	f.agent.Prompt(ctx, f, p, func(_ any, err error) { f.inserted(p.SessionID, pr, err) })
}

// Acted implements protocol.PromptActed: the oldest prompt of the session that acts
// at once has done so, and is answered end_turn.
func (f *v1Front) Acted(sessionID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.session(sessionID)
	if len(s.acting) == 0 {
		return
	}
	pr := s.acting[0]
	s.acting = s.acting[1:]
	f.answer(s, pr, acp.StopEndTurn)
}

// inserted is the Agent's answer to a prompt: inserted, or refused.
func (f *v1Front) inserted(sessionID string, pr *v1Prompt, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		pr.answered = true
		var e *acp.Error
		if errors.As(err, &e) && e.Code == acp.CodeRequestCancelled {
			// Dropped by session/cancel or session/close before its turn,
			// or withdrawn: v1 wants the cancelled stop reason.
			pr.reply(&v1PromptResponse{StopReason: acp.StopCancelled}, nil)
			return
		}
		pr.reply(nil, err)
		return
	}
	s := f.session(sessionID)
	if s.released {
		f.answer(s, pr, acp.StopEndTurn)
		return
	}
	if s.busy {
		s.acting = append(s.acting, pr) // answered by Acted
		return
	}
	if s.turn != nil { // cannot happen: a turn ends before the next is inserted
		f.answer(s, s.turn, acp.StopEndTurn)
	}
	s.turn = pr
}

// newSession serves session/new; the commands follow the response.
func (f *v1Front) newSession(p *acp.NewSessionRequest) (any, func(), error) {
	p.McpServers = nil // v1's stdio servers, which the v1 front takes and ignores
	resp, err := f.agent.NewSession(f, p)
	if err != nil {
		return nil, nil, err
	}
	return &v1NewSessionResponse{SessionID: resp.SessionID, ConfigOptions: v1ConfigOptions(resp.ConfigOptions)},
		f.commands(resp.SessionID, resp.AvailableCommands), nil
}

// commands returns what announces a session's slash commands once the
// session is known to the client.
func (f *v1Front) commands(sessionID string, cmds []acp.AvailableCommand) func() {
	return func() { f.w.Notify(sessionID, v1Commands(cmds)) }
}

// resumeSession serves session/resume: what the Agent reports about the
// session meanwhile (its current tool calls and terminals) follows the
// response.
func (f *v1Front) resumeSession(p *acp.ResumeSessionRequest) (any, func(), error) {
	p.ReplayFrom = nil // not part of v1
	resp, s, err := f.attach(p, false)
	if err != nil {
		return nil, nil, err
	}
	cmds := f.commands(p.SessionID, resp.AvailableCommands)
	return &v1ResumeSessionResponse{ConfigOptions: v1ConfigOptions(resp.ConfigOptions)}, func() {
		cmds()
		f.endAttach(s)
	}, nil
}

// loadSession serves session/load: a resume with the retained history
// replayed (replayFrom start), which v1 wants before the response; the
// commands, then live updates, follow it.
func (f *v1Front) loadSession(p *acp.ResumeSessionRequest) (any, func(), error) {
	p.ReplayFrom = json.RawMessage(`{"type":"start"}`)
	resp, s, err := f.attach(p, true)
	if err != nil {
		return nil, nil, err
	}
	f.endAttach(s)
	return &v1ResumeSessionResponse{ConfigOptions: v1ConfigOptions(resp.ConfigOptions)}, f.commands(p.SessionID, resp.AvailableCommands), nil
}

// attach attaches the session to this connection with the Agent's
// ResumeSession, holding what the Agent reports meanwhile behind the
// attach mark (Wire.Attached); on success the caller sends it with
// endAttach. On an error nothing changes (see failAttach).
func (f *v1Front) attach(p *acp.ResumeSessionRequest, load bool) (*acp.ResumeSessionResponse, *v1Session, error) {
	f.mu.Lock()
	_, known := f.sessions[p.SessionID]
	s := f.session(p.SessionID)
	released := s.released
	s.attaching, s.loading, s.released = true, load, false
	s.held = append(s.held[:0], func() { f.w.Attached(p.SessionID) })
	f.mu.Unlock()
	attached := false
	defer func() {
		if !attached { // an error, or a panic
			f.failAttach(p.SessionID, s, known, released)
		}
	}()
	p.McpServers = nil // as in newSession
	resp, err := f.agent.ResumeSession(f, p)
	if err != nil {
		return nil, nil, err
	}
	attached = true
	return resp, s, nil
}

// endAttach stops holding what the Agent reports about s and queues what
// was held.
func (f *v1Front) endAttach(s *v1Session) {
	f.mu.Lock()
	defer f.mu.Unlock()
	held := s.held
	s.attaching, s.loading, s.held = false, false, nil
	for _, h := range held {
		h()
	}
}

// failAttach undoes attach after the Agent refused it: what was held (the
// session's own updates, if it reports here) goes out without the attach mark,
// the session reports where it did, and the front forgets a session it
// had not known.
func (f *v1Front) failAttach(id string, s *v1Session, known, released bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	held := s.held[1:]
	s.attaching, s.loading, s.held, s.released = false, false, nil, released
	for _, h := range held {
		h()
	}
	if !known && len(held) == 0 && f.sessions[id] == s {
		delete(f.sessions, id)
	}
}

// closeSession serves session/close.
func (f *v1Front) closeSession(p *acp.CloseSessionRequest, reply protocol.Reply) {
	f.agent.CloseSession(f, p, func(result any, err error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if s := f.sessions[p.SessionID]; s != nil && err == nil {
			if s.turn != nil { // cannot happen: close ends the turn first
				f.answer(s, s.turn, acp.StopCancelled)
			}
			delete(f.sessions, p.SessionID)
		}
		reply(result, err)
	})
}

// setConfigOption serves session/set_config_option. A v1 value without a
// type is a value id, v2's type "id".
func (f *v1Front) setConfigOption(p *acp.SetConfigOptionRequest) (any, error) {
	if p.Type == "" {
		p.Type = "id"
	}
	resp, err := f.agent.SetConfigOption(f, p)
	if err != nil {
		return nil, err
	}
	return &v1SetConfigOptionResponse{ConfigOptions: v1ConfigOptions(resp.ConfigOptions)}, nil
}

// Method implements protocol.Front.
func (f *v1Front) Method(name string) (protocol.Method, bool) {
	m, ok := f.methods[name]
	return m, ok
}

// requests are the methods of a v1 connection after initialize. The
// extension methods (terminal input, the look) are there when the Agent
// serves them, as in v2.
func (f *v1Front) requests() map[string]protocol.Method {
	m := map[string]protocol.Method{
		"session/new":    protocol.AnswerNow(f.newSession),
		"session/resume": protocol.AnswerNow(f.resumeSession),
		"session/load":   protocol.AnswerNow(f.loadSession),
		"session/list": protocol.AnswerNow(func(p *acp.ListSessionsRequest) (any, func(), error) {
			resp, err := f.agent.ListSessions(f, p)
			return resp, nil, err
		}),
		"session/set_config_option": protocol.AnswerNow(func(p *acp.SetConfigOptionRequest) (any, func(), error) {
			resp, err := f.setConfigOption(p)
			return resp, nil, err
		}),
		"session/close": protocol.AnswerLater(func(_ context.Context, p *acp.CloseSessionRequest, reply protocol.Reply) {
			f.closeSession(p, reply)
		}),
		"session/prompt": protocol.AnswerLater(f.prompt),
	}
	if ti, ok := f.agent.(protocol.TerminalInput); ok {
		m[acp.MethodWriteTerminal] = protocol.AnswerLater(func(_ context.Context, p *acp.WriteTerminalRequest, reply protocol.Reply) {
			ti.WriteTerminal(f, p, reply)
		})
		m[acp.MethodResizeTerminal] = protocol.AnswerLater(func(_ context.Context, p *acp.ResizeTerminalRequest, reply protocol.Reply) {
			ti.ResizeTerminal(f, p, reply)
		})
	}
	if l, ok := f.agent.(protocol.SessionLooker); ok {
		m[acp.MethodLookSession] = protocol.AnswerLater(func(_ context.Context, p *acp.LookSessionRequest, reply protocol.Reply) {
			l.LookSession(f, p, reply)
		})
		m[acp.MethodReadService] = protocol.AnswerLater(func(_ context.Context, p *acp.ReadServiceRequest, reply protocol.Reply) {
			l.ReadService(f, p, reply)
		})
	}
	return m
}

// Initialize implements protocol.Front: the Agent is initialized as for
// v2 and its answer reshaped; the connection speaks v1 with the v1
// encoding of what this client advertises.
func (f *v1Front) Initialize(params *json.RawMessage) (any, protocol.Encoding, error) {
	var p v1InitializeRequest
	if err := protocol.DecodeParams(params, &p); err != nil {
		return nil, nil, err
	}
	v2 := uint16(acp.ProtocolVersion)
	resp, err := f.agent.Initialize(f, &acp.InitializeRequest{ProtocolVersion: &v2, Info: p.ClientInfo})
	if err != nil {
		return nil, nil, err
	}
	info := resp.Info
	return &v1InitializeResponse{
		ProtocolVersion: ProtocolVersion,
		AgentCapabilities: v1AgentCapabilities{
			LoadSession:         true,
			SessionCapabilities: v1SessionCapabilities{List: &struct{}{}, Resume: &struct{}{}, Close: &struct{}{}},
		},
		AuthMethods: []struct{}{},
		AgentInfo:   &info,
		Meta:        resp.Meta,
	}, newACPV1(p.terminalOutput()), nil
}
