package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"shellagent/contain/containtest"
)

// BenchmarkUpgrade: the built binary's daemon, one session with 4 × /bg
// yes streaming into their rings (detached: nobody holds them back), is
// upgraded in place to the same binary once per iteration (run it with
// -benchtime 20x). held_p50_ms and held_max_ms are how long output was
// held back: from the freeze of the first session (no PTY read from then
// on) to the new image's readers started again, as the new image logs it
// (supervisor.Restore: held=); upgrade_p50_ms is the whole `daemon
// upgrade` command (its probe of the new binary, which holds nothing
// back, included). Every upgrade must hand over the 4 terminals.
func BenchmarkUpgrade(b *testing.B) {
	held, took, phases := upgrades(b, b.N, b.ResetTimer)
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(held, 50)), "held_p50_ms")
	b.ReportMetric(ms(percentile(held, 100)), "held_max_ms")
	b.ReportMetric(ms(percentile(took, 50)), "upgrade_p50_ms")
	for _, p := range holdPhases {
		b.ReportMetric(ms(percentile(phases[p], 50)), p+"_p50_ms")
	}
	b.ReportMetric(load1(), "load1")
}

// holdPhases are the steps of the hold, in order, as the two images log
// them: in the old one, freezing the sessions and completing their
// history on disk, then handing the descriptors over (what the held time
// leaves unaccounted for: the dups, the manifest, the exec call); in the
// new one, from the exec to the daemon's code (the kernel's exec, the Go
// runtime's start, the flags), reading the manifest, opening the
// containment, opening the history (its index read from the files),
// making the supervisor, and restoring the sessions.
var holdPhases = []string{"freeze", "flush", "handover", "exec", "resume", "containment", "history", "supervisor", "restore"}

// upgrades sets up BenchmarkUpgrade's daemon, calls start, and upgrades it
// n times; it returns each upgrade's held time and duration, and how
// long each phase of each hold took (holdPhases).
func upgrades(b testing.TB, n int, start func()) (held, took []time.Duration, phases map[string][]time.Duration) {
	bin, err := shellagentBinary()
	if err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "sau") // short: a socket path has at most 107 bytes
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	socket, state := filepath.Join(dir, "d.sock"), b.TempDir()
	b.Cleanup(func() { stopDaemon(b, bin, socket, state) })
	a := startProcess(b, bin, state, nil, "--daemon", "--socket", socket, "--shell", "/bin/sh", "--foreground-timeout", "0", "--containment", string(containtest.Mode()))
	sid := a.newSession(b)
	var tids []string
	for range 4 {
		tids = append(tids, a.prompt(b, sid, "/bg yes"))
	}
	a.c.waitListed(b, sid, tids...)
	a.close(b) // detached: the terminals stream on into their rings
	time.Sleep(200 * time.Millisecond)

	logFile := filepath.Join(state, "shellagent", "daemon.log")
	phases = make(map[string][]time.Duration)
	start()
	for i := range n {
		start := time.Now()
		if out, err := exec.Command(bin, "daemon", "upgrade", "--socket", socket).CombinedOutput(); err != nil {
			b.Fatalf("upgrade %d: %v\n%s", i+1, err, out)
		}
		took = append(took, time.Since(start))
		h, terms, steps, err := lastHeld(logFile, i+1)
		if err != nil {
			b.Fatalf("upgrade %d: %v", i+1, err)
		}
		if terms != 4 {
			b.Fatalf("upgrade %d handed over %d terminals, want 4", i+1, terms)
		}
		held = append(held, h)
		for p, d := range steps {
			phases[p] = append(phases[p], d)
		}
	}
	return held, took, phases
}

var (
	heldLine  = regexp.MustCompile(`restored the sessions of the upgrade.* terminals=(\d+) held=(\S+)(.*)`)
	startLine = regexp.MustCompile(`upgrade in place: the new image's start"(.*)`)
	logField  = regexp.MustCompile(`(\w+)=(\S+)`)
)

// lastHeld reads the daemon's log: the n-th upgrade's held time, the
// terminals it handed over, and how long each phase of its hold took.
func lastHeld(logFile string, n int) (time.Duration, int, map[string]time.Duration, error) {
	var held, start [][]string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(logFile)
		if err != nil {
			return 0, 0, nil, err
		}
		held, start = heldLine.FindAllStringSubmatch(string(b), -1), startLine.FindAllStringSubmatch(string(b), -1)
		if len(held) >= n && len(start) >= n || time.Now().After(deadline) {
			break
		}
	}
	if len(held) < n || len(start) < n {
		return 0, 0, nil, errNoHeld
	}
	terms, _ := strconv.Atoi(held[n-1][1])
	d, err := time.ParseDuration(held[n-1][2])
	phases := make(map[string]time.Duration)
	left := d
	for _, f := range logField.FindAllStringSubmatch(held[n-1][3]+" "+start[n-1][1], -1) {
		if p, err := time.ParseDuration(f[2]); err == nil {
			phases[f[1]] = p
			left -= p
		}
	}
	phases["handover"] = left
	return d, terms, phases, err
}

var errNoHeld = errorString("the daemon's log has no line for this upgrade (supervisor.Restore's held=)")

type errorString string

func (e errorString) Error() string { return string(e) }

// TestUpgradeSmoke runs BenchmarkUpgrade's body for 2 upgrades.
func TestUpgradeSmoke(t *testing.T) {
	t.Parallel()
	held, took, phases := upgrades(t, 2, func() {})
	t.Logf("held %v; upgrades took %v; phases %v", held, took, phases)
}
