package contain

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The helpers: this test binary run again as an agent whose first thread
// ends (firstThreadEnv), or that execs itself execsEnv times from another
// thread, as an upgrade in place does, then creates the file doneEnv names.
const (
	firstThreadEnv = "CONTAIN_TEST_FIRST_THREAD_ENDS"
	execsEnv       = "CONTAIN_TEST_EXECS"
	doneEnv        = "CONTAIN_TEST_EXECS_DONE"
	parentEnv      = "CONTAIN_TEST_PARENT" // the test's pid
	// firstThreadStays as firstThreadEnv's value: the helper runs 30 s,
	// whoever its parent, or until a signal ends it.
	firstThreadStays = "stays"
)

// init keeps a helper's main goroutine on the process's first thread, so
// that the other goroutines run on other threads.
func init() {
	if os.Getenv(firstThreadEnv) != "" || os.Getenv(execsEnv) != "" {
		runtime.LockOSThread()
	}
}

// helper runs a helper if the environment names one; it never returns
// then. A helper runs until the test kills it, or until the test is gone.
func helper() {
	if v := os.Getenv(firstThreadEnv); v != "" {
		if v == firstThreadStays {
			go func() { // or until a signal ends it
				time.Sleep(30 * time.Second)
				os.Exit(0)
			}()
		} else {
			go untilOrphaned() // on a thread of its own
		}
		time.Sleep(50 * time.Millisecond)
		unix.RawSyscall(unix.SYS_EXIT, 0, 0, 0) // this thread alone
	}
	n, err := strconv.Atoi(os.Getenv(execsEnv))
	if err != nil {
		return
	}
	if n == 0 {
		if err := os.WriteFile(os.Getenv(doneEnv), nil, 0o600); err != nil {
			os.Exit(2)
		}
		untilOrphaned()
	}
	os.Setenv(execsEnv, strconv.Itoa(n-1))
	go func() {
		err := syscall.Exec("/proc/self/exe", os.Args, os.Environ())
		fmt.Fprintln(os.Stderr, "exec:", err)
		os.Exit(2)
	}()
	time.Sleep(time.Hour)
}

// untilOrphaned exits once the helper's parent, the test, is gone.
func untilOrphaned() {
	for strconv.Itoa(os.Getppid()) == os.Getenv(parentEnv) {
		time.Sleep(100 * time.Millisecond)
	}
	os.Exit(0)
}

// startHelper starts a helper with env and returns it and the instance
// that names it, as an agent of this test's sweep scope.
func startHelper(t *testing.T, env ...string) (*exec.Cmd, instance) {
	t.Helper()
	self, err := self()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, parentEnv+"="+strconv.Itoa(os.Getpid()))...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	p, ok := readProc(cmd.Process.Pid)
	if !ok {
		t.Fatal("the helper is gone")
	}
	return cmd, instance{ns: self.ns, pid: p.pid, start: p.start, scope: self.scope}
}

// An agent whose first thread has ended while another runs is alive, and
// a sweep leaves its processes alone; once it has exited, it is dead.
func TestSweepSparesAnAgentWhoseFirstThreadEnded(t *testing.T) {
	cmd, inst := startHelper(t, firstThreadEnv+"=1")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Its first thread's stat: readProc shows the live thread's state.
		if p, ok := readStat("/proc/"+strconv.Itoa(inst.pid)+"/stat", inst.pid); ok && p.zombie() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the helper's first thread did not end in 10s")
		}
	}
	if !inst.alive() {
		t.Error("an agent whose first thread ended while another runs is taken for dead")
	}
	marked := startMarked(t, inst, "")
	if _, _, err := openMode(t, Session).Sweep(); err != nil {
		t.Fatal(err)
	}
	if !running(marked) {
		t.Error("the sweep killed the marked process of an agent whose first thread ended while another runs")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if inst.alive() {
		t.Error("an agent that has exited is taken for alive")
	}
}

// Sweeps during an agent's execs of itself from a thread other than its
// first (an upgrade in place) leave its processes alone: the kernel shows
// its first thread as a zombie, or no process at all, for a moment of
// each exec.
func TestSweepSparesAnAgentThatExecs(t *testing.T) {
	done := filepath.Join(t.TempDir(), "done")
	_, inst := startHelper(t, execsEnv+"=50", doneEnv+"="+done)
	marked := startMarked(t, inst, "")
	c := openMode(t, Session)
	sweeps := 0
	for deadline := time.Now().Add(time.Minute); ; sweeps++ {
		if _, err := os.Stat(done); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			t.Fatalf("the helper did not exec 50 times in a minute (%v)", err)
		}
		if _, _, err := c.Sweep(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d sweeps during the execs", sweeps)
	if sweeps == 0 {
		t.Fatal("no sweep ran during the execs")
	}
	if !running(marked) {
		t.Error("a sweep killed the marked process of an agent that execs itself")
	}
	if !inst.alive() {
		t.Error("the agent is taken for dead after its execs")
	}
}

// The judge takes an instance for dead only when it looked gone twice,
// and only of its own pid namespace and sweep scope; it waits once for
// all it suspects, and looks at each instance once per sweep.
func TestJudge(t *testing.T) {
	self := instance{ns: 1, pid: 10, start: 100, scope: "s"}
	name := func(pid int) string { return instance{ns: 1, pid: pid, start: 5, scope: "s"}.String() }
	for _, tt := range []struct {
		name  string
		looks map[int][]bool // by pid: what each look at it says, alive or not
		dead  map[int]bool
		waits int
	}{
		{"alive", map[int][]bool{20: {true}}, map[int]bool{20: false}, 0},
		{"gone twice", map[int][]bool{20: {false, false}}, map[int]bool{20: true}, 1},
		{"gone, then back (an exec)", map[int][]bool{20: {false, true}}, map[int]bool{20: false}, 1},
		{"two suspects, one wait", map[int][]bool{20: {false, false}, 30: {false, true}, 40: {true}}, map[int]bool{20: true, 30: false, 40: false}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			seen := make(map[int]int)
			waits := 0
			j := newJudge(self)
			j.alive = func(i instance) bool {
				looks := tt.looks[i.pid]
				if seen[i.pid] >= len(looks) {
					t.Fatalf("instance %d looked at %d times", i.pid, seen[i.pid]+1)
				}
				seen[i.pid]++
				return looks[seen[i.pid]-1]
			}
			j.wait = func() { waits++ }
			for range 2 { // a second scan of the same sweep looks at none again
				for pid := range tt.looks {
					j.suspect(name(pid))
				}
				j.confirm()
			}
			for pid, want := range tt.dead {
				if got := j.dead(name(pid)); got != want {
					t.Errorf("dead(%d) = %v, want %v", pid, got, want)
				}
			}
			if waits != tt.waits {
				t.Errorf("%d waits, want %d", waits, tt.waits)
			}
		})
	}
	j := newJudge(self)
	j.alive = func(i instance) bool { t.Fatalf("looked at %v, of another scope or namespace", i); return false }
	for _, other := range []instance{{ns: 2, pid: 20, start: 5, scope: "s"}, {ns: 1, pid: 20, start: 5, scope: "t"}, {ns: 1, pid: 20, start: 5}} {
		if j.suspect(other.String()) {
			t.Errorf("%v suspected, of another scope or namespace", other)
		}
	}
	if j.suspect("not an instance") {
		t.Error("a name that is no instance suspected")
	}
}
