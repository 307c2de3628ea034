package bench

import (
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkThroughput runs each workload once through the agent and once
// on a raw PTY per iteration, interleaved. The timer (ns/op, MB/s,
// allocs/op) covers the agent path only: from the prompt to the client's
// decoding of the exitStatus, every chunk decoded on the way. MB/s count the
// bytes the child writes. The raw baseline (raw_MB/s, ratio_vs_raw) is
// drained in a process of its own (see drainer), as the agent binary would
// be compared; inproc_raw_MB/s is the same loop in this process, after the
// agent's run, for comparison. The same workload also runs, untimed,
// through a second agent that keeps each session's history on disk
// (Config.History), before the first agent's run or after it, the order
// alternating per iteration: history_MB/s, and history_ratio, the first
// agent's time over its time (target at least 0.95: the history's cost on
// output). The history agent's run ends once its history is written too
// (Flush); agent_cpu_ms/MB and history_cpu_ms/MB are this process's CPU
// during each agent's runs (agent and client: the client's share is the
// same in both) per MB of the child's output, history_cpu_ratio the first
// over the second, and history_allocs/chunk the history agent's
// allocs/chunk: the measures of the history's cost that a loaded machine
// does not blur as much as the times.
func BenchmarkThroughput(b *testing.B) {
	for _, w := range throughputWorkloads() {
		b.Run(w.name, func(b *testing.B) {
			a := startAgent(b, nil)
			h := startHistoryAgent(b)
			raw := startDrainer(b)
			sid, hsid := a.newSession(b), h.newSession(b)
			b.SetBytes(w.child)
			var agentT, rawT, inT, histT, agentCPU, histCPU time.Duration
			var chunks, histChunks, dropped int64
			var m0, m1 runtime.MemStats
			var allocs, allocBytes, histAllocs uint64
			self := os.Getpid()
			history := func() {
				runtime.ReadMemStats(&m0)
				cpu := processCPU(self)
				_, c, _, hd := agentRun(b, h, hsid, w)
				if err := h.history.Flush(); err != nil {
					b.Fatal(err)
				}
				histCPU += processCPU(self) - cpu
				runtime.ReadMemStats(&m1)
				histT += hd
				histChunks += c
				histAllocs += m1.Mallocs - m0.Mallocs
			}
			b.ResetTimer()
			for i := range b.N {
				if i%2 == 1 {
					b.StopTimer()
					history()
					b.StartTimer()
				}
				runtime.ReadMemStats(&m0)
				cpu := processCPU(self)
				_, c, dr, d := agentRun(b, a, sid, w)
				dropped += dr
				b.StopTimer()
				agentCPU += processCPU(self) - cpu
				runtime.ReadMemStats(&m1)
				agentT += d
				chunks += c
				allocs += m1.Mallocs - m0.Mallocs
				allocBytes += m1.TotalAlloc - m0.TotalAlloc
				inT += rawRun(b, w)
				rawT += raw.drain(b, w).total
				if i%2 == 0 {
					history()
				}
				b.StartTimer()
			}
			b.StopTimer()
			mb := float64(w.child) * float64(b.N) / 1e6
			b.ReportMetric(mb/agentT.Seconds(), "agent_MB/s")
			b.ReportMetric(mb/rawT.Seconds(), "raw_MB/s")
			b.ReportMetric(rawT.Seconds()/agentT.Seconds(), "ratio_vs_raw")
			b.ReportMetric(mb/inT.Seconds(), "inproc_raw_MB/s")
			b.ReportMetric(float64(chunks)/float64(b.N), "chunks/op")
			b.ReportMetric(float64(allocs)/float64(chunks), "allocs/chunk")
			b.ReportMetric(float64(allocBytes)/float64(chunks), "alloc_B/chunk")
			b.ReportMetric(float64(dropped)/float64(b.N), "dropped_B/op")
			b.ReportMetric(mb/histT.Seconds(), "history_MB/s")
			b.ReportMetric(agentT.Seconds()/histT.Seconds(), "history_ratio")
			b.ReportMetric(float64(agentCPU.Milliseconds())/mb, "agent_cpu_ms/MB")
			b.ReportMetric(float64(histCPU.Milliseconds())/mb, "history_cpu_ms/MB")
			b.ReportMetric(agentCPU.Seconds()/histCPU.Seconds(), "history_cpu_ratio")
			b.ReportMetric(float64(histAllocs)/float64(histChunks), "history_allocs/chunk")
			b.ReportMetric(load1(), "load1")
		})
	}
}

// BenchmarkSlowClient: a client that reads the agent's stdout at a fixed
// rate (a token bucket on the pipe, 4 MB/s) while seq writes about 7 MB
// (10 MB on the wire), from the prompt to the client's decoding of the last
// byte. With flow control the child waits for the client instead of losing
// output: dropped_B/op must be 0, and delivered_vs_limit (bytes the client
// read per second over its limit) says how close the agent keeps such a
// client to its own pace; child_MB/s counts the bytes the child writes.
//
// The command sleeps for a second after its output (ns/op includes it), so
// that its terminal is live until the client has taken the last byte: what
// becomes of output still in the PTY when the last process exits is
// ptyio's drain, not this benchmark's subject.
func BenchmarkSlowClient(b *testing.B) {
	const limit = 4_000_000
	var pr *pacedReader
	epoch := time.Now()
	var last atomic.Int64 // when the client decoded output last, since epoch
	a := startAgentReading(b, func(_ *term, _ []byte, now time.Time) { last.Store(int64(now.Sub(epoch))) }, func(r io.Reader) io.Reader {
		pr = newPacedReader(r, limit)
		return pr
	})
	sid := a.newSession(b)
	w := seq(1_000_000)
	w.line += "; sleep 1"
	var dropped, wire int64
	var d time.Duration
	b.ResetTimer()
	for range b.N {
		before := pr.read.Load()
		start := time.Now()
		_, _, dr, _ := agentRun(b, a, sid, w)
		dropped += dr
		wire += pr.read.Load() - before
		d += time.Duration(last.Load()) - start.Sub(epoch)
	}
	b.StopTimer()
	b.ReportMetric(float64(dropped)/float64(b.N), "dropped_B/op")
	b.ReportMetric(float64(w.child)*float64(b.N)/d.Seconds()/1e6, "child_MB/s")
	b.ReportMetric(float64(wire)/d.Seconds()/1e6, "delivered_MB/s")
	b.ReportMetric(float64(wire)/d.Seconds()/limit, "delivered_vs_limit")
}

// pacedReader reads from r at most rate bytes per second (0: no limit),
// in reads of at most 16 KiB, and gains no credit while it waits for data:
// a client slower than the agent.
type pacedReader struct {
	r    io.Reader
	rate atomic.Int64
	next time.Time    // when the next read may start
	read atomic.Int64 // bytes read so far
}

func newPacedReader(r io.Reader, rate int) *pacedReader {
	p := &pacedReader{r: r}
	p.rate.Store(int64(rate))
	return p
}

func (p *pacedReader) Read(b []byte) (int, error) {
	rate := p.rate.Load()
	if rate == 0 {
		n, err := p.r.Read(b)
		p.read.Add(int64(n))
		return n, err
	}
	if now := time.Now(); p.next.Before(now) {
		p.next = now
	}
	time.Sleep(time.Until(p.next))
	n, err := p.r.Read(b[:min(len(b), 16<<10)])
	p.next = p.next.Add(time.Duration(n) * time.Second / time.Duration(rate))
	p.read.Add(int64(n))
	return n, err
}

// BenchmarkControlLatency: a client that reads 1 MB/s sends session/list
// and waits for the answer, b.N times, while 4 "/bg yes" flood the
// connection ("busy": p50_ms, p99_ms), and as many times with 4 idle
// terminals in the same run ("idle": idle_p50_ms, idle_p99_ms). The
// writer takes control messages first at every line, so an answer waits
// for about what the kernel's pipe holds at the client's rate (64 KiB at
// 1 MB/s: 65 ms) and one line, however many terminals are busy. ns/op is
// the mean of the busy calls.
func BenchmarkControlLatency(b *testing.B) {
	const rate = 1_000_000
	var pr *pacedReader
	a := startAgentReading(b, nil, func(r io.Reader) io.Reader {
		pr = newPacedReader(r, rate)
		return pr
	})
	sid := a.newSession(b)
	b.ResetTimer()
	b.StopTimer()
	idle := controlLatency(b, a, pr, sid, "/bg "+sleepLine, 4, b.N, func(bool) {})
	busy := controlLatency(b, a, pr, sid, "/bg "+writerLine, 4, b.N, func(on bool) {
		if on {
			b.StartTimer()
		} else {
			b.StopTimer()
		}
	})
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(busy, 50)), "p50_ms")
	b.ReportMetric(ms(percentile(busy, 99)), "p99_ms")
	b.ReportMetric(ms(percentile(idle, 50)), "idle_p50_ms")
	b.ReportMetric(ms(percentile(idle, 99)), "idle_p99_ms")
}

