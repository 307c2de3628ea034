package protocol

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"shellagent/acp"
	"shellagent/internal/testloop"
	"shellagent/outputbuf"
	"shellagent/protocol/acptest"
)

func TestMain(m *testing.M) {
	testloop.Parallel(8)
	goleak.VerifyTestMain(m)
}

// gate is an io.Writer that blocks while closed, like a client that stops
// reading.
type gate struct {
	mu   sync.Mutex
	open *sync.Cond
	shut bool
	buf  bytes.Buffer
}

func newGate() *gate {
	g := &gate{}
	g.open = sync.NewCond(&g.mu)
	return g
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.shut {
		g.open.Wait()
	}
	return g.buf.Write(p)
}

func (g *gate) size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Len()
}

func (g *gate) set(shut bool) {
	g.mu.Lock()
	g.shut = shut
	g.mu.Unlock()
	g.open.Broadcast()
}

// event is one decoded line: a terminal's bytes (chunk or snapshot) or
// another update.
type event struct {
	kind     string // update kind, or "response"
	terminal string
	data     []byte
	snapshot bool
	dropped  int64
	exit     bool
}

func decodeLines(t *testing.T, out []byte) []event {
	t.Helper()
	var evs []event
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Update struct {
					Kind       string          `json:"sessionUpdate"`
					TerminalID string          `json:"terminalId"`
					Data       string          `json:"data"`
					ExitStatus json.RawMessage `json:"exitStatus"`
					Output     *struct {
						Data string `json:"data"`
						Meta struct {
							Shellagent struct {
								DroppedBytes int64 `json:"droppedBytes"`
							} `json:"shellagent"`
						} `json:"_meta"`
					} `json:"output"`
				} `json:"update"`
			} `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Bytes(), err)
		}
		u := m.Params.Update
		ev := event{kind: u.Kind, terminal: u.TerminalID, exit: len(u.ExitStatus) > 0}
		if m.Method == "" {
			ev.kind = "response"
		}
		var err error
		switch {
		case u.Kind == acp.KindTerminalOutput:
			ev.data, err = base64.StdEncoding.DecodeString(u.Data)
		case u.Output != nil:
			ev.snapshot, ev.dropped = true, u.Output.Meta.Shellagent.DroppedBytes
			ev.data, err = base64.StdEncoding.DecodeString(u.Output.Data)
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// source is a ring as a terminal hands it to the writer.
type source struct{ *outputbuf.Ring }

func (s source) Follow(notify func()) OutputFollower { return s.Ring.Follow(notify) }

// announce queues the first update of term_1, which starts its stream.
func announce(w *writer, ring *outputbuf.Ring) {
	w.updateTerminal("s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1", Command: "x"}, source{ring}, StreamOutput)
}

// exit queues the exit update of a terminal, which ends its stream.
func exit(w *writer, id string, ring *outputbuf.Ring) {
	w.updateTerminal("s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: id, ExitStatus: &acp.ExitStatus{}}, source{ring}, StreamOutput)
}

func TestWriterSendsOutputBetweenAnnounceAndExit(t *testing.T) {
	g := newGate()
	w := newWriter(g, discardLog(), 0)
	ring := outputbuf.New(1 << 20)
	ring.Write([]byte("before announce|"))
	announce(w, ring)
	for i := range 100 {
		ring.Write([]byte(strings.Repeat(string(rune('a'+i%26)), 1000)))
	}
	ring.Write([]byte("|last"))
	exit(w, "term_1", ring)
	ring.Write([]byte("after exit")) // a writer that lost the race: must not be sent
	w.update("s", &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateIdle})
	w.close(time.Time{})

	evs := decodeLines(t, g.buf.Bytes())
	var got []byte
	phase := 0 // 0: before announce, 1: streaming, 2: after exit
	for _, ev := range evs {
		switch {
		case ev.kind == acp.KindTerminal && !ev.exit:
			phase = 1
		case ev.kind == acp.KindTerminal && ev.exit:
			phase = 2
		case ev.kind == acp.KindTerminalOutput:
			if phase != 1 {
				t.Fatalf("chunk in phase %d", phase)
			}
			got = append(got, ev.data...)
		}
	}
	// Everything written before the exit update was queued goes out before
	// it; a late write may go out too, but never after it.
	all, _ := ring.Snapshot()
	before := string(all[:len(all)-len("after exit")])
	if string(got) != before && string(got) != string(all) {
		t.Errorf("streamed %d bytes, want %d (%q…)", len(got), len(before), got[:min(len(got), 40)])
	}
	if evs[len(evs)-1].kind != acp.KindState {
		t.Errorf("last message %+v, want the state update", evs[len(evs)-1])
	}
}

// stalled reports whether w has found its peer stalled.
func (w *writer) isStalled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queue.stalled
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// replacements returns the replacements in evs and what the client holds
// of term_1 in the end.
func replay(evs []event) (replacements []event, got []byte) {
	for _, ev := range evs {
		switch {
		case ev.snapshot:
			replacements = append(replacements, ev)
			got = append([]byte(nil), ev.data...)
		case ev.kind == acp.KindTerminalOutput:
			got = append(got, ev.data...)
		}
	}
	return replacements, got
}

// A client that takes nothing for the stall timeout is let go of, and
// held again once it reads: it loses nothing more. The timeout is the
// default, a second: with less, the writer's goroutine kept off the CPU
// on a loaded machine (other tests flood in this process) looked like
// a client that stalled again.
func TestWriterLetsGoOfAStalledClientAndHoldsAgain(t *testing.T) {
	t.Parallel()
	const stall = DefaultStallTimeout
	g := newGate()
	w := newWriter(g, discardLog(), stall)
	ring := outputbuf.New(1000)
	announce(w, ring)
	g.set(true)             // the client stops reading
	ring.Write([]byte("x")) // the writer sends it and blocks
	start := time.Now()
	for i := range 10 {
		ring.Write(bytes.Repeat([]byte{byte('0' + i)}, 1000))
	}
	held := time.Since(start)
	if held < stall/2 {
		t.Errorf("the PTY writer went on after %v: the ring was not held", held)
	}
	if !w.isStalled() {
		t.Errorf("the PTY writer went on after %v, before the stall was noticed", held)
	}
	g.set(false)
	waitUntil(t, "the client reads again", func() bool { return !w.isStalled() })
	// Held again: a client that reads loses nothing more.
	for i := range 100 {
		ring.Write(bytes.Repeat([]byte{byte('a' + i%26)}, 1000))
	}
	exit(w, "term_1", ring)
	w.close(time.Time{})

	reps, got := replay(decodeLines(t, g.buf.Bytes()))
	if len(reps) != 1 || reps[0].dropped <= 0 {
		t.Fatalf("replacements %+v, want one with droppedBytes", reps)
	}
	all, _ := ring.Snapshot()
	if !bytes.HasSuffix(got, all) || len(got) != len(reps[0].data)+100*1000 {
		t.Errorf("client holds %d bytes, want the replacement (%d) and every byte since", len(got), len(reps[0].data))
	}
}

// throttled is a client that reads at a fixed rate.
type throttled struct {
	rate int // bytes per second
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (c *throttled) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), 4096)
		time.Sleep(time.Duration(k) * time.Second / time.Duration(c.rate))
		c.mu.Lock()
		c.buf.Write(p[:k])
		c.mu.Unlock()
		p = p[k:]
	}
	return n, nil
}

func (c *throttled) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i % 251)
	}
	return p
}

func TestWriterHoldsOutputForASlowClient(t *testing.T) {
	t.Parallel()
	c := &throttled{rate: 4 << 20}
	// A stall timeout no write of this client reaches, however loaded the
	// machine: at the default (a second), a write of many 4 KiB pieces,
	// each after a 1 ms sleep that the load stretched, took the client for
	// one that had stopped reading (a replacement, in a loaded run of the
	// tests).
	w := newWriter(c, discardLog(), 30*time.Second)
	ring := outputbuf.New(16 << 10)
	announce(w, ring)
	want := pattern(1 << 20)
	for p := want; len(p) > 0; p = p[min(len(p), 4096):] {
		ring.Write(p[:min(len(p), 4096)])
	}
	exit(w, "term_1", ring)
	w.close(time.Time{})
	reps, got := replay(decodeLines(t, c.bytes()))
	if len(reps) > 0 {
		t.Errorf("%d replacements for a client that reads", len(reps))
	}
	if !bytes.Equal(got, want) {
		t.Errorf("client got %d bytes, want %d exactly", len(got), len(want))
	}
}

func TestBackpressureHoldsUpNeitherControlMessagesNorOtherTerminals(t *testing.T) {
	t.Parallel()
	c := &throttled{rate: 2 << 20}
	w := newWriter(c, discardLog(), 0)
	a, b := outputbuf.New(64<<10), outputbuf.New(64<<10)
	announce(w, a)
	w.updateTerminal("s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_2"}, source{b}, StreamOutput)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 32 {
			a.Write(make([]byte, 64<<10)) // 2 MiB: a second of the client's time
		}
	}()
	time.Sleep(100 * time.Millisecond) // term_1 is held now
	w.send([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	b.Write([]byte("hello"))
	<-done
	exit(w, "term_1", a)
	exit(w, "term_2", b)
	w.close(time.Time{})
	evs := decodeLines(t, c.bytes())
	last, response, hello := -1, -1, -1
	for i, ev := range evs {
		switch {
		case ev.kind == "response":
			response = i
		case ev.kind == acp.KindTerminalOutput && ev.terminal == "term_2":
			hello = i
		case ev.kind == acp.KindTerminalOutput:
			last = i
		}
	}
	if response < 0 || hello < 0 || response > last || hello > last {
		t.Errorf("response at #%d, term_2's output at #%d, term_1's last chunk at #%d: held up by term_1", response, hello, last)
	}
}

func TestWriterResumeSnapshot(t *testing.T) {
	g := newGate()
	w := newWriter(g, discardLog(), 0)
	ring := outputbuf.New(1 << 10)
	ring.Write([]byte("hello "))
	w.updateTerminal("s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1"}, source{ring}, ReplaceOutput)
	ring.Write([]byte("world"))
	exit(w, "term_1", ring)
	w.close(time.Time{})
	var got []byte
	for _, ev := range decodeLines(t, g.buf.Bytes()) {
		if ev.snapshot {
			got = append([]byte(nil), ev.data...)
		} else if ev.kind == acp.KindTerminalOutput {
			got = append(got, ev.data...)
		}
	}
	if string(got) != "hello world" {
		t.Errorf("client holds %q", got)
	}
}

// An exited terminal replayed in one update: its output as a replacement,
// with the bytes its ring no longer holds counted, and its exitStatus.
func TestWriterReplacesAnExitedTerminal(t *testing.T) {
	for _, tt := range []struct {
		written int
		dropped int64
	}{{10, 0}, {100, 36}} {
		g := newGate()
		w := newWriter(g, discardLog(), 0)
		ring := outputbuf.New(64)
		for i := range tt.written {
			ring.Write([]byte(strconv.Itoa(i % 10)))
		}
		ring.Compact() // as a retained exited terminal's is
		code := 3
		w.updateTerminal("s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_1", Command: "x", ExitStatus: &acp.ExitStatus{ExitCode: &code}, Capabilities: acp.CapsNone}, source{ring}, ReplaceOutput)
		w.close(time.Time{})
		evs := decodeLines(t, g.buf.Bytes())
		if len(evs) != 1 || !evs[0].snapshot || !evs[0].exit || len(evs[0].data) != min(tt.written, 64) || evs[0].dropped != tt.dropped {
			t.Errorf("%d bytes written: %+v, want one update with the last %d bytes, %d dropped, and the exit", tt.written, evs, min(tt.written, 64), tt.dropped)
		}
	}
}

func TestWriterTakesTerminalsInTurn(t *testing.T) {
	g := newGate()
	w := newWriter(g, discardLog(), 0)
	a, b := outputbuf.New(4<<20), outputbuf.New(4<<20)
	announce(w, a)
	w.updateTerminal("s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: "term_2"}, source{b}, StreamOutput)
	g.set(true) // the writer blocks on its next write
	w.send([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	a.Write(bytes.Repeat([]byte("a"), 1<<20))
	b.Write(bytes.Repeat([]byte("b"), 1<<20))
	g.set(false)
	// Let the writer drain both before the exit updates, which flush a
	// terminal's output in one go.
	for g.size() < 2*(1<<20)*4/3 {
		time.Sleep(time.Millisecond)
	}
	exit(w, "term_1", a)
	exit(w, "term_2", b)
	w.close(time.Time{})
	// Chunks of the two terminals alternate instead of one draining first.
	var order []string
	for _, ev := range decodeLines(t, g.buf.Bytes()) {
		if ev.kind == acp.KindTerminalOutput && (len(order) == 0 || order[len(order)-1] != ev.terminal) {
			order = append(order, ev.terminal)
		}
	}
	if len(order) < 8 {
		t.Errorf("terminals were sent in runs %v; want them interleaved", order)
	}
}

func TestWriterCloseWhileATerminalStillWrites(t *testing.T) {
	g := newGate()
	w := newWriter(g, discardLog(), 0)
	ring := outputbuf.New(64 << 10)
	announce(w, ring)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				ring.Write([]byte("still writing\n"))
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan struct{})
	go func() { w.close(time.Time{}); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Error("Close did not return while a terminal kept writing")
	}
	close(stop)
	<-done
	<-closed
	if g.size() == 0 {
		t.Error("nothing was written")
	}
}

// valve passes writes on to w, and blocks them while shut.
type valve struct {
	g *gate
	w io.Writer
}

func (v valve) Write(p []byte) (int, error) {
	v.g.mu.Lock()
	for v.g.shut {
		v.g.open.Wait()
	}
	v.g.mu.Unlock()
	return v.w.Write(p)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestStalledClientGetsCoalescedUpdatesThatKeepTheRules(t *testing.T) {
	t.Parallel()
	outR, outW := io.Pipe()
	c := acptest.New(t, outR, nopCloser{io.Discard}, acptest.WithoutRaw())
	g := newGate()
	w := newWriter(valve{g, outW}, discardLog(), 50*time.Millisecond)
	job := []acp.BackgroundItem{{Type: "tool_call", ToolCallID: "job"}}
	w.update("s", &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "job", Title: "every 1s: date", Kind: "other", Status: acp.StatusPending, Capabilities: acp.CapsCancel})
	w.update("s", &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateIdle, StopReason: acp.StopEndTurn, Background: job})
	g.set(true)
	w.update("s", &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateIdle, Background: job})
	waitUntil(t, "the client stalls", w.isStalled)
	const firings = 1000
	for n := range firings {
		call, term := fmt.Sprintf("call_%d", n), fmt.Sprintf("term_%d", n)
		ring := outputbuf.New(1 << 10)
		w.update("s", &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateRunning, Background: job})
		w.update("s", &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: call, Title: "date", Kind: "execute", Status: acp.StatusInProgress, Content: []acp.ToolCallContent{acp.TerminalContent(term)}})
		w.updateTerminal("s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: term, Command: "date", Cwd: "/", Size: &acp.TerminalSize{Cols: 80, Rows: 24}, Capabilities: acp.CapsCancel}, source{ring}, StreamOutput)
		fmt.Fprintf(ring, "firing %d\r\n", n)
		code := 0
		w.updateTerminal("s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: term, ExitStatus: &acp.ExitStatus{ExitCode: &code}, Capabilities: acp.CapsNone}, source{ring}, StreamOutput)
		w.update("s", &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: call, Status: acp.StatusCompleted, RawOutput: map[string]int{"exitCode": 0}})
		w.update("s", &acp.StateUpdate{SessionUpdate: acp.KindState, State: acp.StateIdle, StopReason: acp.StopEndTurn, Background: job})
	}
	w.mu.Lock()
	queued := len(w.queue.entries) - w.queue.holes
	w.mu.Unlock()
	if limit := 4*keepFinished + 10; queued > limit {
		t.Errorf("%d firings for a stalled client queued %d messages, want at most %d", firings, queued, limit)
	}
	g.set(false)
	w.close(time.Time{})
	outW.Close()
	c.Close()
	c.Check()
	msgs := c.Transcript()
	last := msgs[len(msgs)-1]
	if last.Kind != acp.KindState || last.State() != acp.StateIdle || len(last.Background()) != 1 {
		t.Errorf("last message %s, want the latest state", last.Raw)
	}
	if got := string(c.Output("s", fmt.Sprintf("term_%d", firings-1))); got != fmt.Sprintf("firing %d\r\n", firings-1) {
		t.Errorf("last firing's output %q", got)
	}
}

// pipeClient reads a writer's pipe at rate bytes per second and notes
// when it reads each line.
type pipeClient struct {
	r    *os.File
	rate int

	mu    sync.Mutex
	lines []timedLine
	taken int64 // bytes read from the pipe
	ends  int64 // the end of the last line read in the stream
	done  chan struct{}
}

type timedLine struct {
	at   time.Time
	line []byte
	end  int64 // the line's end in the stream
}

func newPipeClient(t *testing.T, rate int) (*pipeClient, *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &pipeClient{r: r, rate: rate, done: make(chan struct{})}
	go c.read()
	return c, w
}

func (c *pipeClient) read() {
	defer close(c.done)
	defer c.r.Close()
	br := bufio.NewReaderSize(readerFunc(func(p []byte) (int, error) {
		start := time.Now()
		n, err := c.r.Read(p[:min(len(p), 4096)])
		c.mu.Lock()
		rate := c.rate
		c.taken += int64(n)
		c.mu.Unlock()
		if rate > 0 {
			time.Sleep(time.Duration(n)*time.Second/time.Duration(rate) - time.Since(start))
		}
		return n, err
	}), 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		c.mu.Lock()
		c.ends += int64(len(line))
		c.lines = append(c.lines, timedLine{time.Now(), line, c.ends})
		c.mu.Unlock()
	}
}

// unthrottle lets the client read as fast as it can.
func (c *pipeClient) unthrottle() {
	c.mu.Lock()
	c.rate = 0
	c.mu.Unlock()
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// flood writes to ring until stop is closed, held by the writer.
func flood(ring *outputbuf.Ring, stop <-chan struct{}, done *sync.WaitGroup) {
	done.Go(func() {
		p := bytes.Repeat([]byte("y\r\n"), 1365)
		for {
			select {
			case <-stop:
				return
			default:
				ring.Write(p)
			}
		}
	})
}

// Four terminals flood a client that reads 100 KB/s: a response waits
// for about a pipe's worth of the client's time, not for the terminals.
// What the writer controls is what goes ahead of a response that the
// client has not read from the pipe yet: at most the pipe (64 KiB; its
// time at 100 KB/s, 0.65 s) and the rest of the line under way. That is
// checked in bytes, which a loaded machine does not change; the time a
// response waits only against a generous bound, since a loaded machine
// slows the client.
func TestResponsesGoFirstAtEveryLine(t *testing.T) {
	t.Parallel()
	const rate = 100_000
	c, out := newPipeClient(t, rate)
	w := newWriter(out, discardLog(), time.Minute) // no stall: a client that reads
	stop := make(chan struct{})
	var floods sync.WaitGroup
	var rings []*outputbuf.Ring
	for i := range 4 {
		ring := outputbuf.New(1 << 20)
		rings = append(rings, ring)
		w.updateTerminal("s", &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: fmt.Sprintf("term_%d", i+1)}, source{ring}, StreamOutput)
		flood(ring, stop, &floods)
	}
	time.Sleep(time.Second) // the client falls behind
	const responses = 10
	sent := make([]time.Time, responses)
	taken := make([]int64, responses)
	for i := range responses {
		c.mu.Lock()
		sent[i], taken[i] = time.Now(), c.taken
		c.mu.Unlock()
		w.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"result":{}}`, i))
		time.Sleep(200 * time.Millisecond)
	}
	// Until every response has come, or 20 s after the last was sent.
	var took []time.Duration
	var ahead []int64
	longest := 0
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		took, ahead, longest = took[:0], ahead[:0], 0
		c.mu.Lock()
		for _, l := range c.lines {
			longest = max(longest, len(l.line))
			var id int
			if _, err := fmt.Sscanf(string(l.line), `{"jsonrpc":"2.0","id":%d,`, &id); err == nil {
				took = append(took, l.at.Sub(sent[id]))
				ahead = append(ahead, l.end-taken[id])
			}
		}
		c.mu.Unlock()
		if len(took) == responses || time.Now().After(end) {
			break
		}
	}
	close(stop)
	c.unthrottle()
	floods.Wait()
	for i, ring := range rings {
		exit(w, fmt.Sprintf("term_%d", i+1), ring)
	}
	w.close(time.Time{})
	out.Close()
	<-c.done
	t.Logf("responses answered in %v, with %v bytes ahead of each; longest line %d bytes", took, ahead, longest)
	if len(took) != responses {
		t.Fatalf("%d of %d responses within 20 s", len(took), responses)
	}
	for i := range took {
		if most := int64(64<<10 + longest + 100); ahead[i] > most {
			t.Errorf("response %d came %d bytes after the client's read when it was sent, want at most %d: a pipe and a line", i, ahead[i], most)
		}
		if took[i] > 10*time.Second {
			t.Errorf("response %d waited %v", i, took[i])
		}
	}
}

