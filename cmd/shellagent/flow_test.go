package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// Flow control end to end: the agent binary on pipes, read by the strict
// client through a reader that paces it.

// pacedReader reads from r at most rate bytes per second (0: no limit),
// and not at all while paused.
type pacedReader struct {
	r io.Reader

	mu     sync.Mutex
	rate   int
	paused bool
	cond   *sync.Cond
}

func newPacedReader(r io.Reader, rate int) *pacedReader {
	p := &pacedReader{r: r, rate: rate}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *pacedReader) Read(b []byte) (int, error) {
	p.mu.Lock()
	for p.paused {
		p.cond.Wait()
	}
	rate := p.rate
	p.mu.Unlock()
	if rate > 0 {
		b = b[:min(len(b), 4096)]
	}
	start := time.Now()
	n, err := p.r.Read(b)
	if rate > 0 {
		time.Sleep(time.Duration(n)*time.Second/time.Duration(rate) - time.Since(start))
	}
	return n, err
}

func (p *pacedReader) pause(on bool) {
	p.mu.Lock()
	p.paused = on
	p.mu.Unlock()
	p.cond.Broadcast()
}

// setRate changes the rate from the next read on.
func (p *pacedReader) setRate(rate int) {
	p.mu.Lock()
	p.rate = rate
	p.mu.Unlock()
}

// flowAgent is the agent binary read through a pacedReader.
type flowAgent struct {
	t      *testing.T
	c      *acptest.Client
	cmd    *exec.Cmd
	out    *pacedReader
	log    *syncBuffer // the agent's stderr
	cwd    string
	sid    string
	marker string
}

func startFlowAgent(t *testing.T, bin string, rate int, args ...string) *flowAgent {
	return startFlowAgentWith(t, flowOptions{bin: bin, rate: rate, args: args})
}

// flowOptions say how startFlowAgentWith starts the agent and reads it.
type flowOptions struct {
	bin  string
	rate int // see pacedReader
	// read, if not nil, is the client's reading of the agent's stdout,
	// under the pacedReader.
	read   func(io.Reader) io.Reader
	chunks bool // keep every chunk's data in the transcript
	args   []string
}

func startFlowAgentWith(t *testing.T, o flowOptions) *flowAgent {
	log := &syncBuffer{}
	cmd, stdin, stdout, marker := startPipedLogging(t, o.bin, append([]string{"--shell", "/bin/sh", "--foreground-timeout", "0"}, o.args...), io.MultiWriter(testWriter{t}, log))
	var r io.Reader = stdout
	if o.read != nil {
		r = o.read(stdout)
	}
	a := &flowAgent{t: t, cmd: cmd, out: newPacedReader(r, o.rate), log: log, cwd: t.TempDir(), marker: marker}
	opts := []acptest.Option{acptest.WithTimeout(90 * time.Second)}
	if !o.chunks {
		opts = append(opts, acptest.WithoutRaw())
	}
	a.c = acptest.New(t, a.out, stdin, opts...)
	t.Cleanup(a.stop)
	a.c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "t", "version": "1"}}, nil)
	var res struct {
		SessionID string `json:"sessionId"`
	}
	a.c.MustCall("session/new", map[string]any{"cwd": a.cwd}, &res)
	a.sid = res.SessionID
	return a
}

func (a *flowAgent) stop() {
	a.out.setRate(0)
	a.out.pause(false)
	a.c.Close()
	if err := a.cmd.Wait(); err != nil {
		a.t.Errorf("agent: %v", err)
	}
	a.c.Check()
	if left := acptest.ProcessesWith(a.marker); len(left) > 0 {
		a.t.Errorf("processes left behind: %v", left)
	}
}

func (a *flowAgent) prompt(line string) {
	a.c.Send("session/prompt", map[string]any{"sessionId": a.sid, "prompt": []map[string]string{{"type": "text", "text": line}}})
}

