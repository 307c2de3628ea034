package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/testloop"
	"shellagent/outputbuf"
	"shellagent/protocol"
	"shellagent/ptyio"
	"shellagent/supervisor/approval"
	"shellagent/supervisor/history"
	"shellagent/supervisor/settings"
)

// holdings is what a session holds, counted by walking everything its
// state can reach: the registry, the turn queue, the list and the history,
// and from each item the items it points to.
type holdings struct {
	terms, calls, rings, messages int
	output                        int // bytes the rings hold
}

func holdingsOf(st *state) holdings {
	terms := map[*terminal]bool{}
	calls := map[*toolCall]bool{}
	var addCall func(c *toolCall)
	addTerm := func(t *terminal) {
		if t != nil && !terms[t] {
			terms[t] = true
			addCall(t.call)
		}
	}
	addTurn := func(t *turn) {
		if t != nil {
			addCall(t.call)
			addTerm(t.term)
		}
	}
	addCall = func(c *toolCall) {
		if c == nil || calls[c] {
			return
		}
		calls[c] = true
		addTerm(c.term)
	}
	for _, t := range st.work.terminals {
		addTerm(t)
	}
	for _, t := range st.work.exited {
		addTerm(t)
	}
	for _, c := range st.work.calls {
		addCall(c)
	}
	for _, c := range st.work.finished {
		addCall(c)
	}
	addTurn(st.turns.fg)
	for _, t := range st.turns.held {
		addTurn(t)
	}
	for _, it := range st.list.items {
		addTerm(it.term)
		addCall(it.call)
	}
	var h holdings
	for _, e := range st.out.history.All() {
		addTerm(e.term)
		addCall(e.call)
		if e.msg != nil {
			h.messages++
		}
	}
	h.terms, h.calls = len(terms), len(calls)
	rings := map[*outputbuf.Ring]bool{}
	for t := range terms {
		if t.ring != nil && !rings[t.ring] {
			rings[t.ring] = true
			data, _ := t.ring.Snapshot()
			h.output += len(data)
		}
	}
	h.rings = len(rings)
	return h
}

// quietClient is a protocol.Client that nobody reads: it drops updates,
// refuses every permission request, and counts the idle state_updates.
type quietClient struct {
	mu    sync.Mutex
	idles int
	more  chan struct{} // closed and replaced at every idle
}

func newQuietClient() *quietClient { return &quietClient{more: make(chan struct{})} }

func (c *quietClient) Update(_ string, u acp.Update) {
	if su, ok := u.(*acp.StateUpdate); ok && su.State == acp.StateIdle && su.StopReason != "" {
		c.mu.Lock()
		c.idles++
		close(c.more)
		c.more = make(chan struct{})
		c.mu.Unlock()
	}
}

func (c *quietClient) Release(string) {}

func (c *quietClient) UpdateTerminal(string, *acp.TerminalUpdate, protocol.OutputSource, protocol.OutputMode) {
}

func (c *quietClient) RequestPermission(_ context.Context, _ *acp.PermissionRequest, done func(*acp.PermissionResponse, error)) {
	var resp acp.PermissionResponse
	resp.Outcome.Outcome, resp.Outcome.OptionID = "selected", approval.OptionReject
	go done(&resp, nil)
}

// waitIdles waits until n turns in all have ended.
func (c *quietClient) waitIdles(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		idles, more := c.idles, c.more
		c.mu.Unlock()
		if idles >= n {
			return
		}
		select {
		case <-more:
		case <-timeout:
			t.Fatalf("%d turns ended, want %d", idles, n)
		}
	}
}

// quietPrompt sends a prompt the way the connection does and returns the
// error it was answered with, once it is: the prompt is inserted at once
// (the session must be idle).
func quietPrompt(sv *Supervisor, c *quietClient, sid, line string) error {
	answered := make(chan error, 1)
	sv.Prompt(context.Background(), c, &acp.PromptRequest{SessionID: sid, Prompt: []acp.ContentBlock{acp.TextBlock(line)}},
		func(_ any, e error) { answered <- e })
	return <-answered
}

