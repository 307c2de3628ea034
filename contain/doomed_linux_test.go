package contain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDoomed holds a process between the SIGTERM that ends it and its
// exit, the state a loaded machine can keep it in past a grace period: it
// runs at idle priority on a processor that a busy loop keeps (occupy),
// so it seldom acts on the signal while the test looks at it. It is live,
// and doomed: a SIGKILL sent now would not be what ended it.
func TestDoomed(t *testing.T) {
	one := occupy(t)
	const tries = 20
	seen := 0
	for range tries {
		cmd := exec.Command("sleep", "30")
		// A session, and so an autogroup, of its own, as a terminal's
		// shell has: hold lowers its weight, not the test's own.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
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
// Nothing but the scheduler holds the process between the SIGTERM and the
// test's look after Kill, so not every try holds, and the test tries on,
// past its 20, until one has, for at most holdBudget. It once failed at a
// load average of 20 to 26, no try of its budget having held, for two
// reasons. The process shared the test's thread's processor, and was kept
// off it only while the thread ran: in the marker modes Kill scans /proc,
// and the thread, back from one of the scan's system calls after the
// runtime gave its P away, sleeps until it has one, leaving the processor
// to the held process. And the process, a terminal's shell, leads a
// session, so it has an autogroup of its own (where the kernel has
// autogroups on), whose weight, not the process's idle policy, is what
// the scheduler weighs against everything else: at idle priority, it
// still had a nice-0 share. With eight busy loops on two cores (a load
// average of 12), in 8 runs, 14 of the 24 subtests held once only, after
// 20 to 100 tries. Now a busy loop of its own (occupy), which never
// sleeps, keeps the processor, and the process's autogroup has the
// lowest weight there is (hold): under the same load at least 8 tries of
// 20 held in every subtest, all 20 in 9 of 24. No way to hold a process
// that a SIGTERM has doomed
// without the scheduler was found: a process frozen (cgroup v1 freezer)
// or stopped is not doomed by a SIGTERM, and the cgroup v2 freezer lets a
// doomed process go.
func TestKillDoesNotReachTheDoomed(t *testing.T) {
	const holdBudget = 15 * time.Second
	eachMode(t, func(t *testing.T, c *Containment) {
		one := occupy(t)
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

// occupy starts a busy loop (a shell's, which makes no system call) on
// the last of the test's processors, at normal priority and in a session
// (and autogroup) of its own, for the rest of the test, and returns that
// processor; the test's thread is kept off it where there is another. A
// process held there at idle priority (hold) runs only when the
// scheduler gives it its small share, and the loop never sleeps.
func occupy(t *testing.T) unix.CPUSet {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	var cpu unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpu); err != nil {
		t.Fatal(err)
	}
	var one, rest unix.CPUSet
	last := -1
	for i := range 1024 {
		if cpu.IsSet(i) {
			if last >= 0 {
				rest.Set(last)
			}
			last = i
		}
	}
	one.Set(last)
	if rest.Count() > 0 {
		if err := unix.SchedSetaffinity(0, &rest); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.SchedSetaffinity(0, &cpu) })
	}
	loop := exec.Command("/bin/sh", "-c", "while :; do :; done")
	loop.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := loop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		loop.Process.Kill()
		loop.Wait()
	})
	if err := unix.SchedSetaffinity(loop.Process.Pid, &one); err != nil {
		t.Fatal(err)
	}
	return one
}

// hold makes pid run at idle priority on the processor one, the busy
// loop's (occupy), with its autogroup at the lowest weight (a process
// that leads a session has one of its own, weighed instead of the
// process against the loop), so that it seldom runs while the test
// looks at it; the function returned gives it normal priority back, so that it
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
	if err := lowestAutogroup(pid); err != nil {
		t.Fatal(err)
	}
	return func() {
		// Best effort: it may be gone.
		unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
	}
}

// lowestAutogroup gives pid's autogroup the lowest weight there is. Where
// the kernel has no autogroups (the file is missing), or pid is in the
// root one, which every process is in until it or an ancestor starts a
// session, and whose weight the kernel does not let be changed (EINVAL),
// there is nothing to lower and it does nothing.
func lowestAutogroup(pid int) error {
	name := "/proc/" + strconv.Itoa(pid) + "/autogroup"
	err := os.WriteFile(name, []byte("19"), 0)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, unix.EINVAL) {
		if b, rerr := os.ReadFile(name); rerr == nil && len(b) == 0 {
			return nil // the root group: the file reads empty
		}
	}
	return fmt.Errorf("lower the autogroup of %d: %w", pid, err)
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

func TestLowestAutogroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/autogroup"); err != nil {
		t.Skipf("no autogroups here: %v", err)
	}
	own := func(t *testing.T) int {
		cmd := exec.Command("sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		return cmd.Process.Pid
	}
	for _, tc := range []struct {
		name string
		pid  func(t *testing.T) int
		want string // what the file reads after
	}{
		{"a session of its own", own, " nice 19\n"},
		// init never starts a session: it is in the root group, whose
		// weight cannot be changed, the group a test's processes are in
		// where nothing above them started one.
		{"the root group", func(t *testing.T) int {
			if os.Getuid() != 0 {
				t.Skip("only root may write init's autogroup file")
			}
			return 1
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := tc.pid(t)
			if err := lowestAutogroup(pid); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/autogroup")
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b); !strings.HasSuffix(got, tc.want) || tc.want == "" && got != "" {
				t.Errorf("autogroup reads %q, want it to end %q", got, tc.want)
			}
		})
	}
}
