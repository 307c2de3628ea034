package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The bodies of the benchmarks, shared by the benchmarks (full sizes) and
// TestSmoke (tiny sizes, checked for correctness only).

// A workload is a command whose output size is known exactly.
type workload struct {
	name  string
	line  string
	child int64 // bytes the command writes
	wire  int64 // bytes out of the PTY: each \n becomes \r\n
}

func zeros(n int64) workload {
	return workload{"zeros", fmt.Sprintf("head -c %d /dev/zero", n), n, n}
}

func yes(n int64) workload {
	return workload{"yes", fmt.Sprintf("yes | head -c %d", n), n, n + n/2} // "y\n" repeated
}

func seq(n int64) workload {
	var child int64
	for digits, lo := int64(1), int64(1); lo <= n; digits, lo = digits+1, lo*10 {
		hi := min(lo*10-1, n)
		child += (hi - lo + 1) * (digits + 1)
	}
	return workload{"seq", fmt.Sprintf("seq 1 %d", n), child, child + n}
}

// exitCode returns the exit code of an exitStatus, or -1 if a signal ended it.
func exitCode(exit json.RawMessage) int {
	var es struct {
		ExitCode *int   `json:"exitCode"`
		Signal   string `json:"signal"`
	}
	if json.Unmarshal(exit, &es) != nil || es.ExitCode == nil || es.Signal != "" {
		return -1
	}
	return *es.ExitCode
}

// agentRun runs w as a foreground command of sid and returns the bytes the
// client decoded, the chunk lines they came in, the bytes the agent
// reported dropped (overwritten in the ring before it could send them: the
// agent never blocks the child), and the time from just before the prompt
// was sent to the client's decoding of the exitStatus. Decoded and dropped
// bytes must add up to exactly what the child wrote.
func agentRun(tb testing.TB, a *agent, sid string, w workload) (n, chunks, dropped int64, d time.Duration) {
	tb.Helper()
	turns := a.c.turnsEnded(sid)
	start := time.Now()
	tid := a.prompt(tb, sid, w.line)
	exit, at := a.c.waitExit(tb, sid, tid)
	d = at.Sub(start)
	if exitCode(exit) != 0 {
		tb.Fatalf("%s: exitStatus %s", w.line, exit)
	}
	t := a.c.terminal(tb, sid, tid)
	a.c.waitTurnsEnded(tb, sid, turns+1) // the session is idle again
	if n, dropped := t.bytes.Load(), t.dropped.Load(); n+dropped != w.wire {
		tb.Fatalf("%s through the agent: the client decoded %d bytes and %d were reported dropped, want %d in all", w.line, n, dropped, w.wire)
	}
	return t.bytes.Load(), t.chunks.Load(), t.dropped.Load(), d
}

// rawRun runs w on a raw PTY and checks its size.
func rawRun(tb testing.TB, w workload) time.Duration {
	tb.Helper()
	n, d, err := rawDrain(w.line)
	if err != nil {
		tb.Fatalf("%s raw: %v", w.line, err)
	}
	if n != w.wire {
		tb.Fatalf("%s raw: read %d bytes, want %d", w.line, n, w.wire)
	}
	return d
}

// latencies parses ticker lines out of terminal output and records, for
// each, the time from the child's write to the moment the output was
// decoded. It is fed by one goroutine at a time.
type latencies struct {
	mu      sync.Mutex
	partial []byte
	samples []time.Duration
	bad     error
}

// feed takes the output of a ticker. Each sample is read against the
// monotonic clock now, not against the hook's time: the ticker's lines
// hold that clock (see monotonic).
func (l *latencies) feed(data []byte, _ time.Time) {
	at := monotonic()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range data {
		switch c {
		case '\r':
		case '\n':
			ts, err := strconv.ParseInt(string(l.partial), 10, 64)
			switch {
			case err == nil:
				l.samples = append(l.samples, time.Duration(at-ts))
			case l.bad == nil:
				l.bad = fmt.Errorf("bad ticker line %q", l.partial)
			}
			l.partial = l.partial[:0]
		default:
			l.partial = append(l.partial, c)
		}
	}
}

// take returns the samples so far and starts afresh.
func (l *latencies) take() ([]time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, err := l.samples, l.bad
	l.samples, l.bad, l.partial = nil, nil, l.partial[:0]
	return s, err
}

// tickerLine is the shell command that runs the latency child: this test
// binary, whose path the environment carries (see TestMain), so that the
// line needs no quoting.
func tickerLine(n int, interval time.Duration) string {
	return fmt.Sprintf(`%s=ticker %s=%d %s=%s exec "$%s"`, childEnv, ticksEnv, n, intervalEnv, interval, exeEnv)
}

