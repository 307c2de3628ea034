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
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
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
	defer unix.SchedSetaffinity(0, &cpu)

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
		idle := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
		if err := unix.SchedSetAttr(pid, idle, 0); err != nil {
			t.Fatal(err)
		}
		if err := unix.SchedSetaffinity(pid, &one); err != nil {
			t.Fatal(err)
		}
		unix.Kill(pid, unix.SIGTERM)
		p, ok := readProc(pid)
		// Back to normal priority, so that it gets to die soon however
		// loaded the machine is. Best effort: it may be gone.
		unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
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
