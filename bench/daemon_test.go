package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"shellagent/contain/containtest"
)

// The relay's cost: the shellagent binary on stdio against the same
// binary as shellagent --daemon, its relay and the daemon it starts, in
// the same run. Both are real processes driven through pipes by the
// benchmark's client; only the daemon path has the unix socket and the
// relay's copy in between.

// shellagentBinary builds cmd/shellagent (without the race detector) once
// per test binary and returns its path.
// removeBinary (TestMain's) removes it.
// SHELLAGENT_BENCH_BINARY names a binary to run instead (built beforehand
// from another commit, for an A/B run of two builds in one harness).
var shellagentBinary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("SHELLAGENT_BENCH_BINARY"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "shellagent-bench")
	if err != nil {
		return "", err
	}
	binaryDir = dir
	bin := filepath.Join(dir, "shellagent")
	out, err := exec.Command("go", "build", "-o", bin, "shellagent/cmd/shellagent").CombinedOutput()
	if err != nil {
		return "", &buildError{err, out}
	}
	return bin, nil
})

// binaryDir holds the binary once built.
var binaryDir string

// removeBinary removes the binary, if it was built.
func removeBinary() {
	if binaryDir != "" {
		os.RemoveAll(binaryDir) // Best effort: a temporary directory.
	}
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "go build cmd/shellagent: " + e.err.Error() + "\n" + string(e.out)
}

// binaryPair is the binary on stdio and as a relay, both started with the
// benchmark's settings: /bin/sh, no foreground timeout, the tests'
// containment.
type binaryPair struct {
	stdio, relay *agent
}

// startPair starts both, each with a client whose reader calls hook, and
// stops the daemon at the end.
func startPair(tb testing.TB, hook func() onData) binaryPair {
	tb.Helper()
	bin, err := shellagentBinary()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sab") // short: a socket path has at most 107 bytes
	if err != nil {
		tb.Fatal(err)
	}
	socket := filepath.Join(dir, "d.sock")
	state := tb.TempDir()
	tb.Cleanup(func() {
		stop := exec.Command(bin, "daemon", "stop", "--socket", socket)
		if out, err := stop.CombinedOutput(); err != nil {
			tb.Errorf("daemon stop: %v\n%s", err, out)
		}
		os.RemoveAll(dir)
	})
	args := []string{"--shell", "/bin/sh", "--foreground-timeout", "0", "--containment", string(containtest.Mode())}
	return binaryPair{
		stdio: startProcess(tb, bin, state, hook(), args...),
		relay: startProcess(tb, bin, state, hook(), append([]string{"--daemon", "--socket", socket}, args...)...),
	}
}

// startProcess starts the agent binary with args, its stdin and stdout on
// kernel pipes, the marker and XDG_STATE_HOME=state in its environment,
// and a client on its pipes; closing its stdin ends it (a relay's daemon
// runs on).
func startProcess(tb testing.TB, bin, state string, hook onData, args ...string) *agent {
	tb.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), marker, "XDG_STATE_HOME="+state)
	// Its log (a relay's "started the daemon") stays out of the
	// benchmark's output unless the benchmark fails.
	logf, err := os.Create(filepath.Join(tb.TempDir(), "stderr"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, logf
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { // after close, below
		if log, err := os.ReadFile(logf.Name()); err == nil && len(log) > 0 && tb.Failed() {
			tb.Logf("%s's log:\n%s", filepath.Base(bin), log)
		}
		logf.Close()
	})
	inR.Close()
	outW.Close()
	a := &agent{cmd: cmd, cwd: tb.TempDir(), inW: inW, outR: outR, launched: make(map[string]int)}
	a.c = newClient(inW, outR, hook)
	tb.Cleanup(func() { a.close(tb) })
	a.c.call(tb, "initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "bench", "version": "1"}})
	return a
}

// waitProcess waits for the agent process, whose stdin is closed, to exit
// and its client to read to the end.
func (a *agent) waitProcess(tb testing.TB) {
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			tb.Errorf("agent: %v", err)
		}
	case <-time.After(waitTimeout):
		tb.Error("agent: did not exit after stdin closed")
		a.cmd.Process.Kill()
		<-done
	}
	<-a.c.done
	a.outR.Close()
	if err := a.c.error(); err != nil {
		tb.Errorf("client: %v", err)
	}
}

