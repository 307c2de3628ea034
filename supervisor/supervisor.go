// Package supervisor owns shellagent's sessions and the work they run:
// foreground commands, background terminals, and the background list that
// every state_update carries.
//
// Sessions belong to the Supervisor, not to the connection that created
// them: a session reports to whichever protocol.Client last attached to it
// (session/new or session/resume), and its terminals keep running between
// attachments. How commands start is behind ptyio.Launcher.
//
// Files: supervisor.go (the protocol.Agent methods), session.go (a session
// and its prompts), terminal.go (a command's life), background.go (the
// background list and its ordering rules), prompt.go (the prompt language).
package supervisor

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"shellagent/protocol"
	"shellagent/ptyio"
)

// Config is how a Supervisor runs commands. Zero fields take the defaults
// in parentheses.
type Config struct {
	Shell             string        // shell to run commands with ($SHELL, else /bin/sh)
	ForegroundTimeout time.Duration // detach foreground commands after this; 0 = never
	KillGrace         time.Duration // SIGTERM to SIGKILL (3s)
	Scrollback        int           // ring buffer bytes per terminal (1 MiB)
	Size              ptyio.Size    // terminal size (120x40)
	Env               []string      // base environment (os.Environ())
	Launcher          ptyio.Launcher
	Version           string
	Log               *slog.Logger
	// SequentialIDs names sessions sess_1, sess_2, ... instead of random
	// ids, for reproducible transcripts.
	SequentialIDs bool
	// Containment names how the Launcher holds each terminal's processes
	// ("cgroup", "subreaper"), reported in the initialize response as
	// _meta.shellagent.containment; "" reports nothing.
	Containment string
}

// Defaults.
const (
	DefaultForegroundTimeout = 10 * time.Second
	DefaultKillGrace         = 3 * time.Second
	DefaultScrollback        = 1 << 20
)

