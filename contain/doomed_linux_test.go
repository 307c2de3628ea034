package contain

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDoomed holds a process between the SIGTERM that ends it and its
// exit, the state a loaded machine can keep it in past a grace period: it
// runs on the test's processor at idle priority, so it cannot act on the
// signal while the test's thread looks at it. It is live, and doomed: a
// SIGKILL sent now would not be what ended it.
func TestDoomed(t *testing.T) {
	one := pinThread(t)
	const tries = 20
	seen := 0
	for range tries {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		// Idle priority only once it sleeps: on a loaded machine an idle
		// process would take long to get as far.
		if before := sleeping(t, pid); before.doomed() {
			t.Fatalf("sleep 30 doomed before any signal: %+v", before)
		}
		restore := hold(t, pid, one)
		unix.Kill(pid, unix.SIGTERM)
		p, ok := readProc(pid)
		restore()
		cmd.Wait()
		if ok && p.live() {
			seen++
			if !p.doomed() {
				t.Fatalf("live after SIGTERM, not doomed: %+v", p)
			}
		}
	}
	if seen == 0 {
		t.Fatalf("in %d tries, sleep never read live between SIGTERM and its exit", tries)
	}
}

// A group's Kill does not count a doomed process as reached: the SIGTERM
// that doomed it is what ends it, and what its status says. Kill reads
// the process live after the SIGTERM whenever the test does after Kill.
//
// In the marker modes Kill scans /proc, and on a loaded machine (four
// busy loops on two cores) the held process then ran, and died of the
// SIGTERM before Kill looked, in all but 0 to 2 tries of 20. A scan
// alone does the same; the thread spinning as long (20 ms) does not. (Most
// likely the thread, back from one of the scan's system calls after the
// runtime gave its P away, sleeps until it has one, and leaves the
// processor to the held process.) So the test tries on, past its 20,
// until one has held, for at most holdBudget.
func TestKillDoesNotReachTheDoomed(t *testing.T) {
	const holdBudget = 15 * time.Second
	eachMode(t, func(t *testing.T, c *Containment) {
		one := pinThread(t)
		const tries = 20
		seen, n := 0, 0
		for deadline := time.Now().Add(holdBudget); n < tries || seen == 0 && time.Now().Before(deadline); n++ {
			s := start(t, c, "exec sleep 30")
			sleeping(t, s.pid)
			restore := hold(t, s.pid, one)
			unix.Kill(s.pid, unix.SIGTERM)
			reached, kerr := s.g.Kill()
			p, ok := readProc(s.pid)
			restore()
			ws := s.reap(t)
			waitDone(t, s.g)
			if err := s.g.Close(); err != nil {
				t.Error(err)
			}
			if kerr != nil {
				t.Fatalf("Kill: %v", kerr)
			}
			if !ok || !p.live() {
				continue
			}
			seen++
			if reached {
				t.Errorf("Kill reached a process that SIGTERM had doomed: %+v", p)
			}
			if ws.Signal() != unix.SIGTERM {
				t.Errorf("status %v, want killed by SIGTERM", ws)
			}
		}
		t.Logf("read live after Kill in %d tries of %d", seen, n)
		if seen == 0 {
			t.Fatalf("in %d tries, sleep never read live between SIGTERM and its exit", n)
		}
	})
}

// pinThread locks the test's goroutine to its thread and the thread to one
// of its processors, until the test ends, and returns that processor.
func pinThread(t *testing.T) unix.CPUSet {
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	var cpu unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpu); err != nil {
		t.Fatal(err)
	}
	var one unix.CPUSet
	for i := range 1024 {
		if cpu.IsSet(i) {
			one.Set(i)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.SchedSetaffinity(0, &cpu) })
	return one
}

// hold makes pid run at idle priority on the processor one, the test's
// thread's (pinThread), so that it cannot run while the thread looks at
// it; the function returned gives it normal priority back, so that it
// gets to act on a signal soon however loaded the machine is.
func hold(t *testing.T, pid int, one unix.CPUSet) (restore func()) {
	t.Helper()
	idle := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	if err := unix.SchedSetAttr(pid, idle, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedSetaffinity(pid, &one); err != nil {
		t.Fatal(err)
	}
	return func() {
		// Best effort: it may be gone.
		unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
	}
}

// sleeping waits for pid to sleep in the command it was started with.
func sleeping(t *testing.T, pid int) proc {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if p, ok := readProc(pid); ok && p.state == 'S' && comm(pid) == "sleep" {
			return p
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d never slept", pid)
	return proc{}
}

// comm is the command name of process pid, "" if it is gone.
func comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