func seqOutput(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// everyByteLines is what checkEveryByte's command counts to: seq 1 700000
// writes about 5 MB, five times the default ring, in the quick run;
// seq 1 2700000 about 20 MB with SHELLAGENT_LONG=1.
func everyByteLines() int {
	if testloop.Enabled() {
		return 2_700_000
	}
	return 700_000
}

// The commands below sleep for a second after their output, so that their
// terminal is live until the client has taken the last byte: what becomes
// of output still in the PTY when the last process exits is ptyio's drain
// (tested there), not flow control.

func checkEveryByte(t *testing.T, a *flowAgent) {
	t.Helper()
	start := time.Now()
	lines := everyByteLines()
	a.prompt(fmt.Sprintf("seq 1 %d; sleep 1", lines))
	a.c.WaitFor("idle end_turn", func(m *acptest.Msg) bool { return m.State() == "idle" && m.StopReason() == "end_turn" })
	took := time.Since(start)
	got, want := a.c.Output(a.sid, "term_1"), seqOutput(lines)
	if n := a.c.Snapshots(a.sid, "term_1"); n > 0 {
		t.Errorf("%d replacement snapshots for a client that reads", n)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Errorf("client got %d bytes, want %d; first difference at %d", len(got), len(want), i)
	}
	t.Logf("%d MB in %v: %.1f MB/s", len(want)>>20, took.Round(time.Millisecond), float64(len(want))/took.Seconds()/1e6)
}

// readingStall is the stall timeout of the tests whose client reads: the
// strict client validates every message on its reading goroutine, and under
// -race on a loaded machine it was seen to take more than the default 1 s
// between two reads. The contract under test is that a client that keeps
// reading (pauses shorter than the stall timeout) loses nothing.
const readingStall = "5s"

// A client that reads at 2 MB/s gets every byte. Long
// (SHELLAGENT_LONG=1): the quick run checks every byte for a client that
// reads in TestPausingClientGetsEveryByte.
func TestThrottledClientGetsEveryByte(t *testing.T) {
	testloop.Long(t, "a client throttled to 2 MB/s")
	t.Parallel()
	checkEveryByte(t, startFlowAgent(t, binary, 2_000_000, "--stall-timeout", readingStall))
}

func TestPausingClientGetsEveryByte(t *testing.T) {
	t.Parallel()
	a := startFlowAgent(t, binary, 0, "--stall-timeout", readingStall)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			a.out.pause(true)
			time.Sleep(250 * time.Millisecond)
			a.out.pause(false)
		}
	}()
	defer func() { close(stop); <-done }()
	checkEveryByte(t, a)
}

// A client that stalls: the children are let go after the stall timeout,
// the agent's memory stays at the rings plus a constant, and once the
// client reads again every terminal's tail is right. The stall timeout is
// 2 s: the children block from when their ring is full, which takes a
// while after the client's last read on a loaded machine, until the
// timeout counted from that read; with 1 s they were seen to block for
// less than half of it.
func TestStalledClientBlocksChildrenOnlyForTheStallTimeout(t *testing.T) {
	testloop.Long(t, "three floods against a stalled client, 9 s")
	t.Parallel()
	const (
		terms      = 3
		scrollback = 256 << 10
		stall      = 2 * time.Second
	)
	a := startFlowAgent(t, plainBinary, 0, "--scrollback", "256KiB", "--stall-timeout", stall.String())
	for i := 1; i <= terms; i++ {
		// Each iteration logs the time and prints 20000 consecutive numbers
		// (about 150 KB), then rests 100 ms: a gap in the log well over that
		// is a write that blocked. The time is the boot clock's, which no
		// step of the wall clock moves (see
		// TestAFullRingHoldsUpOnlyItsOwnTerminal), read by the shell's own
		// read. The rest keeps the three floods (1.3 MB/s each, which fill
		// a ring in a fifth of a second) from taking both cores once the
		// agent lets go of the client; two processes started per iteration
		// (seq, sleep) keep what the loops cost in forks low.
		a.prompt(fmt.Sprintf(`/bg i=0; while [ ! -e stop ]; do read up idle < /proc/uptime; echo $up >> log%d; seq $((i*20000+1)) $((i*20000+20000)); i=$((i+1)); sleep 0.1; done`, i))
	}
	for i := 1; i <= terms; i++ {
		term := fmt.Sprintf("term_%d", i)
		a.c.WaitFor(term+" output", func(*acptest.Msg) bool { return len(a.c.Output(a.sid, term)) > scrollback })
	}
	base := rss(t, a.cmd.Process.Pid)
	a.out.pause(true)
	peak := base
	// The client stalls for longer than the bound on a child's block, so
	// that an agent that never lets go fails it.
	for end := time.Now().Add(testloop.Bound(stall) + 2*time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		peak = max(peak, rss(t, a.cmd.Process.Pid))
	}
	a.out.pause(false)
	// Let every terminal catch up, then stop them.
	for i := 1; i <= terms; i++ {
		term := fmt.Sprintf("term_%d", i)
		a.c.WaitFor(term+" replacement", func(*acptest.Msg) bool { return a.c.Snapshots(a.sid, term) > 0 })
	}
	time.Sleep(500 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(a.cwd, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= terms; i++ {
		term := fmt.Sprintf("term_%d", i)
		a.c.WaitFor(term+" exit", func(m *acptest.Msg) bool { return m.TerminalID() == term && m.ExitStatus() != nil })
		checkContiguousTail(t, term, a.c.Output(a.sid, term))
		gap := longestGap(t, filepath.Join(a.cwd, fmt.Sprintf("log%d", i)))
		t.Logf("%s: blocked at most %v", term, gap.Round(time.Millisecond))
		if gap > testloop.Bound(stall) {
			t.Errorf("%s: the child was blocked for %v, more than %v for a stall timeout of %v", term, gap, testloop.Bound(stall), stall)
		}
		if gap < stall/2 {
			t.Errorf("%s: the child was never blocked for long (%v): no backpressure before the stall timeout", term, gap)
		}
	}
	t.Logf("agent RSS %d KiB before the stall, peak %d KiB during it", base>>10, peak>>10)
	// The history (internal/journal) reads the rings and holds no output
	// of its own, not even while it compacts a session's file, which a
	// flood has compacted every few seconds (when a compaction held the
	// output, the agent's RSS grew by 8 MB here).
	if limit := base + terms*scrollback + 4<<20; peak > limit {
		t.Errorf("agent RSS peaked at %d KiB while the client stalled, want at most %d KiB (the rings plus 4 MiB)", peak>>10, limit>>10)
	}
}

// checkContiguousTail checks that out is a tail of consecutive numbers,
// one per line: a replacement of the output that lost nothing since.
func checkContiguousTail(t *testing.T, term string, out []byte) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(out), "\r\n"), "\r\n")
	if len(lines) < 1000 {
		t.Fatalf("%s: only %d lines", term, len(lines))
	}
	prev, err := strconv.Atoi(lines[1]) // lines[0] may be cut
	if err != nil {
		t.Fatalf("%s: line %q", term, lines[1])
	}
	for _, l := range lines[2:] {
		n, err := strconv.Atoi(l)
		if err != nil || n != prev+1 {
			t.Fatalf("%s: %q after %d: the tail is not contiguous", term, l, prev)
		}
		prev = n
	}
}

