package bench

import (
	"fmt"
	"io"
	"testing"
	"time"
)

// TestSmoke runs the body of every benchmark once at tiny sizes and checks
// what can be checked without timing: every byte decoded, every exit seen,
// every figure sane. It never asserts a time.
func TestSmoke(t *testing.T) {
	t.Parallel()
	short := testing.Short()
	pick := func(full, cut int) int {
		if short {
			return cut
		}
		return full
	}

	t.Run("throughput", func(t *testing.T) {
		t.Parallel()
		a := startAgent(t, nil)
		sid := a.newSession(t)
		for _, w := range []workload{zeros(int64(pick(1_000_000, 100_000))), yes(int64(pick(200_000, 20_001))), seq(int64(pick(20_000, 2_000)))} {
			n, chunks, dropped, d := agentRun(t, a, sid, w) // checks the byte count
			rd := rawRun(t, w)                              // likewise
			if dropped != 0 {
				// Smoke sizes fit the 1 MiB ring: nothing can be lost.
				t.Errorf("%s: %d bytes dropped", w.name, dropped)
			}
			if chunks <= 0 || d <= 0 || rd <= 0 {
				t.Errorf("%s: %d bytes in %d chunks in %v; raw %v", w.name, n, chunks, d, rd)
			}
			t.Logf("%s: %d bytes, %d chunks; agent %v, raw %v", w.name, n, chunks, d, rd)
		}
	})

	t.Run("slow client", func(t *testing.T) {
		t.Parallel()
		// More than the 1 MiB ring, read at 4 MB/s: held, not dropped. The
		// sleep keeps the terminal live until the client has the last
		// byte, as in BenchmarkSlowClient.
		w := seq(int64(pick(300_000, 150_000)))
		w.line += "; sleep 1"
		a := startAgentReading(t, nil, func(r io.Reader) io.Reader { return newPacedReader(r, 4_000_000) })
		sid := a.newSession(t)
		if _, _, dropped, _ := agentRun(t, a, sid, w); dropped != 0 { // checks the byte count
			t.Errorf("%d bytes dropped for a client that reads", dropped)
		}
	})

	t.Run("latency", func(t *testing.T) {
		t.Parallel()
		n := pick(50, 10)
		var l latencies
		a := startAgent(t, func(_ *term, data []byte, now time.Time) { l.feed(data, now) })
		sid := a.newSession(t)
		agent := latencyAgent(t, a, sid, &l, n) // checks the sample count
		raw := latencyRaw(t, n)
		for _, s := range [][]time.Duration{agent, raw} {
			if p := percentile(s, 50); p < 0 || percentile(s, 99) < p {
				t.Errorf("bad percentiles: p50 %v, p99 %v", p, percentile(s, 99))
			}
		}
		t.Logf("p50 %v p99 %v; raw p50 %v p99 %v", percentile(agent, 50), percentile(agent, 99), percentile(raw, 50), percentile(raw, 99))
	})

	t.Run("keystroke", func(t *testing.T) {
		t.Parallel()
		n := pick(40, 10)
		client, raw := echoes(t, keystrokeClient(t), n), echoes(t, keystrokeRaw(t), n) // each letter echoed
		for _, s := range [][]time.Duration{client, raw} {
			if len(s) != n || percentile(s, 50) <= 0 || percentile(s, 99) < percentile(s, 50) {
				t.Errorf("implausible round trips: %v", s)
			}
		}
	})

	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		n := pick(5, 3)
		agent, raw := idleInChild(t, "agent", n), idleInChild(t, "raw", n)
		// RSS is reported, not checked: for a few terminals it moves by
		// whole pages and spans, either way.
		for _, c := range []idleCost{agent, raw} {
			if c.Heap <= 0 || c.Goroutines <= 0 {
				t.Errorf("implausible idle cost %+v", c)
			}
		}
		t.Logf("agent %+v; raw %+v", agent, raw)
	})

	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		a := startAgent(t, nil)
		sid := a.newSession(t)
		for _, settle := range []time.Duration{0, 5 * time.Millisecond} {
			if d := cancelAgent(t, a, sid, settle, func(bool) {}); d <= 0 {
				t.Errorf("cancel took %v", d)
			}
		}
		if d := cancelRaw(t, 0); d <= 0 {
			t.Errorf("raw cancel took %v", d)
		}
	})

	t.Run("control latency", func(t *testing.T) {
		t.Parallel()
		var pr *pacedReader
		a := startAgentReading(t, nil, func(r io.Reader) io.Reader {
			pr = newPacedReader(r, 1_000_000)
			return pr
		})
		sid := a.newSession(t)
		for _, line := range []string{"/bg " + sleepLine, "/bg " + writerLine} {
			s := controlLatency(t, a, pr, sid, line, 2, pick(5, 2), func(bool) {}) // checks every answer
			if p := percentile(s, 50); p <= 0 || percentile(s, 99) < p {
				t.Errorf("%s: bad percentiles: p50 %v, p99 %v", line, p, percentile(s, 99))
			}
			t.Logf("%s: p50 %v p99 %v", line, percentile(s, 50), percentile(s, 99))
		}
	})

	t.Run("writers", func(t *testing.T) {
		t.Parallel()
		k, window := pick(4, 2), time.Duration(pick(200, 100))*time.Millisecond
		a := startAgent(t, nil)
		sid := a.newSession(t)
		r := writersAgent(t, a, sid, k, window, func(bool) {})
		rr := writersRaw(t, k, window)
		for _, x := range []writersResult{r, rr} {
			if x.total() <= 0 || x.dropped < 0 || x.minShare() < 0 || x.minShare() > 1 || len(x.perTerm) != k {
				t.Errorf("implausible result %+v", x)
			}
		}
		t.Logf("agent %.1f MB/s, min share %.2f, %s dropped; raw %.1f MB/s, min share %.2f",
			r.mbps(), r.minShare(), fmt.Sprint(r.dropped), rr.mbps(), rr.minShare())
	})
}
