package contain

import (
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/signals"
)

// BenchmarkMarkerEnd measures the end of a stop in the marker modes
// (SHELLAGENT_TEST_CONTAINMENT=subreaper or session; subreaper by
// default): four terminals of 50 sleeps and a fork loop each, stopped at
// once as the agent's end stops them (SIGTERM, SIGCONT and SIGHUP, then
// SIGKILL with no grace), until every group is done and KillAll finds
// nothing. Its figures are the time of that end, in ms, and the scans of
// every process it made (the groups' watches' among them); run it beside load
// (for i in 1 2 3 4 5 6; do (while :; do :; done) & done) to see the scans
// of /proc matter.
func BenchmarkMarkerEnd(b *testing.B) {
	mode := Subreaper
	if m := os.Getenv("SHELLAGENT_TEST_CONTAINMENT"); m == string(Session) {
		mode = Session
	}
	c, err := Open(mode)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const script = "for i in $(seq 50); do sleep 300 & done; sh -c 'while :; do sleep 300 & sleep 0.01; done' &"
	var total time.Duration
	var scans uint64
	for range b.N {
		groups := make([]Group, 4)
		var reaped sync.WaitGroup
		for i := range groups {
			g, err := c.NewGroup()
			if err != nil {
				b.Fatal(err)
			}
			pid, err := g.ForkExec("/bin/sh", []string{"/bin/sh", "-c", script}, &syscall.ProcAttr{
				Env: []string{"PATH=" + os.Getenv("PATH")},
				Sys: &syscall.SysProcAttr{Setsid: true},
			})
			if err != nil {
				b.Fatal(err)
			}
			reaped.Go(func() {
				var ws unix.WaitStatus
				unix.Wait4(pid, &ws, 0, nil) // Best effort: the benchmark's own child.
			})
			groups[i] = g
		}
		reaped.Wait() // each shell has forked its work and exited
		for _, g := range groups {
			for {
				m, err := g.Members()
				if err != nil {
					b.Fatal(err)
				}
				if len(m) >= 52 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		start := time.Now()
		before := scansMade(&c.m.(*markerMode).scans)
		var stops sync.WaitGroup
		for _, g := range groups {
			stops.Go(func() {
				e := signals.Escalate(g, 0)
				<-g.Done()
				e.Finish()
			})
		}
		stops.Wait()
		if err := c.KillAll(); err != nil {
			b.Error(err)
		}
		total += time.Since(start)
		scans += scansMade(&c.m.(*markerMode).scans) - before
		for _, g := range groups {
			g.Close()
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/end")
	b.ReportMetric(float64(scans)/float64(b.N), "scans/end")
}