// longestGap returns the longest time between two lines of a log of the
// boot clock's readings (/proc/uptime: seconds, to the hundredth).
func longestGap(t *testing.T, path string) time.Duration {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var prev, gap time.Duration
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		at, err := bootTime(sc.Text())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if prev > 0 {
			gap = max(gap, at-prev)
		}
		prev = at
	}
	return gap
}

// rss reads VmRSS of a process, in bytes.
func rss(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// A client that stops reading while 20 "/every 1s" jobs fire for a minute:
// the agent's memory stays flat, because superseded control messages are
// coalesced, finished work the client never heard of is dropped beyond the
// retention limit, and retired terminals let go of their output. When the
// client reads again, what it gets still follows every ordering rule (the
// strict client checks the transcript when the test ends).
//
// A soak (a minute), run with SHELLAGENT_LONG=1; the quick run checks its
// rules one by one: protocol's TestStalledQueueIsBoundedByLiveItems and
// TestStalledClientGetsCoalescedUpdatesThatKeepTheRules, supervisor's
// TestRegistryRetiresExitedTerminals and
// TestPromptsThatCannotRunReachAPlateau.
func TestStalledClientWithRecurringJobsKeepsMemoryFlat(t *testing.T) {
	t.Parallel()
	testloop.Long(t, "a one-minute memory soak")
	const jobs = 20
	// The agent without the race detector, whose shadow memory would
	// dwarf what is measured.
	a := startFlowAgent(t, plainBinary, 0)
	for i := range jobs {
		a.c.MustCall("session/prompt", map[string]any{"sessionId": a.sid, "prompt": []map[string]string{{"type": "text", "text": fmt.Sprintf("/every 1s echo tick %d", i)}}}, nil)
	}
	a.c.WaitFor("a firing", func(m *acptest.Msg) bool { return m.TerminalID() != "" && m.ExitStatus() != nil })
	a.out.pause(true)
	pid := a.cmd.Process.Pid
	// The first seconds fill the queue up to what coalescing keeps and the
	// registry up to its retention limits; from then on nothing may grow.
	time.Sleep(15 * time.Second)
	settled, peak := rss(t, pid), 0
	for end := time.Now().Add(45 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		peak = max(peak, rss(t, pid))
	}
	a.out.pause(false)
	t.Logf("agent RSS %d KiB after 15 s of a stalled client, peak %d KiB over the next 45 s", settled>>10, peak>>10)
	if limit := settled + 4<<20; peak > limit {
		t.Errorf("agent RSS grew from %d KiB to %d KiB while the client stalled, want at most %d KiB", settled>>10, peak>>10, limit>>10)
	}
	// The client catches up: a later request is answered after everything
	// that was queued. The jobs end with their session first: on a loaded
	// machine this client (the race detector's, checking each message
	// against the schema) was seen to read fewer messages a second than
	// 20 jobs make, and then never caught up with them.
	a.c.MustCall("session/close", map[string]any{"sessionId": a.sid}, nil)
	a.c.MustCall("session/list", map[string]any{}, nil)
}

// SPEC, Output buffers: a terminal whose unsent bytes fill its ring has
// its PTY no longer read, and other terminals are not held up. yes floods
// a 64 KiB ring far faster than a client that takes 1 MB/s; a second
// terminal prints the time every 100 ms. Each of its lines reaches the
// client soon after it was printed, and neither terminal loses a byte:
// no replacement snapshot, which a ring overwritten while its PTY was
// still read would have needed.
//
// The time is the boot clock's (/proc/uptime, in hundredths of a second),
// which no step of the wall clock moves: on the CI's VM the wall clock
// once jumped 6.5 s within a run of 3.6 s, and one line printed by date
// read as 6.5 s late.
func TestAFullRingHoldsUpOnlyItsOwnTerminal(t *testing.T) {
	t.Parallel()
	const ticks = 20
	// Generous: the line itself takes ~100 ms at worst; 2 s was seen to
	// pass under load (three suites at once), the lines late by 3 to 5 s
	// without a trend, where a held-up terminal falls ever further behind.
	most := testloop.Bound(2 * time.Second)
	a := startFlowAgent(t, binary, 1_000_000, "--scrollback", "64KiB", "--stall-timeout", readingStall)
	a.prompt("/bg yes")
	a.c.WaitFor("term_1 floods", func(*acptest.Msg) bool { return len(a.c.Output(a.sid, "term_1")) > 256<<10 })
	a.prompt(fmt.Sprintf(`/bg i=0; while [ $i -lt %d ]; do cut -d' ' -f1 /proc/uptime; i=$((i+1)); sleep 0.1; done`, ticks))
	var latest time.Duration
	for n := 1; n <= ticks; n++ {
		var lines []string
		a.c.WaitFor(fmt.Sprintf("term_2 line %d", n), func(*acptest.Msg) bool {
			lines = strings.Split(string(a.c.Output(a.sid, "term_2")), "\r\n")
			return len(lines) > n
		})
		now := uptime(t)
		printed, err := bootTime(lines[n-1])
		if err != nil {
			t.Fatalf("term_2 line %d: %v", n, err)
		}
		late := now - printed
		if late > most {
			t.Errorf("term_2 line %d reached the client %v after it was printed, behind term_1's flood", n, late)
		}
		latest = max(latest, late)
	}
	t.Logf("term_2's lines reached the client at most %v after they were printed; term_1 sent %d bytes meanwhile", latest, len(a.c.Output(a.sid, "term_1")))
	a.c.WaitFor("term_2 exit", func(m *acptest.Msg) bool { return m.TerminalID() == "term_2" && m.ExitStatus() != nil })
	for _, term := range []string{"term_1", "term_2"} {
		if n := a.c.Snapshots(a.sid, term); n > 0 {
			t.Errorf("%s: %d replacement snapshots for a client that reads", term, n)
		}
	}
	if out := a.c.Output(a.sid, "term_1"); len(bytes.ReplaceAll(out, []byte("y\r\n"), nil)) > 2 {
		t.Errorf("term_1's output is not whole lines of y: %q…", out[:min(len(out), 64)])
	}
}

// uptime reads the boot clock, as /proc/uptime gives it to every process.
func uptime(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	f, _, _ := strings.Cut(string(b), " ")
	d, err := bootTime(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// bootTime reads one reading of the boot clock as /proc/uptime's first
// field writes it (seconds, to the hundredth), as the tests' commands
// print it with cut.
func bootTime(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("boot clock reading %q: %w", s, err)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// rawFloodClient speaks to the agent in raw JSON-RPC lines, keeping every
// byte it reads from stdout, in order: for the tests of what a client
// that stops reading in the middle of a line gets.
type rawFloodClient struct {
	t     *testing.T
	stdin io.Writer
	pipe  io.Reader     // stdout, kept in got as it is read
	r     *bufio.Reader // pipe's
	got   bytes.Buffer
}

// stallInFloods initializes a session in cwd over stdin and stdout, starts
// three commands that flood (/bg cat /dev/zero), reads until they are
// under way, and stops reading in the middle of a line once the pipe is
// full: the agent's writer waits in that line.
func stallInFloods(t *testing.T, stdin io.Writer, stdout io.Reader, cwd string) *rawFloodClient {
	t.Helper()
	c := &rawFloodClient{t: t, stdin: stdin}
	c.pipe = io.TeeReader(stdout, &c.got)
	c.r = bufio.NewReader(c.pipe)
	c.call(1, "initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "t", "version": "1"}})
	c.await(1)
	c.call(2, "session/new", map[string]any{"cwd": cwd})
	var res struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(c.await(2), &res); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c.call(3+i, "session/prompt", map[string]any{"sessionId": res.Result.SessionID, "prompt": []map[string]string{{"type": "text", "text": "/bg cat /dev/zero"}}})
	}
	for chunks := 0; chunks < 20; {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the floods: %v", err)
		}
		if bytes.Contains(line, []byte(`"terminal_output_chunk"`)) {
			chunks++
		}
	}
	if _, err := c.r.ReadBytes('"'); err != nil { // into the next line
		t.Fatal(err)
	}
	waitPipeFull(t, stdout)
	return c
}

func (c *rawFloodClient) call(id int, method string, params any) {
	c.t.Helper()
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		c.t.Fatal(err)
	}
}

// await reads lines until one has the given id, and returns it.
func (c *rawFloodClient) await(id int) []byte {
	c.t.Helper()
	want := fmt.Sprintf(`"id":%d,`, id)
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			c.t.Fatalf("awaiting the answer %d: %v (read %q)", id, err, line)
		}
		if bytes.Contains(line, []byte(want)) {
			return line
		}
	}
}