// BenchmarkLatency: a child writes one line every 2 ms holding the time of
// its write; each sample is the time from that write to the client's
// decoding of the chunk that carries the line. b.N is the number of
// samples, taken through the agent, then as many on a raw PTY read by a
// blocking loop. The timer covers the agent run.
func BenchmarkLatency(b *testing.B) {
	var l latencies
	a := startAgent(b, func(_ *term, data []byte, now time.Time) { l.feed(data, now) })
	sid := a.newSession(b)
	b.ResetTimer()
	agent := latencyAgent(b, a, sid, &l, b.N)
	b.StopTimer()
	raw := latencyRaw(b, b.N)
	p50, p99 := percentile(agent, 50), percentile(agent, 99)
	rawP50, rawP99 := percentile(raw, 50), percentile(raw, 99)
	b.ReportMetric(micros(p50), "p50_us")
	b.ReportMetric(micros(p99), "p99_us")
	b.ReportMetric(micros(rawP50), "raw_p50_us")
	b.ReportMetric(micros(rawP99), "raw_p99_us")
	b.ReportMetric(micros(p50-rawP50), "p50_over_raw_us")
}

// BenchmarkIdleTerminals: n background "sleep 300" terminals started
// through session/prompt on the real connection, in one session; once all
// are listed, what each costs the process after a GC (RSS as the OS reports
// it, live heap, goroutine stacks, goroutines) and the OS threads added in
// all, each a delta over a baseline measured in the same process just
// before. Every terminal is followed and held by the connection's writer
// (flow control), so its cost is in the figures. "flow" is the 200 of the
// target (rss_B/term at most 16 KiB); n=50 shows the fixed costs spread
// over fewer. The physical baseline holds n raw PTYs with a sleep child
// each, drained by a goroutine parked in the runtime poller. Each
// measurement runs in a fresh process (see idleInChild), agent and raw in
// turn.
func BenchmarkIdleTerminals(b *testing.B) {
	for _, bc := range []struct {
		name string
		n    int
	}{{"n=50", 50}, {"flow", 200}} {
		n := bc.n
		b.Run(bc.name, func(b *testing.B) {
			var agent, raw idleCost
			for range b.N {
				ac, rc := idleInChild(b, "agent", n), idleInChild(b, "raw", n)
				agent.RSS += ac.RSS
				agent.Heap += ac.Heap
				agent.Stack += ac.Stack
				agent.Goroutines += ac.Goroutines
				agent.Threads += ac.Threads
				raw.RSS += rc.RSS
				raw.Heap += rc.Heap
				raw.Threads += rc.Threads
			}
			f := float64(b.N)
			b.ReportMetric(agent.RSS/f, "rss_B/term")
			b.ReportMetric(agent.Heap/f, "heap_B/term")
			b.ReportMetric(agent.Stack/f, "stack_B/term")
			b.ReportMetric(agent.Goroutines/f, "goroutines/term")
			b.ReportMetric(float64(agent.Threads)/f, "threads_added")
			b.ReportMetric(raw.RSS/f, "raw_rss_B/term")
			b.ReportMetric(raw.Heap/f, "raw_heap_B/term")
			b.ReportMetric(float64(raw.Threads)/f, "raw_threads_added")
		})
	}
}