// A client that stalls while a terminal floods: the replacement it gets
// when it reads again counts exactly what was dropped and is no longer
// than a chunk; the rest of what the terminal holds follows as chunks.
func TestAReplacementIsNoWall(t *testing.T) {
	t.Parallel()
	g := newGate()
	w := newWriter(g, discardLog(), 100*time.Millisecond)
	ring := outputbuf.New(1 << 20)
	announce(w, ring)
	var want []byte
	next := func(n int) {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(len(want) + i)
		}
		want = append(want, p...)
		ring.Write(p)
	}
	next(1000)
	g.set(true)
	waitUntil(t, "the client stalls", func() bool { next(64 << 10); return w.isStalled() })
	for range 40 {
		next(64 << 10) // 2.5 MiB: the ring wraps
	}
	g.set(false)
	waitUntil(t, "the client reads again", func() bool { return !w.isStalled() })
	next(1000)
	exit(w, "term_1", ring)
	w.close(time.Time{})

	var got []byte
	var dropped, off int64 // off: the terminal's offset the client is at
	for _, ev := range decodeLines(t, g.buf.Bytes()) {
		switch {
		case ev.snapshot:
			if len(ev.data) > maxChunk {
				t.Errorf("a replacement of %d bytes", len(ev.data))
			}
			dropped += ev.dropped
			off += ev.dropped
			got = append(got[:0], ev.data...)
			if int64(len(want)) < off+int64(len(ev.data)) || !bytes.Equal(ev.data, want[off:off+int64(len(ev.data))]) {
				t.Fatalf("a replacement of %d bytes after %d dropped at offset %d is not the terminal's bytes there", len(ev.data), ev.dropped, off)
			}
			off += int64(len(ev.data))
		case ev.kind == acp.KindTerminalOutput:
			got = append(got, ev.data...)
			off += int64(len(ev.data))
		}
	}
	if dropped == 0 {
		t.Fatal("no replacement")
	}
	// droppedBytes counts exactly the bytes the client never got.
	if off != int64(len(want)) {
		t.Errorf("sent and dropped bytes add up to %d, the terminal wrote %d", off, len(want))
	}
	// What the client had before the first replacement, plus what was
	// dropped, plus what it holds now, is everything.
	if !bytes.HasSuffix(want, got) || len(got) < 1<<20 {
		t.Errorf("the client holds %d bytes that are not the terminal's last", len(got))
	}
}