// readSlowly reads what c.r holds, then 256 bytes from the pipe every
// 100 ms, 15 times or until it ends: a client that takes the output
// slowly, as one kept off the CPU does, and frees less than a page of the
// pipe in all. It returns the longest time between two reads, which a
// loaded machine stretches.
func (c *rawFloodClient) readSlowly() (longest time.Duration) {
	c.t.Helper()
	if _, err := c.r.Discard(c.r.Buffered()); err != nil { // in got already
		c.t.Fatal(err)
	}
	p := make([]byte, 256)
	last := time.Now()
	for range 15 {
		time.Sleep(100 * time.Millisecond)
		_, err := io.ReadFull(c.pipe, p)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return longest
		}
		if err != nil {
			c.t.Fatalf("reading slowly: %v", err)
		}
		longest, last = max(longest, time.Since(last)), time.Now()
	}
	return longest
}

// takeOne reads one byte from the pipe, past what c.r holds, and returns
// when it had it: when the writer could first see that the client takes
// bytes again.
func (c *rawFloodClient) takeOne() time.Time {
	c.t.Helper()
	if _, err := c.r.Discard(c.r.Buffered()); err != nil { // in got already
		c.t.Fatal(err)
	}
	if _, err := io.ReadFull(c.pipe, make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		c.t.Fatalf("reading again: %v", err)
	}
	return time.Now()
}

