package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/contain/containtest"
)

// The stack's costs (issue 25), through the daemon as shellagent up runs
// it: the daemon's memory with ten services of sleep, the time from a
// service's crash to its restarted run's first byte with backoff = 0, and
// the CPU the daemon spends per idle service per minute (process-compose
// #341 is what it is measured against).

// stackDaemon starts a relay (and with it a daemon) in a directory whose
// shellagent.toml is file, opens a session there, runs /up, and returns the
// relay's agent, the session, and the daemon's pid.
func stackDaemon(tb testing.TB, file string, hook onData) (*agent, string, int) {
	tb.Helper()
	bin, err := shellagentBinary()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sas") // short: a socket path has at most 107 bytes
	if err != nil {
		tb.Fatal(err)
	}
	socket := filepath.Join(dir, "d.sock")
	tb.Cleanup(func() {
		stop := exec.Command(bin, "daemon", "stop", "--socket", socket)
		if out, err := stop.CombinedOutput(); err != nil {
			tb.Errorf("daemon stop: %v\n%s", err, out)
		}
		os.RemoveAll(dir)
	})
	a := startProcess(tb, bin, tb.TempDir(), hook, "--daemon", "--socket", socket, "--shell", "/bin/sh", "--containment", string(containtest.Mode()), "--kill-grace", "200ms")
	if err := os.WriteFile(filepath.Join(a.cwd, "shellagent.toml"), []byte(file), 0o600); err != nil {
		tb.Fatal(err)
	}
	sid := a.newSession(tb)
	a.c.call(tb, "session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": "/up"}}})
	a.c.waitTurnsEnded(tb, sid, 1)
	return a, sid, daemonPid(tb, bin, socket)
}

// sleeps is a stack of n services that sleep.
func sleeps(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "[services.s%d]\ncommand = \"exec sleep 3600\"\n", i)
	}
	return b.String()
}

// procStat reads a process's resident memory (VmRSS) and its CPU time
// (utime + stime, in clock ticks of 10 ms).
func procStat(tb testing.TB, pid int) (rss int64, cpu time.Duration) {
	tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return rss, time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkStack: idle10 is the daemon with ten services of sleep up:
// its RSS (target under 20 MB, against pm2's 56 MB idle with three) and
// its CPU over a quiet stretch of 10 s per iteration, per service and
// minute. restart is, per iteration, one crash of a service that exits at
// once under restart = "always" and backoff = 0: the time from the
// client reading the run's exitStatus to its reading the next run's first
// byte.
func BenchmarkStack(b *testing.B) {
	b.Run("idle10", func(b *testing.B) {
		_, _, pid := stackDaemon(b, sleeps(10), nil)
		time.Sleep(time.Second) // what the start left settles
		_, before := procStat(b, pid)
		start := time.Now()
		b.ResetTimer()
		for range b.N {
			time.Sleep(10 * time.Second)
		}
		b.StopTimer()
		rss, after := procStat(b, pid)
		minutes := time.Since(start).Minutes()
		b.ReportMetric(float64(rss)/1e6, "daemon_rss_MB")
		b.ReportMetric(float64((after-before).Milliseconds())/10/minutes, "cpu_ms/service/min")
	})
	b.Run("restart", func(b *testing.B) {
		first := &firstOutput{at: make(map[string]time.Time)}
		a, sid, _ := stackDaemon(b, `
[services.crash]
command = "echo up; exit 1"
restart = "always"
backoff = 0
max_restarts = 1000000
`, first.feed)
		b.ResetTimer()
		gaps := make([]time.Duration, 0, b.N)
		for i := range b.N {
			_, exited := a.c.waitExit(b, sid, "term_"+strconv.Itoa(i+1))
			next := "term_" + strconv.Itoa(i+2)
			a.c.terminal(b, sid, next)
			a.c.wait(b, next+" first byte", func() bool { _, ok := first.get(next); return ok })
			at, _ := first.get(next)
			gaps = append(gaps, at.Sub(exited))
		}
		b.StopTimer()
		b.ReportMetric(micros(percentile(gaps, 50))/1000, "p50_ms")
		b.ReportMetric(micros(percentile(gaps, 99))/1000, "p99_ms")
	})
}

// TestStackSmoke runs BenchmarkStack's bodies once, briefly; see TestSmoke.
func TestStackSmoke(t *testing.T) {
	t.Parallel()
	_, _, pid := stackDaemon(t, sleeps(3), nil)
	if rss, _ := procStat(t, pid); rss <= 0 {
		t.Errorf("daemon RSS %d", rss)
	}
}