func (c Config) withDefaults() Config {
	if c.Shell == "" {
		c.Shell = os.Getenv("SHELL")
	}
	if c.Shell == "" {
		c.Shell = "/bin/sh"
	}
	if c.KillGrace <= 0 {
		c.KillGrace = DefaultKillGrace
	}
	if c.Scrollback <= 0 {
		c.Scrollback = DefaultScrollback
	}
	if c.Size.Cols == 0 {
		c.Size.Cols = 120
	}
	if c.Size.Rows == 0 {
		c.Size.Rows = 40
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	if c.Launcher == nil {
		c.Launcher = ptyio.Local{}
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	return c
}

// Supervisor owns every session of the process and serves them as a
// protocol.Agent.
type Supervisor struct {
	cfg Config
	env []string // cfg.Env, with TERM set when it was not

	mu       sync.Mutex // guards sessions
	sessions map[string]*Session
	order    []string // session ids, oldest first
	created  int      // sessions created so far
}

var _ protocol.Agent = (*Supervisor)(nil)

// New returns a Supervisor with no sessions.
func New(cfg Config) *Supervisor {
	cfg = cfg.withDefaults()
	env := slices.Clone(cfg.Env)
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TERM=") }) {
		env = append(env, "TERM=xterm-256color")
	}
	return &Supervisor{cfg: cfg, env: env, sessions: make(map[string]*Session)}
}

// Initialize implements protocol.Agent.
func (sv *Supervisor) Initialize(_ protocol.Client, p *protocol.InitializeRequest) (*protocol.InitializeResponse, error) {
	if *p.ProtocolVersion < protocol.ProtocolVersion {
		return nil, &protocol.Error{
			Code:    protocol.CodeUnsupportedProto,
			Message: fmt.Sprintf("protocolVersion: %d is not supported; shellagent speaks %d", *p.ProtocolVersion, protocol.ProtocolVersion),
			Data:    map[string]any{"requested": *p.ProtocolVersion, "supported": []int{protocol.ProtocolVersion}},
		}
	}
	res := &protocol.InitializeResponse{
		ProtocolVersion: protocol.ProtocolVersion,
		Info:            protocol.Implementation{Name: "shellagent", Title: "shellagent", Version: sv.cfg.Version},
		Capabilities:    protocol.AgentCapabilities{Session: &struct{}{}},
	}
	if sv.cfg.Containment != "" {
		res.Meta = map[string]any{"shellagent": map[string]any{"containment": sv.cfg.Containment}}
	}
	return res, nil
}

// NewSession implements protocol.Agent.
func (sv *Supervisor) NewSession(c protocol.Client, p *protocol.NewSessionRequest) (*protocol.NewSessionResponse, error) {
	if err := checkDir("cwd", p.Cwd); err != nil {
		return nil, err
	}
	sv.mu.Lock()
	sv.created++
	id := "sess_" + rand.Text()
	if sv.cfg.SequentialIDs {
		id = "sess_" + strconv.Itoa(sv.created)
	}
	s := newSession(sv, id, p.Cwd, c)
	sv.sessions[s.id] = s
	sv.order = append(sv.order, s.id)
	sv.mu.Unlock()
	return &protocol.NewSessionResponse{
		SessionID:         s.id,
		ConfigOptions:     s.configOptions(),
		AvailableCommands: availableCommands(),
	}, nil
}

func checkDir(field, dir string) error {
	if !filepath.IsAbs(dir) {
		return protocol.InvalidParams("%s: must be an absolute path, got %q", field, dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return protocol.InvalidParams("%s: %v", field, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return protocol.InvalidParams("%s: %s is not a directory", field, dir)
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
	return nil, protocol.SessionNotFound(id)
}

func (sv *Supervisor) forget(id string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	delete(sv.sessions, id)
	sv.order = slices.DeleteFunc(sv.order, func(s string) bool { return s == id })
}

// ListSessions implements protocol.Agent.
func (sv *Supervisor) ListSessions(_ protocol.Client, p *protocol.ListSessionsRequest) (*protocol.ListSessionsResponse, error) {
	if p.Cursor != nil {
		return nil, protocol.InvalidParams("cursor: unknown cursor %q (shellagent lists every session on one page)", *p.Cursor)
	}
	sv.mu.Lock()
	list := make([]*Session, 0, len(sv.order))
	for _, id := range sv.order {
		list = append(list, sv.sessions[id])
	}
	sv.mu.Unlock()
	out := &protocol.ListSessionsResponse{Sessions: []protocol.SessionInfo{}}
	for _, s := range list {
		if p.Cwd != nil && filepath.Clean(*p.Cwd) != filepath.Clean(s.cwd) {
			continue
		}
		out.Sessions = append(out.Sessions, s.info())
	}
	return out, nil
}

// ResumeSession implements protocol.Agent.
func (sv *Supervisor) ResumeSession(c protocol.Client, p *protocol.ResumeSessionRequest) (*protocol.ResumeSessionResponse, error) {
	s, err := sv.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	return s.resume(c, p)
}

// CloseSession implements protocol.Agent. Closing an unknown session
// succeeds.
func (sv *Supervisor) CloseSession(_ protocol.Client, p *protocol.CloseSessionRequest, reply protocol.Reply) {
	s, err := sv.session(p.SessionID)
	if err != nil {
		reply(struct{}{}, nil)
		return
	}
	s.close(func() { reply(struct{}{}, nil) })
}

// Prompt implements protocol.Agent.
func (sv *Supervisor) Prompt(ctx context.Context, _ protocol.Client, p *protocol.PromptRequest, reply protocol.Reply) {
	s, err := sv.session(p.SessionID)
	if err != nil {
		reply(nil, err)
		return
	}
	s.prompt(ctx, p.Prompt, reply)
}

// CancelSession implements protocol.Agent.
func (sv *Supervisor) CancelSession(_ protocol.Client, p *protocol.CancelSessionNotification) {
	if s, err := sv.session(p.SessionID); err == nil {
		s.cancel()
	}
}

// CancelTerminal implements protocol.Agent.
func (sv *Supervisor) CancelTerminal(_ protocol.Client, p *protocol.CancelTerminalRequest) error {
	s, err := sv.session(p.SessionID)
	if err != nil {
		return err
	}
	return s.cancelTerminal(p.TerminalID)
}

// CancelToolCall implements protocol.Agent.
func (sv *Supervisor) CancelToolCall(_ protocol.Client, p *protocol.CancelToolCallRequest, reply protocol.Reply) {
	s, err := sv.session(p.SessionID)
	if err != nil {
		reply(nil, err)
		return
	}
	s.cancelToolCall(p.ToolCallID, reply)
}

// SetConfigOption implements protocol.Agent.
func (sv *Supervisor) SetConfigOption(_ protocol.Client, p *protocol.SetConfigOptionRequest) (*protocol.SetConfigOptionResponse, error) {
	s, err := sv.session(p.SessionID)
	if err != nil {
		return nil, err
	}
	return s.setConfigOption(p)
}

// shutdownSlack is how long Shutdown waits, beyond the longest kill grace
// in use, for the last processes to die and their final updates to go out.
const shutdownSlack = 700 * time.Millisecond

// Shutdown closes every session in parallel, as session/close does, each
// stopping its work with its own kill grace. It returns once all of them
// have reported their final updates, or with an error once ctx ends or the
// longest kill grace in use plus shutdownSlack has passed.
func (sv *Supervisor) Shutdown(ctx context.Context) error {
	sv.mu.Lock()
	list := make([]*Session, 0, len(sv.sessions))
	for _, s := range sv.sessions {
		list = append(list, s)
	}
	sv.mu.Unlock()
	grace := sv.cfg.KillGrace
	for _, s := range list {
		grace = max(grace, s.killGrace())
	}
	ctx, cancel := context.WithTimeout(ctx, grace+shutdownSlack)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range list {
		wg.Add(1)
		s.close(wg.Done)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shutdown: %w", ctx.Err())
	}
}

// killGrace is the kill grace the session's next stop uses.
func (s *Session) killGrace() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settings.killGrace
}