// drainTimed reads the rest of stdout, to its end, from the pipe itself
// (what c.r held is in got already), noting when each read began and
// returned.
func (c *rawFloodClient) drainTimed() readSpans {
	c.t.Helper()
	if _, err := c.r.Discard(c.r.Buffered()); err != nil {
		c.t.Fatal(err)
	}
	var spans readSpans
	p := make([]byte, 64<<10)
	for {
		called := time.Now()
		_, err := c.pipe.Read(p)
		spans = append(spans, readSpan{called, time.Now()})
		if errors.Is(err, io.EOF) {
			return spans
		}
		if err != nil {
			c.t.Fatalf("draining: %v", err)
		}
	}
}

// A readSpan is when a read began and when it returned.
type readSpan struct{ called, returned time.Time }

// readSpans are a drain's reads, in order.
type readSpans []readSpan

// idleAt says whether at was in a pause of the reader's, between a read's
// return and the next read's start, and how long the reader had then been
// out of a read: a reader in a read at is waiting for the writer, one
// outside it has not come back for more. A loaded machine can keep the
// reader from coming back, for longer than a writer waits. The next start
// is taken 100 ms late, for the writer's log of the moment it gave up,
// written just after it.
func (s readSpans) idleAt(at time.Time) (time.Duration, bool) {
	for i, r := range s {
		if r.returned.After(at) {
			return 0, false
		}
		if i+1 == len(s) || s[i+1].called.Add(100*time.Millisecond).After(at) {
			return at.Sub(r.returned), true
		}
	}
	return 0, false
}