// TestRetentionHoldsOnlyRecentExitedTerminals: 1,500 commands of 64 KiB
// at a 64 KiB scrollback. What the session can reach keeps the output of
// the 100 most recent terminals and nothing more. The rule is the
// supervisor's: the quick run plays the commands with playedLauncher, and
// SHELLAGENT_LONG=1 runs them as real processes.
func TestRetentionHoldsOnlyRecentExitedTerminals(t *testing.T) {
	t.Parallel()
	const commands, size = 1500, 64 << 10
	var l ptyio.Launcher = playedLauncher{out: make([]byte, size)}
	if testloop.Enabled() {
		l = nil // the harness's: real processes
	}
	h := newHarness(t, Config{Scrollback: size, Launcher: l})
	c := newQuietClient()
	sid := must(h.sup.NewSession(c, &acp.NewSessionRequest{Cwd: h.cwd})).SessionID
	for i := range commands {
		if err := quietPrompt(h.sup, c, sid, "/bg head -c 65536 /dev/zero"); err != nil {
			t.Fatal(err)
		}
		// At most 16 at a time.
		h.await(sid, "fewer commands running", func(st *state) bool {
			return st.work.seq["term"] == i+1 && len(st.list.items) < 16
		})
	}
	h.await(sid, "every command exited", func(st *state) bool { return !st.work.live() })
	var got holdings
	h.inspect(sid, func(st *state) { got = holdingsOf(st) })
	if got.rings > maxExited || got.output > maxExited*size || got.terms > maxExited || got.calls > maxExited+maxFinished {
		t.Errorf("after %d commands the session holds %+v; want at most %d terminals and rings of %d bytes each", commands, got, maxExited, size)
	}
	if got.rings < maxExited || got.output < maxExited*size {
		t.Errorf("after %d commands the session holds %+v; want the output of the last %d", commands, got, maxExited)
	}
	// The oldest are forgotten: unknown, still -32602.
	answered := make(chan error, 1)
	h.sup.CancelTerminal(c, &acp.CancelTerminalRequest{SessionID: sid, TerminalID: "term_1"}, func(_ any, e error) { answered <- e })
	if err := <-answered; !isInvalidParams(err) {
		t.Errorf("cancel of a retired terminal: %v", err)
	}
}

func isInvalidParams(err error) bool {
	pe, ok := errors.AsType[*acp.Error](err)
	return ok && pe.Code == -32602
}

// playedLauncher plays every command, with no process: it writes out on
// a goroutine of its own, then exits with code. An eager one writes
// before Launch returns, as far as the terminal's ring lets it in 100 ms,
// as a flood does when the session's goroutine is slow to run on.
type playedLauncher struct {
	noProbes
	out   []byte
	code  int
	eager bool
}

func (l playedLauncher) Launch(_ ptyio.Command, out io.Writer, ev ptyio.Events) (ptyio.Process, error) {
	wrote := make(chan struct{})
	go func() {
		out.Write(l.out)
		close(wrote)
		ev.Exited(ptyio.Exit{Shell: ptyio.Status{Exited: true, Code: l.code}})
	}()
	if l.eager {
		select {
		case <-wrote:
		case <-time.After(100 * time.Millisecond):
		}
	}
	return playedProcess{}, nil
}

// playedProcess is a playedLauncher command: no process to list, signal or
// write to.
type playedProcess struct{}

func (playedProcess) Pid() int                            { return 0 }
func (playedProcess) Members() ([]ptyio.Member, error)    { return nil, nil }
func (playedProcess) Stop(time.Duration)                  {}
func (playedProcess) Write(p []byte) (int, error)         { return len(p), nil }
func (playedProcess) Resize(ptyio.Size) error             { return nil }
func (playedProcess) InputWait() (ptyio.InputWait, error) { return ptyio.InputWait{}, nil }

