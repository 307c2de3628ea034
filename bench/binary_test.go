package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The binary as users run it: the shellagent executable (built once per
// test binary, see shellagentBinary) as a process of its own with its
// default flags, driven through kernel pipes by the benchmark's client,
// against a raw drain of the same command in a process of its own (the
// drainer), interleaved in the same run.

// BenchmarkBinary runs each workload of BenchmarkThroughput through the
// binary on stdio and through the drainer, one of each per iteration,
// the order alternating; "daemon/..." does the same through
// shellagent --daemon (the relay and the daemon it starts, on a socket
// of the run's own). The timer covers the binary. agent_MB/s and
// raw_MB/s count the bytes the child writes; ratio_vs_raw = raw time /
// agent time. "spawn" and "daemon/spawn" time a prompt to the first
// decoded byte against pty.Start to the first byte read, in the drainer.
// load1 is the 1-minute load average at the end of the run. What a loaded
// machine hides least is what each path costs: agent_cpu_s/op and
// agent_switches/op (the agent process, through --daemon the daemon: user
// and system time, context switches of all its threads), the same per MB
// of the child's output with the switches split (agent_cpu_ms/MB,
// agent_vol_switches/MB: the agent waited; agent_invol_switches/MB: it was
// preempted, which the load drives), the drainer's own CPU per MB
// (raw_cpu_ms/MB: a raw reader's cost, to read the agent's against), the
// command's CPU on either side (child_cpu_ms/MB, raw_child_cpu_ms/MB) and
// client_cpu_s/op (this process during the agent's runs: the client's
// reader, mostly). The relay of --daemon hands the client's pipes to the
// daemon: it took no clock tick of CPU in a run of seq.
// SHELLAGENT_BENCH_BINARY runs a binary built beforehand instead of
// building cmd/shellagent: two builds, A/B, in one harness.
func BenchmarkBinary(b *testing.B) {
	for _, w := range throughputWorkloads() {
		b.Run(w.name, func(b *testing.B) { binaryThroughput(b, w, false, false) })
	}
	b.Run("spawn", func(b *testing.B) { binarySpawn(b, false) })
	// The client's share: zeros with a client that counts each chunk's
	// bytes from its length and decodes nothing (bench/HISTORY.md, round
	// 16). Compare its ratio_vs_raw with zeros' in the same run.
	b.Run("undecoded", func(b *testing.B) {
		w := zeros(200_000_000)
		b.Run(w.name, func(b *testing.B) { binaryThroughput(b, w, false, true) })
	})
	b.Run("daemon", func(b *testing.B) {
		for _, w := range throughputWorkloads() {
			b.Run(w.name, func(b *testing.B) { binaryThroughput(b, w, true, false) })
		}
		b.Run("spawn", func(b *testing.B) { binarySpawn(b, true) })
	})
}

// throughputWorkloads are the workloads of the throughput benchmarks.
func throughputWorkloads() []workload {
	return []workload{zeros(200_000_000), yes(20_000_000), seq(5_000_000)}
}

// binaryThroughput runs w through the binary (its daemon if daemon),
// interleaved with the drainer; undecoded: a client that decodes nothing.
func binaryThroughput(b *testing.B, w workload, daemon, undecoded bool) {
	a := startBinary(b, daemon, nil)
	a.c.undecoded.Store(undecoded)
	d := startDrainer(b)
	sid := a.newSession(b)
	// Warm both up: the first run of a fresh agent (a daemon's sweep of
	// dead instances, a cold cgroup tree) is not what the ratio is about.
	agentRun(b, a, sid, seq(100_000))
	d.drain(b, seq(100_000))
	b.SetBytes(w.child)
	var agentT, rawT, clientCPU, childCPU, rawChildCPU, rawCPU time.Duration
	var chunks, dropped int64
	pid := a.server // the agent's process: the binary, or its daemon
	cpu0 := processCPU(pid)
	vol0, invol0 := contextSwitches(pid)
	b.ResetTimer()
	drain := func() {
		pid := d.cmd.Process.Pid
		own, cpu := processCPU(pid), childrenCPU(pid)
		rawT += d.drain(b, w).total
		rawCPU += processCPU(pid) - own
		rawChildCPU += childrenCPU(pid) - cpu
	}
	for i := range b.N {
		if i%2 == 1 {
			b.StopTimer()
			drain()
			b.StartTimer()
		}
		self, children := processCPU(os.Getpid()), childrenCPU(pid)
		_, c, dr, t := agentRun(b, a, sid, w)
		b.StopTimer()
		clientCPU += processCPU(os.Getpid()) - self
		childCPU += childrenCPU(pid) - children
		agentT += t
		chunks += c
		dropped += dr
		if i%2 == 0 {
			drain()
		}
		b.StartTimer()
	}
	b.StopTimer()
	cpu := processCPU(pid) - cpu0
	vol, invol := contextSwitches(pid)
	vol, invol = vol-vol0, invol-invol0
	mb := float64(w.child) * float64(b.N) / 1e6
	b.ReportMetric(mb/agentT.Seconds(), "agent_MB/s")
	b.ReportMetric(mb/rawT.Seconds(), "raw_MB/s")
	b.ReportMetric(rawT.Seconds()/agentT.Seconds(), "ratio_vs_raw")
	b.ReportMetric(float64(chunks)/float64(b.N), "chunks/op")
	b.ReportMetric(float64(dropped)/float64(b.N), "dropped_B/op")
	b.ReportMetric(clientCPU.Seconds()/float64(b.N), "client_cpu_s/op")
	// The command's own CPU per MB, on either side: its writes into the
	// PTY cost more when the readers and the kernel's flush work wake
	// more often beside it (bench/HISTORY.md, round 11).
	b.ReportMetric(float64(childCPU.Milliseconds())/mb, "child_cpu_ms/MB")
	b.ReportMetric(float64(rawChildCPU.Milliseconds())/mb, "raw_child_cpu_ms/MB")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "agent_cpu_s/op")
	b.ReportMetric(float64(vol+invol)/float64(b.N), "agent_switches/op")
	// Per MB of the child's output, what the load inflates least: CPU,
	// and the switches the agent asks for (it waits) apart from those
	// the scheduler imposes (preemption, which the load drives).
	b.ReportMetric(float64(cpu.Milliseconds())/mb, "agent_cpu_ms/MB")
	b.ReportMetric(float64(rawCPU.Milliseconds())/mb, "raw_cpu_ms/MB")
	b.ReportMetric(float64(vol)/mb, "agent_vol_switches/MB")
	b.ReportMetric(float64(invol)/mb, "agent_invol_switches/MB")
	b.ReportMetric(load1(), "load1")
}