// A client that reads nothing: past the bound of waiting replies,
// the backlog's wait waits until they are down to half of it.
func TestTheReplyBacklogHoldsInputWhileRepliesWait(t *testing.T) {
	t.Parallel()
	g := newGate()
	g.set(true)
	w := newWriter(g, discardLog(), 0)
	reply := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	for range maxWaitingReplies {
		w.replies.wait() // never waits under the bound
		w.send(reply)
	}
	returned := make(chan struct{})
	go func() { w.replies.wait(); close(returned) }()
	select {
	case <-returned:
		t.Fatal("wait returned with every reply waiting")
	case <-time.After(300 * time.Millisecond):
	}
	g.set(false)
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("wait still waits after the client read")
	}
	w.replies.mu.Lock()
	n := w.replies.n
	w.replies.mu.Unlock()
	if n > maxWaitingReplies/2 {
		t.Errorf("input read again with %d replies waiting", n)
	}
	w.close(time.Time{})
	if got := bytes.Count(g.buf.Bytes(), []byte("\n")); got != maxWaitingReplies {
		t.Errorf("%d replies written, want %d", got, maxWaitingReplies)
	}

	// Closing lets a waiting reader go.
	g = newGate()
	g.set(true)
	w = newWriter(g, discardLog(), 0)
	for range maxWaitingReplies {
		w.send(reply)
	}
	returned = make(chan struct{})
	go func() { w.replies.wait(); close(returned) }()
	closed := make(chan struct{})
	go func() { w.close(time.Time{}); close(closed) }()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("wait still waits after close")
	}
	g.set(false)
	<-closed
}