// failLauncher starts nothing.
type failLauncher struct{ noProbes }

func (failLauncher) Launch(ptyio.Command, io.Writer, ptyio.Events) (ptyio.Process, error) {
	return nil, errors.New("no such thing")
}

// noProbes is the Probe of a fake launcher: it runs nothing.
type noProbes struct{}

func (noProbes) Probe(context.Context, ptyio.Command) error { return errors.New("no probes here") }

// TestPromptsThatCannotRunReachAPlateau: 12,000 prompts that leave a tool
// call without a terminal (a failed launch, a refused permission, a
// cancelled or fired job). Such tool calls retire like terminals, so
// what the session holds, and the heap, stop growing.
//
// Not parallel: it measures the heap.
func TestPromptsThatCannotRunReachAPlateau(t *testing.T) {
	const prompts = 12000
	sv := New(Config{Launcher: failLauncher{}, Log: discardLog})
	c := newQuietClient()
	sid := must(sv.NewSession(c, &acp.NewSessionRequest{Cwd: t.TempDir()})).SessionID
	s := must(sv.live.get(sid))
	setAsk := func(v string) {
		must(sv.SetConfigOption(c, &acp.SetConfigOptionRequest{SessionID: sid, ConfigID: settings.OptPermission, Type: "id", Value: []byte(`"` + v + `"`)}))
	}
	idles := 0
	var heap [2]uint64
	for i := range prompts {
		switch i % 4 {
		case 0: // the launch fails
			quietPrompt(sv, c, sid, "true")
			idles++
		case 1: // permission refused
			setAsk("ask")
			quietPrompt(sv, c, sid, "true")
			setAsk("allow")
			idles++
		case 2: // a job cancelled
			quietPrompt(sv, c, sid, "/after 1h true")
			var id string
			s.doWait(func(st *state) { id = st.list.items[0].call.id })
			sv.CancelToolCall(c, &acp.CancelToolCallRequest{SessionID: sid, ToolCallID: id}, func(any, error) {})
			idles++
		case 3: // a job fired (its command then fails to launch)
			quietPrompt(sv, c, sid, "/after 1ns true")
			idles += 2
		}
		c.waitIdles(t, idles)
		if i+1 == prompts/2 || i+1 == prompts {
			heap[(i+1)/(prompts/2)-1] = heapInUse()
		}
	}
	var got holdings
	s.doWait(func(st *state) { got = holdingsOf(st) })
	if got.calls > maxFinished || got.terms > 0 || got.messages > history.MaxMessages {
		t.Errorf("after %d prompts the session holds %+v", prompts, got)
	}
	// Without retention the second half adds more than 1 KiB a prompt.
	if grew := int64(heap[1]) - int64(heap[0]); grew > 1<<20 {
		t.Errorf("the heap grew by %d bytes over the last %d prompts (from %d)", grew, prompts/2, heap[0])
	}
	if err := sv.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

var discardLog = slog.New(slog.DiscardHandler)

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestFailedLaunchIsForgotten: with the history on, a command that could
// not start is forgotten at once (a "forget" record for its terminal):
// the history's writer drops its tap of the terminal's output, which no
// exit or retirement would drop, so failed launches pile up nothing.
func TestFailedLaunchIsForgotten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := openJournal(t, dir)
	h := newHarness(t, Config{History: store, Launcher: failLauncher{}})
	sid := h.newSession()
	h.run(sid, "echo never")
	h.toolStatus(nil, sid, "call_1", acp.StatusFailed)
	if err := store.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sessions", sid+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	forgot := false
	for line := range strings.Lines(string(b)) {
		var rec struct{ T, Item string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.T == "forget" && rec.Item == "term_1" {
			forgot = true
		}
	}
	if !forgot {
		t.Errorf("the history has no forget record of term_1, the failed launch's terminal:\n%s", b)
	}
}