// drain reads the rest of stdout, to its end.
func (c *rawFloodClient) drain() {
	c.t.Helper()
	if _, err := io.Copy(io.Discard, c.r); err != nil {
		c.t.Fatal(err)
	}
}

// wholeLines reads the rest of stdout and checks that all that was read
// is whole JSON lines.
func (c *rawFloodClient) wholeLines() {
	c.t.Helper()
	c.drain()
	out := c.got.Bytes()
	if len(out) == 0 || out[len(out)-1] != '\n' {
		c.t.Errorf("stdout ends in the middle of a line: …%q", out[max(0, len(out)-80):])
	}
	lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	for i, line := range lines {
		if !json.Valid(line) {
			c.t.Errorf("line %d of %d is not JSON: %q…%q", i+1, len(lines), line[:min(len(line), 80)], line[max(0, len(line)-80):])
		}
	}
	c.t.Logf("%d lines, %d bytes", len(lines), len(out))
}

// waitPipeFull waits until the pipe that r reads holds unread bytes whose
// count has stopped growing: the writer waits for the reader.
func waitPipeFull(t *testing.T, r io.Reader) {
	t.Helper()
	sc, ok := r.(syscall.Conn)
	if !ok {
		t.Fatalf("%T is no pipe", r)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	unread := func() int {
		n := 0
		if err := raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unreadIoctl) }); err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatalf("counting the unread bytes of the pipe: %v", err)
		}
		return n
	}
	deadline := time.Now().Add(testloop.Wait)
	for last, same := -1, 0; same < 5; time.Sleep(20 * time.Millisecond) {
		if n := unread(); n > 0 && n == last {
			same++
		} else {
			last, same = n, 0
		}
		if time.Now().After(deadline) {
			t.Fatal("the pipe never filled")
		}
	}
}

// SPEC, stdout: one message per line, even at exit. A client that stops
// reading in the middle of a line while terminals flood, then reads again
// after the agent was asked to exit (past the time the agent gives its
// last messages, within its exit deadline), holds whole JSON lines only:
// the agent finishes the line under way and writes no other, never
// exiting between two pieces of a line.
func TestStalledReaderAtExitGetsWholeLines(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for seconds")
	}
	cmd, stdin, stdout, marker := startPiped(t, binary, []string{"--shell", "/bin/sh", "--foreground-timeout", "0", "--kill-grace", "5s"})
	c := stallInFloods(t, stdin, stdout, t.TempDir())
	stdin.Close() // the agent is asked to exit
	// The agent's last messages have 250 ms once its commands are gone
	// (cat goes at SIGHUP); its exit deadline is 5 s + 1 s from now. The
	// client reads again past those 250 ms.
	waitFor(t, "the floods to end", func() bool { return len(acptest.ProcessesWith(marker)) <= 1 }) // the agent
	time.Sleep(400 * time.Millisecond)
	c.wholeLines()
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent: %v", err)
	}
	if left := acptest.ProcessesWith(marker); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

func TestReadSpansIdleAt(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	reads := readSpans{{at(0), at(1)}, {at(2), at(3)}, {at(1500), at(1501)}, {at(1502), at(3000)}}
	for _, tc := range []struct {
		at   int
		idle time.Duration // -1: in a read
	}{
		{-5, -1},                        // before the first return
		{1, 0},                          // as the first returned
		{700, 697 * time.Millisecond},   // a pause: out since 3 ms
		{1550, 1547 * time.Millisecond}, // within the log's 100 ms of the next start
		{1700, -1},                      // in the last read, waiting
		{3100, 100 * time.Millisecond},  // after the end
	} {
		idle, out := reads.idleAt(at(tc.at))
		if !out {
			idle = -1
		}
		if idle != tc.idle {
			t.Errorf("idleAt(%d ms) = %v, want %v", tc.at, idle, tc.idle)
		}
	}
}
