package ptyio

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// BenchmarkSpawn times "echo spawned" from the start to its first byte,
// three ways interleaved in each iteration: Launch with /bin/sh, a shell
// of the Bourne family (one exec: launch_p50_us), Launch with /bin/sh by a
// name bourneShells does not know (the hang-up wrapper's two execs:
// wrapped_p50_us), and creack/pty's pty.Start of /bin/sh -c "echo
// spawned", read from a blocking master (raw_p50_us). Launch's time
// includes its group (a cgroup in cgroup mode). over_raw_us is
// launch_p50_us - raw_p50_us; the target is at most 1000.
func BenchmarkSpawn(b *testing.B) {
	other := filepath.Join(b.TempDir(), "othersh")
	if err := os.Symlink("/bin/sh", other); err != nil {
		b.Fatal(err)
	}
	var launched, wrapped, raw []time.Duration
	for b.Loop() {
		launched = append(launched, spawnLaunch(b, "/bin/sh"))
		wrapped = append(wrapped, spawnLaunch(b, other))
		raw = append(raw, spawnRaw(b))
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1e3
	}
	b.ReportMetric(p50(launched), "launch_p50_us")
	b.ReportMetric(p50(wrapped), "wrapped_p50_us")
	b.ReportMetric(p50(raw), "raw_p50_us")
	b.ReportMetric(p50(launched)-p50(raw), "over_raw_us")
}

// firstWrite records when its first Write came.
type firstWrite struct {
	once sync.Once
	at   time.Time
}

func (f *firstWrite) Write(p []byte) (int, error) {
	f.once.Do(func() { f.at = time.Now() })
	return len(p), nil
}

// spawnLaunch launches "echo spawned" with shell and returns the time to
// its first output; it waits for the end, untimed.
func spawnLaunch(b *testing.B, shell string) time.Duration {
	b.Helper()
	rec := newRecorder()
	first := &firstWrite{}
	start := time.Now()
	_, err := launcher.Launch(Command{
		Shell: shell, Line: "echo spawned", Dir: "/",
		Env:  []string{"PATH=" + os.Getenv("PATH"), marker},
		Size: Size{Cols: 120, Rows: 40},
	}, first, rec)
	if err != nil {
		b.Fatal(err)
	}
	if e := rec.wait(b); e.Err != nil || first.at.IsZero() {
		b.Fatalf("exit %+v, first output at %v", e, first.at)
	}
	return first.at.Sub(start)
}

// spawnRaw starts /bin/sh -c "echo spawned" with pty.Start and returns the
// time to the first byte read from the master; it reads to the end and
// reaps the shell, untimed.
func spawnRaw(b *testing.B) time.Duration {
	b.Helper()
	cmd := exec.Command("/bin/sh", "-c", "echo spawned")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), marker}
	start := time.Now()
	master, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		b.Fatal(err)
	}
	defer master.Close()
	buf := make([]byte, 4096)
	var at time.Time
	for {
		n, err := master.Read(buf)
		if n > 0 && at.IsZero() {
			at = time.Now()
		}
		if err != nil {
			if !errors.Is(err, syscall.EIO) {
				b.Fatal(err)
			}
			break
		}
	}
	if err := cmd.Wait(); err != nil || at.IsZero() {
		b.Fatalf("raw: %v, first byte at %v", err, at)
	}
	return at.Sub(start)
}