// The writer gathers output only while passes follow one another and
// left no whole chunk: output that comes now and then goes out at once,
// and a control message cuts a wait short. The gatherer's clock is the
// test's, which moves only when the test says: whether a pass waits does
// not depend on the machine's load (gatherWithin is 200 µs, less than a
// time slice).
func TestGathererWaitsOnlyInAFlood(t *testing.T) {
	now := time.Unix(1000, 0)
	g := gatherer{now: func() time.Time { return now }}
	wake := make(chan struct{}, 1)
	timed := func() (time.Duration, bool) {
		start := time.Now()
		woken := g.wait(wake)
		return time.Since(start), woken
	}
	if g.waits() {
		t.Error("the first pass waits")
	}
	g.passed(false)
	now = now.Add(gatherWithin / 2)
	if d, woken := timed(); woken || d < gatherFor {
		t.Errorf("a pass right after another waited %v (woken %v), want %v", d, woken, gatherFor)
	}
	g.passed(true)
	if g.waits() {
		t.Error("a pass right after one that left a whole chunk waits")
	}
	g.passed(false)
	wake <- struct{}{}
	if _, woken := timed(); !woken {
		t.Error("a wake did not cut the wait short")
	}
	if g.waits() {
		t.Error("the pass after a cut-short wait waits")
	}
	g.passed(false)
	now = now.Add(2 * gatherWithin)
	if g.waits() {
		t.Error("a pass long after the last waits")
	}
}