// BenchmarkDaemon: each workload of BenchmarkThroughput runs once on
// stdio and once through the relay per iteration, interleaved; the timer
// covers the relay path. ratio_vs_stdio = stdio time / relay time
// (target ≥ 0.9).
func BenchmarkDaemon(b *testing.B) {
	for _, w := range throughputWorkloads() {
		b.Run("throughput/"+w.name, func(b *testing.B) {
			p := startPair(b, func() onData { return nil })
			stdioSid, relaySid := p.stdio.newSession(b), p.relay.newSession(b)
			// Warm both up first: the first run of a fresh agent (its
			// sweep of dead instances, a cold cgroup tree) is not what
			// the ratio is about, and the relay always runs first.
			for _, a := range []struct {
				c   *agent
				sid string
			}{{p.relay, relaySid}, {p.stdio, stdioSid}} {
				agentRun(b, a.c, a.sid, seq(100_000))
			}
			b.SetBytes(w.child)
			var relayT, stdioT time.Duration
			var dropped int64
			b.ResetTimer()
			for range b.N {
				_, _, dr, d := agentRun(b, p.relay, relaySid, w)
				b.StopTimer()
				relayT += d
				dropped += dr
				_, _, _, d = agentRun(b, p.stdio, stdioSid, w)
				stdioT += d
				b.StartTimer()
			}
			b.StopTimer()
			mb := float64(w.child) * float64(b.N) / 1e6
			b.ReportMetric(mb/relayT.Seconds(), "daemon_MB/s")
			b.ReportMetric(mb/stdioT.Seconds(), "stdio_MB/s")
			b.ReportMetric(stdioT.Seconds()/relayT.Seconds(), "ratio_vs_stdio")
			b.ReportMetric(float64(dropped)/float64(b.N), "dropped_B/op")
		})
	}
	b.Run("spawn", func(b *testing.B) {
		var firsts []*firstOutput
		p := startPair(b, func() onData {
			f := &firstOutput{at: make(map[string]time.Time)}
			firsts = append(firsts, f)
			return f.feed
		})
		stdioSid, relaySid := p.stdio.newSession(b), p.relay.newSession(b)
		relay := make([]time.Duration, 0, b.N)
		stdio := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			relay = append(relay, spawnAgent(b, p.relay, relaySid, firsts[1]))
			b.StopTimer()
			stdio = append(stdio, spawnAgent(b, p.stdio, stdioSid, firsts[0]))
			b.StartTimer()
		}
		b.StopTimer()
		p50, stdioP50 := percentile(relay, 50), percentile(stdio, 50)
		b.ReportMetric(micros(p50), "p50_us")
		b.ReportMetric(micros(percentile(relay, 99)), "p99_us")
		b.ReportMetric(micros(stdioP50), "stdio_p50_us")
		b.ReportMetric(micros(percentile(stdio, 99)), "stdio_p99_us")
		b.ReportMetric(micros(p50-stdioP50), "p50_over_stdio_us")
	})
}

// TestDaemonSmoke runs BenchmarkDaemon's bodies once at tiny sizes; see
// TestSmoke.
func TestDaemonSmoke(t *testing.T) {
	t.Parallel()
	p := startPair(t, func() onData { return nil })
	stdioSid, relaySid := p.stdio.newSession(t), p.relay.newSession(t)
	for _, w := range []workload{zeros(1_000_000), seq(20_000)} {
		_, _, dr, d := agentRun(t, p.relay, relaySid, w) // checks the byte count
		_, _, _, sd := agentRun(t, p.stdio, stdioSid, w)
		if dr != 0 || d <= 0 || sd <= 0 {
			t.Errorf("%s: %d bytes dropped; relay %v, stdio %v", w.name, dr, d, sd)
		}
	}
	var firsts []*firstOutput
	q := startPair(t, func() onData {
		f := &firstOutput{at: make(map[string]time.Time)}
		firsts = append(firsts, f)
		return f.feed
	})
	stdioSid, relaySid = q.stdio.newSession(t), q.relay.newSession(t)
	for range 3 {
		if d, sd := spawnAgent(t, q.relay, relaySid, firsts[1]), spawnAgent(t, q.stdio, stdioSid, firsts[0]); d <= 0 || sd <= 0 {
			t.Errorf("spawn through the relay %v, on stdio %v", d, sd)
		}
	}
}
