package bench

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"shellagent/contain/containtest"
)

// shutdownGrace is the kill grace of BenchmarkShutdown's agents, as in
// cmd/shellagent's TestNothingLeftBehind.
const shutdownGrace = 500 * time.Millisecond

// shutdownPromise is what SPEC promises for the exit after SIGTERM: the
// longest kill grace in use plus one second. The tests of cmd/shellagent
// assert three times it (testloop.Bound); this benchmark measures it.
const shutdownPromise = shutdownGrace + time.Second

// shutdownCases are BenchmarkShutdown's commands: one that ends at
// SIGTERM, one that ignores it.
var shutdownCases = []struct{ name, line string }{
	{"obeys", "echo ready; exec " + sleepLine},
	{"ignores", "trap '' TERM HUP; echo ready; exec " + sleepLine},
}

// BenchmarkShutdown: per iteration, the agent's binary is started with
// --kill-grace 500ms and one session running two background commands
// (untimed); the timer covers SIGTERM to the agent's exit. "obeys" runs
// commands that end at SIGTERM; "ignores" runs commands that ignore it,
// so that the agent waits out the grace and sends SIGKILL. exit_ms is the
// mean, p50_ms, p99_ms and max_ms the distribution; promise_ms is the
// kill grace plus one second, and max_vs_promise the slowest exit over it
// (the promise holds at 1 or less).
func BenchmarkShutdown(b *testing.B) {
	for _, bc := range shutdownCases {
		b.Run(bc.name, func(b *testing.B) {
			bin, err := shellagentBinary()
			if err != nil {
				b.Fatal(err)
			}
			ds := make([]time.Duration, 0, b.N)
			var sum time.Duration
			b.ResetTimer()
			b.StopTimer()
			for range b.N {
				d := shutdownAgent(b, bin, bc.line, func(on bool) {
					if on {
						b.StartTimer()
					} else {
						b.StopTimer()
					}
				})
				ds = append(ds, d)
				sum += d
			}
			worst := percentile(ds, 100)
			b.ReportMetric(millis(sum)/float64(b.N), "exit_ms")
			b.ReportMetric(millis(percentile(ds, 50)), "p50_ms")
			b.ReportMetric(millis(percentile(ds, 99)), "p99_ms")
			b.ReportMetric(millis(worst), "max_ms")
			b.ReportMetric(millis(shutdownPromise), "promise_ms")
			b.ReportMetric(float64(worst)/float64(shutdownPromise), "max_vs_promise")
		})
	}
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// shutdownAgent starts the binary with two background commands running
// line, sends it SIGTERM and returns how long it took to exit (status 0,
// or the benchmark fails). timed(true) and timed(false) bracket the timed
// part.
func shutdownAgent(tb testing.TB, bin, line string, timed func(bool)) time.Duration {
	tb.Helper()
	a := startProcess(tb, bin, tb.TempDir(), nil, "--shell", "/bin/sh", "--foreground-timeout", "0",
		"--kill-grace", shutdownGrace.String(), "--containment", string(containtest.Mode()))
	sid := a.newSession(tb)
	var terms []*term
	for range 2 {
		terms = append(terms, a.c.terminal(tb, sid, a.prompt(tb, sid, "/bg "+line)))
	}
	for _, t := range terms {
		waitOutput(tb, t)
	}
	a.mu.Lock()
	a.closed = true // waited for here, not by close
	a.mu.Unlock()
	exited := make(chan error, 1)
	timed(true)
	start := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatal(err)
	}
	go func() { exited <- a.cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(waitTimeout):
		a.cmd.Process.Kill()
		err = fmt.Errorf("no exit in %v after SIGTERM: %w", waitTimeout, <-exited)
	}
	d := time.Since(start)
	timed(false)
	if err != nil {
		tb.Fatalf("agent: %v", err)
	}
	a.inW.Close()
	<-a.c.done
	a.outR.Close()
	if err := a.c.error(); err != nil {
		tb.Fatalf("client: %v", err)
	}
	return d
}

// waitOutput waits until the client has decoded output of t: its command
// has set its signal dispositions.
func waitOutput(tb testing.TB, t *term) {
	tb.Helper()
	for deadline := time.Now().Add(waitTimeout); t.bytes.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: no output in %v", t.id, waitTimeout)
		}
	}
}

// TestShutdownSmoke runs BenchmarkShutdown's body once per case: the agent
// exits 0 after SIGTERM and its client reads to the end (TestMain then
// finds none of the commands left behind). It asserts no time.
func TestShutdownSmoke(t *testing.T) {
	t.Parallel()
	bin, err := shellagentBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, bc := range shutdownCases {
		d := shutdownAgent(t, bin, bc.line, func(bool) {})
		t.Logf("%s: exit %v after SIGTERM (promise %v)", bc.name, d, shutdownPromise)
	}
}