// BenchmarkCancel: per iteration, "/bg sleep 300" is started and listed
// (untimed), then terminal/cancel is timed until the client decodes the
// exitStatus (SIGTERM). "listed" cancels as soon as the terminal is listed,
// while its shell may still be starting the command; "settled" waits 20 ms
// more (untimed), so that a running sleep is stopped, as a dev server would
// be. The physical baseline, with the same pause: SIGTERM to the process
// group of a sleep on a raw PTY until EIO and the shell's reaping.
func BenchmarkCancel(b *testing.B) {
	for _, bc := range []struct {
		name   string
		settle time.Duration
	}{{"listed", 0}, {"settled", 20 * time.Millisecond}} {
		b.Run(bc.name, func(b *testing.B) {
			a := startAgent(b, nil)
			sid := a.newSession(b)
			ds := make([]time.Duration, 0, b.N)
			var sum time.Duration
			timed := func(on bool) {
				if on {
					b.StartTimer()
				} else {
					b.StopTimer()
				}
			}
			b.ResetTimer()
			b.StopTimer()
			for range b.N {
				d := cancelAgent(b, a, sid, bc.settle, timed)
				ds = append(ds, d)
				sum += d
			}
			raw := make([]time.Duration, 0, min(b.N, 50))
			for range cap(raw) {
				raw = append(raw, cancelRaw(b, bc.settle))
			}
			b.ReportMetric(micros(sum)/float64(b.N), "us/cancel")
			b.ReportMetric(micros(percentile(ds, 50)), "p50_us")
			b.ReportMetric(micros(percentile(ds, 99)), "p99_us")
			b.ReportMetric(micros(percentile(raw, 50)), "raw_p50_us")
		})
	}
}