// spawnWork is spawnLine as a workload, for the drainer.
var spawnWork = workload{name: "spawn", line: spawnLine, wire: int64(len("spawned\r\n"))}

func binarySpawn(b *testing.B, daemon bool) {
	first := &firstOutput{at: make(map[string]time.Time)}
	a := startBinary(b, daemon, first.feed)
	d := startDrainer(b)
	sid := a.newSession(b)
	spawnAgent(b, a, sid, first) // warm up, as binaryThroughput does
	d.drain(b, spawnWork)
	agent := make([]time.Duration, 0, b.N)
	raw := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		agent = append(agent, spawnAgent(b, a, sid, first))
		b.StopTimer()
		raw = append(raw, d.spawn(b))
		b.StartTimer()
	}
	b.StopTimer()
	reportSpawn(b, agent, raw)
	b.ReportMetric(load1(), "load1")
}

// startBinary starts the shellagent binary with its default flags but for
// /bin/sh as the shell (the drainer's) and no foreground timeout, on
// stdio or, with daemon, as a relay to a daemon of its own (stopped at
// the end); its client's reader calls hook.
func startBinary(tb testing.TB, daemon bool, hook onData) *agent {
	tb.Helper()
	bin, err := shellagentBinary()
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"--shell", "/bin/sh", "--foreground-timeout", "0"}
	state := tb.TempDir()
	socket := ""
	if daemon {
		dir, err := os.MkdirTemp("", "sab") // short: a socket path has at most 107 bytes
		if err != nil {
			tb.Fatal(err)
		}
		socket = filepath.Join(dir, "d.sock")
		tb.Cleanup(func() { stopDaemon(tb, bin, socket, state); os.RemoveAll(dir) })
		args = append([]string{"--daemon", "--socket", socket}, args...)
	}
	a := startProcess(tb, bin, state, hook, args...)
	a.server = a.cmd.Process.Pid
	if daemon {
		a.server = daemonPid(tb, bin, socket)
	}
	return a
}

// daemonPid returns the pid of the daemon on socket, as its status says.
func daemonPid(tb testing.TB, bin, socket string) int {
	tb.Helper()
	out, err := exec.Command(bin, "daemon", "status", "--socket", socket).Output()
	if err != nil {
		tb.Fatalf("daemon status: %v", err)
	}
	var pid int
	if _, err := fmt.Sscanf(string(out), "daemon pid %d,", &pid); err != nil {
		tb.Fatalf("daemon status: no pid in %q: %v", out, err)
	}
	return pid
}

// stopDaemon stops the daemon on socket, whose log is under state; it
// shows the log if the benchmark failed.
func stopDaemon(tb testing.TB, bin, socket, state string) {
	out, err := exec.Command(bin, "daemon", "stop", "--socket", socket).CombinedOutput()
	if err != nil {
		tb.Errorf("daemon stop: %v\n%s", err, out)
	}
	if tb.Failed() {
		if log, err := os.ReadFile(filepath.Join(state, "shellagent", "daemon.log")); err == nil {
			tb.Logf("the daemon's log:\n%s", log)
		}
	}
}

// processCPU returns the user and system time pid has used, or 0 if it
// cannot be read.
func processCPU(pid int) time.Duration { return statTime(pid, 11) }

// childrenCPU returns the user and system time of the children pid has
// waited for, and of theirs that they waited for, or 0 if it cannot be
// read: the commands an agent or the drainer has run.
func childrenCPU(pid int) time.Duration { return statTime(pid, 13) }