// A chunk costs a read of the ring into the writer's scratch buffer and
// the line appended to the batch: once the batch has grown to a chunk's
// line, nothing is allocated per chunk (protocol/v1front's
// TestAChunkAllocatesNothing checks the v1 encoding).
func TestAChunkAllocatesNothing(t *testing.T) {
	ring := outputbuf.New(1 << 20)
	ring.Write(pattern(1 << 20)) // every byte value, invalid UTF-8 included
	for _, tt := range []struct {
		name string
		enc  outputEncoder
	}{
		{"v2", acpV2{}.output("s", "term_1")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			scratch := make([]byte, maxChunk)
			var buf []byte
			off := int64(0)
			chunk := func() {
				n, start := ring.ReadAt(scratch, off%(1<<20))
				buf = tt.enc.appendChunk(buf[:0], scratch[:n])
				off = start + int64(n)
			}
			chunk()
			if len(buf) < maxChunk {
				t.Fatalf("a chunk of %d bytes became a line of %d", maxChunk, len(buf))
			}
			if allocs := testing.AllocsPerRun(50, chunk); allocs != 0 {
				t.Errorf("%.1f allocations per chunk, want 0", allocs)
			}
		})
	}
}

// panicking is an encoding whose session updates panic, as a fault in
// writing to one client would.
type panicking struct{ acpV2 }

