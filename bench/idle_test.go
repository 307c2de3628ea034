package bench

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
)

// Idle terminals are measured in a fresh process each time: the test
// binary re-run with only TestIdleChild, which measures a baseline, starts
// the terminals, measures again and writes the difference to a file. In a
// process that has run other benchmarks, the heap is fragmented by what
// they freed, and new terminals partly fill the holes: the RSS delta then
// depends on what ran before rather than on the terminals.
const (
	idleEnv    = "SHELLAGENT_BENCH_IDLE"     // "agent N" or "raw N"
	idleOutEnv = "SHELLAGENT_BENCH_IDLE_OUT" // where the child writes its idleCost
)

// heapProfileEnv names a file prefix: the agent's idle child then writes the
// heap profile taken with all its terminals idle to PREFIX.nN (the one of
// go test -memprofile is taken at the end, when they are gone).
const heapProfileEnv = "SHELLAGENT_BENCH_HEAPPROFILE"

// idleCost is what n idle terminals added, per terminal (threads in all).
type idleCost struct {
	RSS        float64 `json:"rss"`
	Heap       float64 `json:"heap"`
	Stack      float64 `json:"stack"`
	Goroutines float64 `json:"goroutines"`
	Threads    int     `json:"threads"`
}

// idleInChild measures n idle terminals of kind "agent" or "raw" in a fresh
// process.
func idleInChild(tb testing.TB, kind string, n int) idleCost {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(tb.TempDir(), "idle.json")
	cmd := exec.Command(exe, "-test.run=^TestIdleChild$", "-test.count=1")
	// A marker of its own: the child's TestMain kills what carries its
	// marker at its end, which must not be what tests running beside
	// this one started.
	own := "SHELLAGENT_BENCH=" + rand.Text()
	cmd.Env = append(os.Environ(), own, fmt.Sprintf("%s=%s %d", idleEnv, kind, n), idleOutEnv+"="+out)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		tb.Fatalf("idle %s %d: %v\n%s", kind, n, err, log.Bytes())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatalf("idle %s %d: %v\n%s", kind, n, err, log.Bytes())
	}
	var c idleCost
	if err := json.Unmarshal(b, &c); err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestIdleChild is the child side of idleInChild; it does nothing in a
// normal test run.
func TestIdleChild(t *testing.T) {
	spec := os.Getenv(idleEnv)
	if spec == "" {
		t.Skip("run by the idle terminal measurements only")
	}
	kind, num, _ := strings.Cut(spec, " ")
	n, err := strconv.Atoi(num)
	if err != nil {
		t.Fatalf("%s=%q", idleEnv, spec)
	}
	if os.Getenv(heapProfileEnv) != "" {
		runtime.MemProfileRate = 512 // fine enough for per-terminal figures
	}
	var c idleCost
	switch kind {
	case "agent":
		c = idleAgent(t, n)
	case "raw":
		c = idleRaw(t, n)
	default:
		t.Fatalf("%s=%q", idleEnv, spec)
	}
	b, _ := json.Marshal(c)
	if err := os.WriteFile(os.Getenv(idleOutEnv), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

const sleepLine = "sleep 300"

// idleAgent starts n background "sleep 300" terminals in one session of a
// fresh agent, and measures what they cost once all are listed. The
// baseline is the same agent, with its session open, after one terminal was
// started and stopped (so that first-use costs are paid), before the n.
func idleAgent(tb testing.TB, n int) idleCost {
	tb.Helper()
	a := startAgent(tb, nil)
	defer a.close(tb)
	sid := a.newSession(tb)
	warm := a.prompt(tb, sid, "/bg "+sleepLine)
	a.c.waitListed(tb, sid, warm)
	a.cancel(tb, sid, warm)
	a.c.waitExit(tb, sid, warm)
	a.c.waitBackgroundEmpty(tb, sid)

	before := measure(tb)
	tids := make([]string, n)
	for i := range tids {
		tids[i] = a.prompt(tb, sid, "/bg "+sleepLine)
	}
	a.c.waitListed(tb, sid, tids...)
	after := measure(tb)
	if path := os.Getenv(heapProfileEnv); path != "" {
		writeHeapProfile(tb, fmt.Sprintf("%s.n%d", path, n))
	}
	return costOf(before, after, n)
}

// idleRaw holds n raw PTYs with a "sleep 300" child each, drained by a
// goroutine parked in the runtime poller, and measures what they cost.
func idleRaw(tb testing.TB, n int) idleCost {
	tb.Helper()
	var all []*rawTerm
	defer func() {
		for _, t := range all {
			t.kill()
		}
		for _, t := range all {
			if err := t.wait(); err != nil {
				tb.Error(err)
			}
		}
	}()
	start := func() {
		t, err := startRaw(sleepLine, poller, nil)
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, t)
	}
	start() // first-use costs
	before := measure(tb)
	for range n {
		start()
	}
	after := measure(tb)
	return costOf(before, after, n)
}

func writeHeapProfile(tb testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		tb.Fatal(err)
	}
}

// memSample is the process's memory and concurrency at one moment, after
// GCs that returned free memory to the OS.
type memSample struct {
	rss, heap, stack   int64
	goroutines, thread int
}

func measure(tb testing.TB) memSample {
	tb.Helper()
	// Objects with finalizers (files, and what ended before) are freed a
	// cycle after they became unreachable.
	for range 3 {
		runtime.GC()
	}
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memSample{heap: int64(ms.HeapAlloc), stack: int64(ms.StackInuse), goroutines: runtime.NumGoroutine()}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmRSS":
			m.rss = n << 10 // kB
		case "Threads":
			m.thread = int(n)
		}
	}
	if m.rss == 0 || m.thread == 0 {
		tb.Fatal("no VmRSS or Threads in /proc/self/status")
	}
	return m
}

func costOf(before, after memSample, n int) idleCost {
	f := float64(n)
	return idleCost{
		RSS:        float64(after.rss-before.rss) / f,
		Heap:       float64(after.heap-before.heap) / f,
		Stack:      float64(after.stack-before.stack) / f,
		Goroutines: float64(after.goroutines-before.goroutines) / f,
		Threads:    after.thread - before.thread,
	}
}
