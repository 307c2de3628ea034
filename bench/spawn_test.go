package bench

import (
	"sync"
	"testing"
	"time"
)

// spawnLine is the command BenchmarkSpawn starts.
const spawnLine = "echo spawned"

// firstOutput records when the client decoded each terminal's first byte.
type firstOutput struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (f *firstOutput) feed(t *term, _ []byte, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.at[t.id]; !ok {
		f.at[t.id] = now
	}
}

func (f *firstOutput) get(tid string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.at[tid]
	return at, ok
}

// BenchmarkSpawn: per iteration, a foreground prompt "echo spawned" is
// timed from sending the prompt to the client decoding the first byte of
// its output: the agent's whole start path (a group for the terminal,
// with a cgroup in cgroup mode, a PTY, the fork into the group, the shell's
// exec), then the first chunk. The end of the turn is waited for untimed.
// The physical baseline, interleaved: creack/pty's pty.Start of
// /bin/sh -c "echo spawned" until the first byte is read from the master.
func BenchmarkSpawn(b *testing.B) {
	first := &firstOutput{at: make(map[string]time.Time)}
	a := startAgent(b, first.feed)
	sid := a.newSession(b)
	agent := make([]time.Duration, 0, b.N)
	raw := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		agent = append(agent, spawnAgent(b, a, sid, first))
		b.StopTimer()
		raw = append(raw, spawnRaw(b))
		b.StartTimer()
	}
	b.StopTimer()
	reportSpawn(b, agent, raw)
}

// spawnAgent runs spawnLine as the session's next turn and returns the
// time from sending the prompt to the first decoded byte.
func spawnAgent(tb testing.TB, a *agent, sid string, first *firstOutput) time.Duration {
	tb.Helper()
	turns := a.c.turnsEnded(sid)
	settle()
	start := time.Now()
	tid := a.prompt(tb, sid, spawnLine)
	a.c.waitTurnsEnded(tb, sid, turns+1)
	at, ok := first.get(tid)
	if !ok {
		tb.Fatalf("%s: no output", tid)
	}
	return at.Sub(start)
}

// settle waits, untimed, before a spawn is timed, so that each starts on
// a machine at rest: what the spawn before it left to do (the agent's
// spares made ahead for the next launch, a shell's teardown) is not
// charged to the next spawn, the other side's in particular. A user's
// spawns come seconds apart, not back to back.
func settle() { time.Sleep(spawnSettle) }

// spawnSettle is how long settle waits.
const spawnSettle = 20 * time.Millisecond

// spawnRaw starts spawnLine with pty.Start and returns the time until the
// first byte is read.
func spawnRaw(tb testing.TB) time.Duration {
	tb.Helper()
	var once sync.Once
	var at time.Time
	settle()
	start := time.Now()
	t, err := startRaw(spawnLine, blocking, func(_ []byte, now time.Time) { once.Do(func() { at = now }) })
	if err != nil {
		tb.Fatal(err)
	}
	if err := t.wait(); err != nil {
		tb.Fatal(err)
	}
	if at.IsZero() {
		tb.Fatal("raw: no output")
	}
	return at.Sub(start)
}

// TestSpawnSmoke runs BenchmarkSpawn's body a few times; see TestSmoke.
func TestSpawnSmoke(t *testing.T) {
	t.Parallel()
	first := &firstOutput{at: make(map[string]time.Time)}
	a := startAgent(t, first.feed)
	sid := a.newSession(t)
	for range 3 {
		if d, rd := spawnAgent(t, a, sid, first), spawnRaw(t); d <= 0 || rd <= 0 {
			t.Errorf("spawn %v, raw %v", d, rd)
		}
	}
}

// reportSpawn reports the spawn times of the agent and of the raw
// baseline: their medians and 99th percentiles, and the agent's median
// over raw's.
func reportSpawn(b *testing.B, agent, raw []time.Duration) {
	p50, rawP50 := percentile(agent, 50), percentile(raw, 50)
	b.ReportMetric(micros(p50), "p50_us")
	b.ReportMetric(micros(percentile(agent, 99)), "p99_us")
	b.ReportMetric(micros(rawP50), "raw_p50_us")
	b.ReportMetric(micros(percentile(raw, 99)), "raw_p99_us")
	b.ReportMetric(micros(p50-rawP50), "p50_over_raw_us")
}