// statTime returns the sum of the two clock-tick counts of
// /proc/pid/stat from the i-th field after the command's name (11:
// utime and stime; 13: cutime and cstime), or 0 if it cannot be read.
func statTime(pid, i int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < i+2 {
		return 0
	}
	a, _ := strconv.ParseInt(f[i], 10, 64)
	c, _ := strconv.ParseInt(f[i+1], 10, 64)
	return time.Duration(a+c) * 10 * time.Millisecond // USER_HZ = 100
}

// contextSwitches returns the context switches, voluntary or not, of
// every thread of pid so far, or 0 if they cannot be read.
func contextSwitches(pid int) (voluntary, involuntary int64) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, 0
	}
	for _, t := range tasks {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue // a thread that ended
		}
		for line := range strings.Lines(string(status)) {
			name, v, _ := strings.Cut(line, ":")
			k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch name {
			case "voluntary_ctxt_switches":
				voluntary += k
			case "nonvoluntary_ctxt_switches":
				involuntary += k
			}
		}
	}
	return voluntary, involuntary
}

// load1 returns the 1-minute load average, or -1 if it cannot be read.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		return -1
	}
	return f
}

// A drainer is the raw baseline in a process of its own: the test binary
// re-run with childEnv=drainer, which drains each line it reads on stdin
// on a raw PTY (startRaw, blocking) and answers with what it read and
// how long it took. Its heap, GC and scheduler are its own, as the
// binary's are.
type drainer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// drained is a drainer's answer.
type drained struct {
	bytes int64
	first time.Duration // start to the first byte read
	total time.Duration // start to EIO and the shell reaped
}

// startDrainer starts a drainer, stopped at the end of tb.
func startDrainer(tb testing.TB) *drainer {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), marker, childEnv+"=drainer")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	d := &drainer{cmd: cmd, in: in, out: bufio.NewReader(out)}
	tb.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			tb.Errorf("drainer: %v", err)
		}
	})
	return d
}

// spawn has the drainer run spawnWork, after settle, and returns the time
// from its pty.Start to the first byte read.
func (d *drainer) spawn(tb testing.TB) time.Duration {
	settle()
	return d.drain(tb, spawnWork).first
}

// drain runs w in the drainer and checks its size.
func (d *drainer) drain(tb testing.TB, w workload) drained {
	tb.Helper()
	if _, err := fmt.Fprintln(d.in, w.line); err != nil {
		tb.Fatalf("drainer: %v", err)
	}
	line, err := d.out.ReadString('\n')
	if err != nil {
		tb.Fatalf("drainer: %v", err)
	}
	var r drained
	var first, total int64
	if _, err := fmt.Sscan(line, &r.bytes, &first, &total); err != nil {
		tb.Fatalf("drainer: %q: %v", line, err)
	}
	r.first, r.total = time.Duration(first), time.Duration(total)
	if r.bytes != w.wire {
		tb.Fatalf("%s raw: read %d bytes, want %d", w.line, r.bytes, w.wire)
	}
	return r
}

// drainerMain is the drainer's process: one line in, one answer out
// ("BYTES FIRST_NS TOTAL_NS", or "-1 0 0" and the error on stderr).
func drainerMain() int {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var once sync.Once
		var at time.Time
		start := time.Now()
		t, err := startRaw(in.Text(), blocking, func(_ []byte, now time.Time) { once.Do(func() { at = now }) })
		if err == nil {
			err = t.wait()
		}
		total := time.Since(start)
		if err != nil {
			fmt.Fprintln(os.Stderr, "drainer:", err)
			fmt.Println("-1 0 0")
			continue
		}
		fmt.Println(t.bytes.Load(), at.Sub(start).Nanoseconds(), total.Nanoseconds())
	}
	return 0
}

// TestBinarySmoke runs BenchmarkBinary's bodies once at tiny sizes; see
// TestSmoke.
func TestBinarySmoke(t *testing.T) {
	t.Parallel()
	for _, daemon := range []bool{false, true} {
		first := &firstOutput{at: make(map[string]time.Time)}
		a := startBinary(t, daemon, first.feed)
		d := startDrainer(t)
		sid := a.newSession(t)
		for _, w := range []workload{zeros(1_000_000), seq(20_000)} {
			_, _, dr, at := agentRun(t, a, sid, w) // checks the byte count
			if r := d.drain(t, w); dr != 0 || at <= 0 || r.total <= 0 || r.first <= 0 || r.first > r.total {
				t.Errorf("daemon %v, %s: %d bytes dropped; agent %v, raw %+v", daemon, w.name, dr, at, r)
			}
		}
		if !daemon { // Binary/undecoded: the count from the length adds up too
			a.c.undecoded.Store(true)
			for _, w := range []workload{zeros(1_000_001), seq(20_000)} {
				agentRun(t, a, sid, w)
			}
			a.c.undecoded.Store(false)
		}
		if s := spawnAgent(t, a, sid, first); s <= 0 {
			t.Errorf("daemon %v: spawn %v", daemon, s)
		}
	}
}