// latencyInterval is the ticker's period.
const latencyInterval = 2 * time.Millisecond

// latencyAgent runs the ticker for n lines through the agent, whose client
// feeds l, and returns the samples.
func latencyAgent(tb testing.TB, a *agent, sid string, l *latencies, n int) []time.Duration {
	tb.Helper()
	tid := a.prompt(tb, sid, tickerLine(n, latencyInterval))
	exit, _ := a.c.waitExit(tb, sid, tid)
	if exitCode(exit) != 0 {
		tb.Fatalf("ticker: exitStatus %s", exit)
	}
	s, err := l.take()
	if err != nil {
		tb.Fatal(err)
	}
	if len(s) != n {
		tb.Fatalf("ticker through the agent: %d samples, want %d", len(s), n)
	}
	return s
}

// latencyRaw runs the ticker for n lines on a raw PTY read by a blocking
// loop and returns the samples.
func latencyRaw(tb testing.TB, n int) []time.Duration {
	tb.Helper()
	var l latencies
	t, err := startRaw(tickerLine(n, latencyInterval), blocking, l.feed)
	if err != nil {
		tb.Fatal(err)
	}
	if err := t.wait(); err != nil {
		tb.Fatal(err)
	}
	s, err := l.take()
	if err != nil {
		tb.Fatal(err)
	}
	if len(s) != n {
		tb.Fatalf("raw ticker: %d samples, want %d", len(s), n)
	}
	return s
}