func (panicking) appendUpdate([]byte, string, acp.Update) ([]byte, error) {
	panic("a fault in encoding an update")
}

// A panic in the writer's goroutine costs its connection only (issue 22:
// every goroutine that serves a peer recovers): the process lives on, the
// writer ends as for a client that went away (nothing more is written,
// its terminals are let go, so their commands are never held up), the
// panic is logged, and close returns.
func TestAWriterThatPanicsDropsOnlyItsConnection(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	var log syncBuffer
	w := newWriter(&out, slog.New(slog.NewTextHandler(&log, nil)), 0)
	ring := outputbuf.New(4 << 10)
	announce(w, ring)
	w.send([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), `"id":1`); {
		if time.Now().After(deadline) {
			t.Fatalf("the first reply was not written in 10 s: %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	w.setEncoding(panicking{})
	w.update("s", &acp.Message{SessionUpdate: acp.KindAgentMessage, MessageID: "m1", Content: []acp.ContentBlock{acp.TextBlock("boom")}})

	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for range 16 {
			ring.Write(make([]byte, 4<<10)) // four times the ring: held, this would block
		}
	}()
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output is held 10 s after its writer panicked")
	}
	w.send([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}`))
	closed := make(chan struct{})
	go func() { w.close(time.Time{}); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return after the writer panicked")
	}
	if strings.Contains(out.String(), `"id":2`) {
		t.Errorf("a reply was written after the panic: %q", out.String())
	}
	if !strings.Contains(log.String(), "a fault in encoding an update") {
		t.Errorf("the panic was not logged: %q", log.String())
	}
}

// syncBuffer is a bytes.Buffer that the writer's goroutine and the test
// may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
