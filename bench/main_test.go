package bench

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/contain"
	"shellagent/contain/containtest"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
	"shellagent/ptyio"
)

// The test binary doubles as the latency child: run with childEnv=ticker it
// writes one line per interval, each holding the time of its write.
const (
	childEnv    = "SHELLAGENT_BENCH_CHILD"
	ticksEnv    = "SHELLAGENT_BENCH_TICKS"
	intervalEnv = "SHELLAGENT_BENCH_INTERVAL"
	exeEnv      = "SHELLAGENT_BENCH_EXE" // the test binary, for tickerLine
)

// marker is in the environment of every process the benchmarks start, so
// that TestMain can prove none is left behind. A child test process (see
// idleInChild) is given one of its own, and proves the same of its own.
var marker = "SHELLAGENT_BENCH=" + cmp.Or(os.Getenv("SHELLAGENT_BENCH"), rand.Text())

// launcher holds the agent's commands in containtest.Mode: cgroup mode where
// the machine allows it, as the agent's default (auto).
var launcher ptyio.Local

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "ticker":
		os.Exit(ticker())
	case "drainer":
		os.Exit(drainerMain())
	}
	exe, err := os.Executable()
	if err == nil {
		err = os.Setenv(exeEnv, exe) // inherited by the agent's and the baseline's commands
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	testloop.Parallel(4)
	containtest.Main(m, func(c *contain.Containment) { launcher = ptyio.Local{Containment: c} }, func() error {
		removeBinary()
		if left := leftBehind(); len(left) > 0 {
			return fmt.Errorf("bench: processes left behind: %v", left)
		}
		return nil
	})
}

// leftBehind returns the processes with the marker that are still alive a
// while after the tests, and kills them.
func leftBehind() []int {
	// A child killed a moment ago may still be on its way out.
	deadline := time.Now().Add(5 * time.Second)
	left := processesWith(marker)
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		left = processesWith(marker)
	}
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL) // Best effort: the run fails anyway.
	}
	return left
}

// ticker writes ticksEnv lines, one per intervalEnv, each the monotonic
// time (see monotonic) just before its write, after a short pause that
// lets the reader settle.
func ticker() int {
	n, err := strconv.Atoi(os.Getenv(ticksEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ticker:", err)
		return 2
	}
	interval, err := time.ParseDuration(os.Getenv(intervalEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ticker:", err)
		return 2
	}
	buf := make([]byte, 0, 32)
	next := time.Now().Add(tickerPause)
	for range n {
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		buf = strconv.AppendInt(buf[:0], monotonic(), 10)
		buf = append(buf, '\n')
		if _, err := os.Stdout.Write(buf); err != nil {
			return 1
		}
	}
	return 0
}

// tickerPause is how long the ticker waits before its first line.
const tickerPause = 20 * time.Millisecond

// processesWith lists the live processes, this one excepted (an idle
// child has the marker too), whose environment holds marker.
func processesWith(marker string) []int {
	return slices.DeleteFunc(acptest.ProcessesWith(marker), func(pid int) bool { return pid == os.Getpid() })
}

// monotonic reads CLOCK_MONOTONIC, in nanoseconds: one clock for every
// process of the machine, which no step of the wall clock moves. The
// ticker's lines are read in another process, where time.Now's own
// monotonic reading cannot be compared with them.
func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime: %v", err))
	}
	return ts.Nano()
}