// writersWindow is how long BenchmarkManyWriters counts per iteration.
const writersWindow = time.Second

// BenchmarkManyWriters: 16 "/bg yes" terminals in one session write at
// once; per iteration, what the client decodes of each during a 1 s window
// (timed), then all are cancelled. min_share is the slowest terminal's
// bytes over a fair share (total/16). The physical baseline: 16 raw PTYs
// running yes, drained concurrently by blocking loops, over the same window.
func BenchmarkManyWriters(b *testing.B) {
	const k = 16
	a := startAgent(b, nil)
	sid := a.newSession(b)
	timed := func(on bool) {
		if on {
			b.StartTimer()
		} else {
			b.StopTimer()
		}
	}
	var agentBytes, rawBytes, dropped int64
	var agentT, rawT time.Duration
	var share, rawShare float64
	b.ResetTimer()
	b.StopTimer()
	for range b.N {
		r := writersAgent(b, a, sid, k, writersWindow, timed)
		agentBytes += r.total()
		agentT += r.elapsed
		dropped += r.dropped
		share += r.minShare()
		rr := writersRaw(b, k, writersWindow)
		rawBytes += rr.total()
		rawT += rr.elapsed
		rawShare += rr.minShare()
	}
	f := float64(b.N)
	b.ReportMetric(float64(agentBytes)/agentT.Seconds()/1e6, "MB/s")
	b.ReportMetric(share/f, "min_share")
	b.ReportMetric(float64(dropped)/agentT.Seconds()/1e6, "dropped_MB/s")
	b.ReportMetric(float64(rawBytes)/rawT.Seconds()/1e6, "raw_MB/s")
	b.ReportMetric(rawShare/f, "raw_min_share")
	b.ReportMetric((float64(agentBytes)/agentT.Seconds())/(float64(rawBytes)/rawT.Seconds()), "ratio_vs_raw")
}