// percentile returns the p-th percentile (0 < p <= 100) of s, nearest rank.
func percentile(s []time.Duration, p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	s = slices.Clone(s)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// cancelAgent starts "/bg sleep 300", waits until it is listed and then
// for settle more, and times terminal/cancel until the client decodes the
// exitStatus; then it waits for the terminal to leave the list. timed(true)
// and timed(false) bracket the timed part, so that a benchmark can stop its
// timer around the rest.
func cancelAgent(tb testing.TB, a *agent, sid string, settle time.Duration, timed func(bool)) time.Duration {
	tb.Helper()
	tid := a.prompt(tb, sid, "/bg "+sleepLine)
	a.c.waitListed(tb, sid, tid)
	time.Sleep(settle)
	timed(true)
	start := time.Now()
	a.cancel(tb, sid, tid)
	exit, at := a.c.waitExit(tb, sid, tid)
	timed(false)
	if !bytes.Contains(exit, []byte(`"SIGTERM"`)) {
		tb.Fatalf("cancelled sleep: exitStatus %s, want signal SIGTERM", exit)
	}
	a.c.waitBackgroundEmpty(tb, sid)
	return at.Sub(start)
}

// cancelRaw starts "sleep 300" on a raw PTY, waits for settle, and times
// SIGTERM to its process group until the reader sees EIO and the shell is
// reaped.
func cancelRaw(tb testing.TB, settle time.Duration) time.Duration {
	tb.Helper()
	t, err := startRaw(sleepLine, poller, nil)
	if err != nil {
		tb.Fatal(err)
	}
	time.Sleep(settle)
	start := time.Now()
	if err := syscall.Kill(-t.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		tb.Fatal(err)
	}
	err = t.wait()
	d := time.Since(start)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// writersResult is what k writers delivered in a window.
type writersResult struct {
	perTerm []int64 // bytes per terminal
	dropped int64   // bytes the agent reported dropped
	elapsed time.Duration
}

func (r writersResult) total() int64 {
	var sum int64
	for _, n := range r.perTerm {
		sum += n
	}
	return sum
}

// minShare is the slowest terminal's bytes over a fair share of the total.
func (r writersResult) minShare() float64 {
	total := r.total()
	if total == 0 {
		return 0
	}
	return float64(slices.Min(r.perTerm)) / (float64(total) / float64(len(r.perTerm)))
}

func (r writersResult) mbps() float64 {
	return float64(r.total()) / r.elapsed.Seconds() / 1e6
}

const writerLine = "yes"

// writersAgent starts k "/bg yes" terminals in sid, waits until all are
// listed, counts what the client decodes of each during window, then
// cancels them all and waits for their exits.
func writersAgent(tb testing.TB, a *agent, sid string, k int, window time.Duration, timed func(bool)) writersResult {
	tb.Helper()
	tids := make([]string, k)
	for i := range tids {
		tids[i] = a.prompt(tb, sid, "/bg "+writerLine)
	}
	a.c.waitListed(tb, sid, tids...)
	terms := make([]*term, k)
	for i, tid := range tids {
		terms[i] = a.c.terminal(tb, sid, tid)
	}
	counts := make([]*atomic.Int64, k)
	for i, t := range terms {
		counts[i] = &t.bytes
	}
	underWay(tb, "yes through the agent", counts)
	timed(true)
	bytes0, dropped0 := make([]int64, k), make([]int64, k)
	for i, t := range terms {
		bytes0[i], dropped0[i] = t.bytes.Load(), t.dropped.Load()
	}
	elapsed := countWindow(window, counts, bytes0)
	r := writersResult{perTerm: make([]int64, k), elapsed: elapsed}
	for i, t := range terms {
		r.perTerm[i] = t.bytes.Load() - bytes0[i]
		r.dropped += t.dropped.Load() - dropped0[i]
	}
	timed(false)
	for _, tid := range tids {
		a.cancel(tb, sid, tid)
	}
	for _, tid := range tids {
		if exit, _ := a.c.waitExit(tb, sid, tid); !bytes.Contains(exit, []byte(`"SIGTERM"`)) {
			tb.Fatalf("cancelled yes: exitStatus %s, want signal SIGTERM", exit)
		}
	}
	a.c.waitBackgroundEmpty(tb, sid)
	return r
}

// underWay waits until each writer's count of bytes is above zero, so
// that a window of ManyWriters measures writers under way on either side.
func underWay(tb testing.TB, what string, counts []*atomic.Int64) {
	tb.Helper()
	deadline := time.Now().Add(waitTimeout)
	for _, n := range counts {
		for n.Load() == 0 {
			if time.Now().After(deadline) {
				tb.Fatalf("%s: no output in %v", what, waitTimeout)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// writersRaw drains k raw PTYs running "yes" at once, each on its own
// blocking loop, and counts what each delivers during window.
func writersRaw(tb testing.TB, k int, window time.Duration) writersResult {
	tb.Helper()
	terms := make([]*rawTerm, 0, k)
	defer func() {
		for _, t := range terms {
			t.kill()
		}
		for _, t := range terms {
			if err := t.wait(); err != nil {
				tb.Error(err)
			}
		}
	}()
	for range k {
		t, err := startRaw(writerLine, blocking, nil)
		if err != nil {
			tb.Fatal(err)
		}
		terms = append(terms, t)
	}
	counts := make([]*atomic.Int64, k)
	for i, t := range terms {
		counts[i] = &t.bytes
	}
	underWay(tb, "raw yes", counts)
	before := make([]int64, k)
	for i, t := range terms {
		before[i] = t.bytes.Load()
	}
	elapsed := countWindow(window, counts, before)
	r := writersResult{perTerm: make([]int64, k), elapsed: elapsed}
	for i, t := range terms {
		r.perTerm[i] = t.bytes.Load() - before[i]
	}
	return r
}

// countWindow is the window of ManyWriters: it waits window, then on
// until one of the writers' counts has grown past its base (a loaded
// machine can starve them all through a short window: the smoke test's
// 200 ms), at most waitTimeout. It returns how long it waited, the time
// the rates are counted over.
func countWindow(window time.Duration, counts []*atomic.Int64, base []int64) time.Duration {
	start := time.Now()
	time.Sleep(window)
	for time.Since(start) < waitTimeout {
		for i, n := range counts {
			if n.Load() > base[i] {
				return time.Since(start)
			}
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// controlLatency starts k terminals running line in sid, waits until all
// are listed and then a second, so that busy ones have filled their rings
// and the client is behind, and times n session/list calls from the
// request to the client's decoding of the answer, one at a time. Then it
// lets the client read at full speed, cancels the terminals, waits for
// their exits, and slows the client down again. timed(true) and
// timed(false) bracket the calls.
func controlLatency(tb testing.TB, a *agent, pr *pacedReader, sid, line string, k, n int, timed func(bool)) []time.Duration {
	tb.Helper()
	tids := make([]string, k)
	for i := range tids {
		tids[i] = a.prompt(tb, sid, line)
	}
	a.c.waitListed(tb, sid, tids...)
	time.Sleep(time.Second)
	ds := make([]time.Duration, n)
	timed(true)
	for i := range ds {
		start := time.Now()
		a.c.call(tb, "session/list", map[string]any{})
		ds[i] = time.Since(start)
	}
	timed(false)
	rate := pr.rate.Swap(0)
	for _, tid := range tids {
		a.cancel(tb, sid, tid)
	}
	for _, tid := range tids {
		a.c.waitExit(tb, sid, tid)
	}
	a.c.waitBackgroundEmpty(tb, sid)
	pr.rate.Store(rate)
	return ds
}
