package contain

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"shellagent/internal/testloop"
)

// TestMain gives the tests' instances a sweep scope of their own, so that
// agents of other test suites running beside them (and this package's
// TestSweep) sweep nothing of each other's.
func TestMain(m *testing.M) {
	helper() // the helpers of sweep_linux_test.go, which never return
	os.Setenv(SweepScopeEnv, "containtest"+strconv.Itoa(os.Getpid()))
	goleak.VerifyTestMain(m)
}

// modes are the modes this machine can run: Subreaper and Session always,
// Cgroup where cgroups can be created. SHELLAGENT_TEST_CONTAINMENT keeps
// the tests to the mode it names (CI runs them once more so, as the other
// packages that start commands).
func modes(t *testing.T) []Mode {
	if m := os.Getenv("SHELLAGENT_TEST_CONTAINMENT"); m != "" && m != string(Auto) {
		return []Mode{Mode(m)}
	}
	c, err := Open(Cgroup)
	if err != nil {
		t.Logf("cgroup mode unavailable: %v", err)
		return []Mode{Subreaper, Session}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return []Mode{Cgroup, Subreaper, Session}
}

// openMode opens a Containment in mode, closed (and checked) when the
// test ends.
func openMode(t *testing.T, mode Mode) *Containment {
	t.Helper()
	c, err := Open(mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// scansMade returns how many scans of every process s has begun.
func scansMade(s *scanner) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// eachMode runs f once per mode, with a fresh Containment that is closed
// (and checked to leave nothing) afterwards. Modes run one after the
// other: a subreaper is process-wide.
func eachMode(t *testing.T, f func(t *testing.T, c *Containment)) {
	for _, mode := range modes(t) {
		t.Run(string(mode), func(t *testing.T) {
			c, err := Open(mode)
			if err != nil {
				t.Fatal(err)
			}
			if c.Mode() != mode {
				t.Fatalf("Mode() = %s, want %s", c.Mode(), mode)
			}
			defer func() {
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			f(t, c)
		})
	}
}

// started is a group's first process, started with /bin/sh -c script in
// its own session.
type started struct {
	g   Group
	pid int
}

func start(t *testing.T, c *Containment, script string) started {
	t.Helper()
	return startWith(t, c, script, nil)
}

// startWith is start with files as the first process's standard files
// (syscall.ProcAttr's Files).
func startWith(t *testing.T, c *Containment, script string, files []uintptr) started {
	t.Helper()
	g, err := c.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := g.ForkExec("/bin/sh", []string{"/bin/sh", "-c", script}, &syscall.ProcAttr{
		Env:   []string{"PATH=" + os.Getenv("PATH")},
		Files: files,
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return started{g, pid}
}

// reap waits for the first process and reaps it, as its starter must.
func (s started) reap(t *testing.T) unix.WaitStatus {
	t.Helper()
	var ws unix.WaitStatus
	if _, err := unix.Wait4(s.pid, &ws, 0, nil); err != nil {
		t.Fatalf("wait4 %d: %v", s.pid, err)
	}
	return ws
}

// waitDone waits until g is done: no promise of how soon, so for
// testloop.Wait.
func waitDone(t *testing.T, g Group) {
	t.Helper()
	select {
	case <-g.Done():
	case <-time.After(testloop.Wait):
		m, _ := g.Members()
		t.Fatalf("group not done after %v; members %v", testloop.Wait, m)
	}
}

// waitDoneOrOnly waits until g is done or its only member is pid.
func waitDoneOrOnly(t *testing.T, g Group, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		select {
		case <-g.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
		m, err := g.Members()
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 1 && m[0].Pid == pid {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group not done after %v; members %v", within, m)
		}
	}
}

// waitMembers waits until n members of g run a command that contains
// cmd.
func waitMembers(t *testing.T, g Group, n int, cmd string) []Member {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := g.Members()
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, p := range m {
			if strings.Contains(p.Command, cmd) {
				k++
			}
		}
		if k >= n {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d members, want %d: %v", len(m), n, m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDetachedProcessesStayInTheGroup(t *testing.T) {
	eachMode(t, func(t *testing.T, c *Containment) {
		s := start(t, c, "setsid sh -c 'sleep 30' & (sh -c 'sleep 30 &' &); exit 3")
		if ws := s.reap(t); ws.ExitStatus() != 3 {
			t.Errorf("shell status %v", ws)
		}
		waitMembers(t, s.g, 2, "sleep 30")
		if s.g.Empty() {
			t.Fatal("group empty while its setsid child and double fork run")
		}
		reached, err := s.g.Signal(unix.SIGTERM, unix.SIGCONT, unix.SIGHUP)
		if err != nil || !reached {
			t.Errorf("Signal = %v, %v", reached, err)
		}
		waitDone(t, s.g)
		if reached, err := s.g.Signal(unix.SIGTERM); reached || err != nil {
			t.Errorf("Signal on an empty group = %v, %v", reached, err)
		}
		if err := s.g.Close(); err != nil {
			t.Error(err)
		}
	})
}

// TestGroupsWithoutATerminalKeepApart: two groups whose first processes
// have /dev/null as their standard files, as a probe's do (ptyio.Probe),
// claim none of each other's processes, an orphan included, and killing
// one leaves the other running. Before, subreaper mode took any
// character device on a first process's stdin for the group's terminal:
// every orphan, and every child of the agent, that held /dev/null was a
// member of every such group, and a probe's kill killed another's shell.
func TestGroupsWithoutATerminalKeepApart(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	files := []uintptr{null.Fd(), null.Fd(), null.Fd()}
	eachMode(t, func(t *testing.T, c *Containment) {
		a := startWith(t, c, "setsid sleep 30 & exit 0", files)
		a.reap(t)
		waitMembers(t, a.g, 1, "sleep 30")
		b := startWith(t, c, "exec sleep 31", files)
		for _, s := range []struct {
			g          Group
			own, other string
		}{{a.g, "sleep 30", "sleep 31"}, {b.g, "sleep 31", "sleep 30"}} {
			for _, m := range waitMembers(t, s.g, 1, s.own) {
				if strings.Contains(m.Command, s.other) {
					t.Errorf("the group of %q lists %v, of the other group", s.own, m)
				}
			}
		}
		if _, err := a.g.Kill(); err != nil {
			t.Error(err)
		}
		waitDone(t, a.g)
		if b.g.Empty() {
			t.Error("killing one group ended the other")
		}
		if _, err := b.g.Kill(); err != nil {
			t.Error(err)
		}
		if ws := b.reap(t); !ws.Signaled() || ws.Signal() != unix.SIGKILL {
			t.Errorf("the other group's process ended with %v, want SIGKILL by its own kill", ws)
		}
		waitDone(t, b.g)
		for _, g := range []Group{a.g, b.g} {
			if err := g.Close(); err != nil {
				t.Error(err)
			}
		}
	})
}

// A process whose first thread has ended (pthread_exit in main, here the
// helper's raw exit of its first thread) lives on in its other threads:
// the group is not empty while it runs, lists it, and a signal reaches
// it. Before, its first thread's zombie made it ended in every mode:
// subreaper and session mode found the group empty, so its command ended
// while it ran on, never listed nor stopped, and cgroup mode listed none
// of it and sent it no SIGTERM, only the SIGKILL after the grace.
func TestFirstThreadEnded(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	eachMode(t, func(t *testing.T, c *Containment) {
		pidFile := filepath.Join(t.TempDir(), "pid")
		s := start(t, c, firstThreadEnv+"="+firstThreadStays+" '"+exe+"' & echo $! >'"+pidFile+"'")
		if ws := s.reap(t); ws.ExitStatus() != 0 {
			t.Errorf("shell status %v", ws)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(testloop.Wait); ; time.Sleep(10 * time.Millisecond) {
			stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			if err != nil {
				t.Fatal(err)
			}
			if _, after, _ := strings.Cut(string(stat), ") "); strings.HasPrefix(after, "Z") {
				break // its first thread has ended
			}
			if time.Now().After(deadline) {
				t.Fatalf("the helper's first thread never ended: %s", stat)
			}
		}
		if s.g.Empty() {
			t.Error("group empty while a process whose first thread ended runs")
		}
		if m, err := s.g.Members(); err != nil || !slices.ContainsFunc(m, func(m Member) bool {
			return m.Pid == pid && strings.Contains(m.Command, filepath.Base(exe))
		}) {
			t.Errorf("Members = %v, %v; want %d %s", m, err, pid, exe)
		}
		if reached, err := s.g.Signal(unix.SIGTERM); !reached || err != nil {
			t.Errorf("Signal = %v, %v", reached, err)
		}
		waitDone(t, s.g)
		if err := s.g.Close(); err != nil {
			t.Error(err)
		}
	})
}

// One Containment at a time per process: a second Open fails while the
// first is open (in cgroup mode it would take over the first's cgroup,
// and its Close remove it), and succeeds once the first is closed.
func TestOpenIsOnePerProcess(t *testing.T) {
	eachMode(t, func(t *testing.T, c *Containment) {
		if second, err := Open(Session); err == nil {
			second.Close()
			t.Fatal("a second Containment opened while one is open")
		}
		s := start(t, c, "exit 0")
		s.reap(t)
		waitDone(t, s.g)
		if err := s.g.Close(); err != nil {
			t.Error(err)
		}
	})
	c, err := Open(Session)
	if err != nil {
		t.Fatalf("Open after the first was closed: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

func TestKillEndsWhatIgnoresTerm(t *testing.T) {
	eachMode(t, func(t *testing.T, c *Containment) {
		s := start(t, c, "trap '' TERM HUP; sleep 30 & sleep 30 & wait")
		waitMembers(t, s.g, 2, "sleep 30")
		if reached, err := s.g.Signal(unix.SIGTERM, unix.SIGCONT, unix.SIGHUP); !reached || err != nil {
			t.Errorf("Signal = %v, %v", reached, err)
		}
		time.Sleep(100 * time.Millisecond)
		if s.g.Empty() {
			t.Fatal("TERM and HUP are ignored, yet the group emptied")
		}
		if reached, err := s.g.Kill(); !reached || err != nil {
			t.Errorf("Kill = %v, %v", reached, err)
		}
		waitDone(t, s.g)
		if ws := s.reap(t); ws.Signal() != unix.SIGKILL {
			t.Errorf("shell status %v", ws)
		}
		if err := s.g.Close(); err != nil {
			t.Error(err)
		}
	})
}

// killers are the two senders of a group's SIGKILL: the group's own
// Kill, and the Containment's KillAll.
var killers = []struct {
	name string
	kill func(c *Containment, g Group) error
}{
	{"Kill", func(_ *Containment, g Group) error { _, err := g.Kill(); return err }},
	{"KillAll", func(c *Containment, _ Group) error { return c.KillAll() }},
}

// Group.Killed records a SIGKILL that reached a live process of the group,
// whichever sent it: the group's own Kill, or the Containment's KillAll,
// which a second stop signal to the agent sends. A group whose processes
// had ended by then, or that got only SIGTERM, was not killed.
func TestKilledWhoeverKills(t *testing.T) {
	for _, tt := range killers {
		t.Run(tt.name, func(t *testing.T) {
			eachMode(t, func(t *testing.T, c *Containment) {
				ended := start(t, c, "exit 0")
				ended.reap(t)
				waitDone(t, ended.g)
				termed := start(t, c, "sleep 30")
				waitMembers(t, termed.g, 1, "sleep 30")
				if reached, err := termed.g.Signal(unix.SIGTERM); !reached || err != nil {
					t.Errorf("Signal = %v, %v", reached, err)
				}
				termed.reap(t)
				waitDone(t, termed.g)
				s := start(t, c, "trap '' TERM HUP; sleep 30 & wait")
				waitMembers(t, s.g, 2, "sleep 30") // the shell and its sleep: one Kill ends both
				if s.g.Killed() {
					t.Error("Killed before any SIGKILL")
				}
				if err := tt.kill(c, s.g); err != nil {
					t.Error(err)
				}
				waitDone(t, s.g)
				if ws := s.reap(t); ws.Signal() != unix.SIGKILL {
					t.Errorf("shell status %v", ws)
				}
				if !s.g.Killed() {
					t.Errorf("the group whose processes %s killed does not say Killed", tt.name)
				}
				for _, g := range []started{ended, termed} {
					if g.g.Killed() {
						t.Errorf("the group of %d, ended before the kill, says Killed", g.pid)
					}
					if err := g.g.Close(); err != nil {
						t.Error(err)
					}
				}
				if err := s.g.Close(); err != nil {
					t.Error(err)
				}
			})
		})
	}
}

// A process that blocks the signals it is sent takes them only once it
// unblocks them, and may fork before: dash does, around each command it
// forks. Signal waits for it to take them (holdWait), and what it forked
// meanwhile gets them too. Here perl holds TERM for 300 ms, forks a sleep
// and lets TERM go. It names itself "holding" once it holds TERM (a name
// the script's text does not hold, or waitMembers would find the shell).
func TestSignalReachesWhatAHolderForks(t *testing.T) {
	const holder = `exec perl -e '
		use POSIX;
		my $term = POSIX::SigSet->new(SIGTERM);
		sigprocmask(SIG_BLOCK, $term);
		$0 = "hold" . "ing";
		select(undef, undef, undef, 0.3);
		if (fork() == 0) { sigprocmask(SIG_UNBLOCK, $term); exec "sleep", "300" }
		sigprocmask(SIG_UNBLOCK, $term);
		sleep 300'`
	eachMode(t, func(t *testing.T, c *Containment) {
		s := start(t, c, holder)
		waitMembers(t, s.g, 1, "holding")
		if reached, err := s.g.Signal(unix.SIGTERM); !reached || err != nil {
			t.Errorf("Signal = %v, %v", reached, err)
		}
		waitDone(t, s.g) // the sleep would last 300 s
		if ws := s.reap(t); ws.Signal() != unix.SIGTERM {
			t.Errorf("perl's status %v, want killed by SIGTERM", ws)
		}
		if err := s.g.Close(); err != nil {
			t.Error(err)
		}
	})
}

func TestSignalDoesNotCountAZombie(t *testing.T) {
	eachMode(t, func(t *testing.T, c *Containment) {
		s := start(t, c, "exit 0")
		waitDone(t, s.g)
		// The shell is a zombie now (not reaped): a signal hits nobody alive.
		if reached, err := s.g.Signal(unix.SIGTERM); reached || err != nil {
			t.Errorf("Signal = %v, %v", reached, err)
		}
		if ws := s.reap(t); ws.ExitStatus() != 0 || ws.Signaled() {
			t.Errorf("shell status %v", ws)
		}
		if err := s.g.Close(); err != nil {
			t.Error(err)
		}
	})
}

// The reaper collects orphans and never the status of a group's first
// process, which its starter waits for.
func TestReaperLeavesTheFirstProcessToItsStarter(t *testing.T) {
	eachMode(t, func(t *testing.T, c *Containment) {
		s := start(t, c, "for i in $(seq 50); do (true &); done; sleep 0.2; exit 7")
		if ws := s.reap(t); ws.ExitStatus() != 7 {
			t.Errorf("shell status %v, want exit 7", ws)
		}
		waitDone(t, s.g)
		if err := s.g.Close(); err != nil {
			t.Error(err)
		}
	})
}

// Without cgroup.kill (before Linux 5.14) Kill freezes the cgroup, kills
// every process and thaws it.
func TestKillWithoutCgroupKill(t *testing.T) {
	c, err := Open(Cgroup)
	if err != nil {
		t.Skipf("cgroup mode unavailable: %v", err)
	}
	defer c.Close()
	c.m.(*cgroupTree).hasKill = false
	s := start(t, c, "trap '' TERM HUP; for i in 1 2 3; do sleep 30 & done; wait")
	waitMembers(t, s.g, 3, "sleep 30")
	if reached, err := s.g.Kill(); !reached || err != nil {
		t.Errorf("Kill = %v, %v", reached, err)
	}
	waitDone(t, s.g)
	s.reap(t)
	if _, frozen, err := readEvents(s.g.(*cgroupGroup).dir); frozen || err != nil {
		t.Errorf("left frozen %v (%v)", frozen, err)
	}
	if err := s.g.Close(); err != nil {
		t.Error(err)
	}
}

// deadInstance returns the name of an agent instance that no longer runs:
// a process that has exited, with its pid and start time.
func deadInstance(t *testing.T) instance {
	t.Helper()
	self, err := self()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := readProc(pid)
	var ws unix.WaitStatus
	unix.Wait4(pid, &ws, 0, nil)
	return instance{ns: self.ns, pid: pid, start: p.start, scope: self.scope}
}

// liveInstance names a live process other than this one (the test's
// parent), as a live agent would be named.
func liveInstance(t *testing.T) instance {
	t.Helper()
	self, err := self()
	if err != nil {
		t.Fatal(err)
	}
	p, ok := readProc(os.Getppid())
	if !ok {
		t.Fatal("no parent process")
	}
	return instance{ns: self.ns, pid: p.pid, start: p.start, scope: self.scope}
}

// startMarked starts sleep 300 with inst's marker and terminal 1's, in a
// cgroup directory dir if not "". It returns the pid.
func startMarked(t *testing.T, inst instance, dir string) int {
	t.Helper()
	return startMarkedTerm(t, inst, "1", dir)
}

// startMarkedTerm is startMarked for terminal term.
func startMarkedTerm(t *testing.T, inst instance, term, dir string) int {
	t.Helper()
	sys := &syscall.SysProcAttr{Setsid: true}
	if dir != "" {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		sys.UseCgroupFD, sys.CgroupFD = true, fd
	}
	pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "300"}, &syscall.ProcAttr{
		Env: []string{InstanceEnv + "=" + inst.String(), TerminalEnv + "=" + term},
		Sys: sys,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil) // may have been reaped by a subreaper
	})
	return pid
}

// KillAll in a mode that finds processes by looking (Subreaper, Session)
// kills a process that carries the instance's marker and that nothing else
// places (no group holds it, the reaper leaves it: it is an os/exec child
// in the agent's session), at every look (the marker is read once and
// remembered); it leaves one with another instance's marker alone.
func TestKillAllKillsTheMarked(t *testing.T) {
	eachMode(t, func(t *testing.T, c *Containment) {
		if c.Mode() == Cgroup {
			t.Skip("cgroup mode kills what its cgroups hold, not what carries the marker")
		}
		other := sleepWith(t, instance{pid: 1})
		for i := range 2 {
			marked := sleepWith(t, c.inst)
			if err := c.KillAll(); err != nil {
				t.Fatal(err)
			}
			if running(marked.Process.Pid) {
				t.Errorf("KillAll %d left the marked process %d running", i+1, marked.Process.Pid)
			} else if err := marked.Wait(); marked.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("KillAll %d: the marked process ended with %v, want SIGKILL", i+1, err)
			}
		}
		if !running(other.Process.Pid) {
			t.Errorf("KillAll killed %d, another instance's", other.Process.Pid)
		}
	})
}

// sleepWith starts sleep 300 with inst's marker, with os/exec, in this
// process's session: unlike startMarked's session leader, which
// Subreaper mode's reaper takes as its own, nothing but the marker makes
// it the instance's.
func sleepWith(t *testing.T, inst instance) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "300")
	cmd.Env = inst.env()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

func running(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.live()
}

// Sweep removes a dead instance's cgroup and marked processes, and leaves
// a live instance's alone, and a dead instance's of another sweep scope.
// (One of no scope is left alone too, but agents of no scope beside this
// test may sweep it.)
func TestSweep(t *testing.T) {
	eachMode(t, func(t *testing.T, c *Containment) {
		dead, live := deadInstance(t), liveInstance(t)
		deadMarked := startMarked(t, dead, "")
		liveMarked := startMarked(t, live, "")
		otherScope := dead
		otherScope.scope = "other" + strconv.Itoa(os.Getpid())
		otherMarked := startMarked(t, otherScope, "")
		var deadDir, deadInCgroup, liveDir string
		var liveInCgroup int
		if place, err := findCgroup2(); err == nil && c.Mode() == Cgroup {
			deadDir = place.dir(place.self + "/" + instanceDirPrefix + dead.String())
			liveDir = place.dir(place.self + "/" + instanceDirPrefix + live.String())
			for _, d := range []string{deadDir, deadDir + "/t1", liveDir} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { removeTree(deadDir); killTree(liveDir, true, time.Second, nil, nil); removeTree(liveDir) })
			// A process without the marker, held by the cgroup alone.
			deadInCgroup = deadDir + "/t1"
			pid := startMarked(t, instance{}, deadInCgroup)
			liveInCgroup = startMarked(t, instance{}, liveDir)
			defer func() {
				if running(pid) {
					t.Errorf("process %d in the dead instance's cgroup survived", pid)
				}
			}()
		}
		cgroups, procs, err := c.Sweep()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("swept %d cgroups, %d processes", cgroups, procs)
		// SIGKILL's end is the kernel's, with no promise of when: a
		// loaded machine may take more than a moment.
		for deadline := time.Now().Add(testloop.Wait); running(deadMarked) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if running(deadMarked) {
			t.Error("the dead instance's marked process survived")
		}
		if !running(liveMarked) {
			t.Error("the live instance's marked process was killed")
		}
		if !running(otherMarked) {
			t.Error("the marked process of a dead instance of another sweep scope was killed")
		}
		if deadDir != "" {
			if _, err := os.Stat(deadDir); err == nil {
				t.Error("the dead instance's cgroup is still there")
			}
			if !running(liveInCgroup) {
				t.Error("the live instance's cgroup was swept")
			}
		}
	})
}

// The reaper's rule, on the children an agent has.
func TestReaperRule(t *testing.T) {
	const self, sid = 100, 50
	r := &reaper{self: self, sid: sid, registered: map[int]bool{200: true}, known: func(p proc) bool { return p.pid == 400 }}
	tests := []struct {
		name string
		p    proc
		want verdict
	}{
		{"a group's first process", proc{pid: 200, ppid: self, sid: 200}, leave},
		{"an os/exec child", proc{pid: 201, ppid: self, sid: sid}, leave},
		{"an orphan in a terminal's session", proc{pid: 301, ppid: self, sid: 200}, take},
		{"an orphan in a session of its own child's", proc{pid: 302, ppid: self, sid: 9}, take},
		{"a session leader a group recorded", proc{pid: 400, ppid: self, sid: 400}, take},
		{"a session leader nobody knows", proc{pid: 401, ppid: self, sid: 401}, takeIfUnheld},
	}
	for _, tt := range tests {
		if got := r.judge(tt.p); got != tt.want {
			t.Errorf("%s: judge = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The reaper never takes a child that another part of the program waits
// for: each of 1,000 os/exec children of the agent is left a zombie until
// the reaper has had its SIGCHLD, and is then reaped by its own Wait, with
// its status. Half of them lead a session of their own, as pty.Start's
// children do. The quick run starts 200 (the race is lost at once, if at
// all, and TestReaperRule checks the rule case by case); SHELLAGENT_LONG=1
// starts 1,000.
func TestReaperLeavesOSExecChildren(t *testing.T) {
	openMode(t, Subreaper)
	n, workers := 200, 4
	if testloop.Enabled() {
		n = 1000
	}
	var stolen, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				cmd := exec.Command("/bin/sh", "-c", "exit 3")
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: i%2 == 1}
				if err := cmd.Start(); err != nil {
					t.Error(err)
					failed.Add(1)
					return
				}
				// Until it is a zombie, and a little more: time for a
				// reap pass.
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Microsecond) {
					if p, ok := readProc(cmd.Process.Pid); !ok || p.zombie() {
						break
					}
				}
				time.Sleep(2 * time.Millisecond)
				err := cmd.Wait()
				if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
					if stolen.Add(1) <= 5 {
						t.Errorf("child %d (setsid %v): Wait = %v", i, i%2 == 1, err)
					}
				}
			}
		})
	}
	wg.Wait()
	if stolen.Load() > 0 || failed.Load() > 0 {
		t.Errorf("%d of %d children were reaped before their Wait", stolen.Load(), n)
	}
}

// zombieChildren lists this process's zombie children outside its own
// session: orphans, which the reaper is to take.
func zombieChildren(t *testing.T) []proc {
	t.Helper()
	procs, err := scanProcs()
	if err != nil {
		t.Fatal(err)
	}
	self, _ := readProc(os.Getpid())
	return slices.DeleteFunc(procs, func(p proc) bool {
		return p.ppid != self.pid || !p.zombie() || p.sid == self.sid
	})
}

// Orphans of every kind are reaped: in a terminal's session, in a session
// of their own with the marker, and without it (env -i). One that leaves
// the session and clears its environment before anything sees it is no
// terminal's (the group ends without it), but it is killed with the
// containment.
func TestReaperTakesOrphans(t *testing.T) {
	c, err := Open(Subreaper)
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "escaped")
	// The group's watch looks when the shell starts and when it exits:
	// the escape comes between, from a subshell gone before the shell.
	s := start(t, c, `for i in $(seq 20); do (true &); (setsid true &); (setsid env -i true &); done
sleep 1; (setsid env -i sleep 300 </dev/null >/dev/null 2>&1 & echo $! >`+pidFile+`); exit 0`)
	s.reap(t)
	b, err := os.ReadFile(pidFile) // written before the shell exits
	if err != nil {
		t.Fatal(err)
	}
	escaped, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The escaped sleep is the group's only if a look happened to see it
	// while its parent, a member, still ran (a reap pass can trigger one):
	// the group is then live with that one member. Either way the orphans
	// are reaped and Close kills the sleep.
	waitDoneOrOnly(t, s.g, escaped, 5*time.Second)
	if err := s.g.Close(); err != nil {
		t.Error(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(zombieChildren(t)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if z := zombieChildren(t); len(z) > 0 {
		t.Errorf("%d orphans left unreaped: %v", len(z), z)
	}
	if !running(escaped) {
		t.Fatalf("the escaped sleep %d is not running", escaped)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if running(escaped) {
		t.Errorf("the escaped sleep %d outlived the containment", escaped)
		unix.Kill(escaped, unix.SIGKILL)
	}
}

// An error about processes left names each: pid, command line and what
// the scan showed; five at most.
func TestListProcs(t *testing.T) {
	self, ok := readProc(os.Getpid())
	if !ok {
		t.Fatal("no /proc/self")
	}
	doomed := self
	doomed.sigPending, doomed.exiting = 1<<(unix.SIGKILL-1), true
	got := listProcs([]proc{self, doomed})
	want := fmt.Sprintf("%d %q (state %c, parent %d, session %d); %[1]d %[2]q (state %[3]c, parent %[4]d, session %[5]d, exiting, doomed)",
		self.pid, commandLine(self.pid), self.state, self.ppid, self.sid)
	if got != want {
		t.Errorf("listProcs:\n got %s\nwant %s", got, want)
	}
	if got := listProcs(make([]proc, 7)); !strings.HasSuffix(got, "; and 2 more") {
		t.Errorf("listProcs of 7: %s", got)
	}
}

// A kill whose write of cgroup.kill fails sent nothing: neither a
// group's Kill nor the Containment's KillAll reports it as reached or
// notes it (Killed), so that the terminal's exit does not claim a SIGKILL
// that was never sent. The write is made to fail by pointing the tree and
// the group at a copy of their cgroups whose cgroup.kill is a directory
// (EISDIR); everything else of the kill is the real path.
func TestKillThatFailsIsNotNoted(t *testing.T) {
	c, tree := openCgroupMode(t)
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	if !tree.hasKill {
		t.Skip("no cgroup.kill on this kernel (before Linux 5.14)")
	}
	s := start(t, c, "exec sleep 30")
	sleeping(t, s.pid)
	g := s.g.(*cgroupGroup)
	fake := t.TempDir()
	for _, d := range []string{fake, filepath.Join(fake, "t")} {
		if err := os.MkdirAll(filepath.Join(d, "cgroup.kill"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.events"), []byte("populated 1\nfrozen 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(fake, "t", "cgroup.procs"), []byte(strconv.Itoa(s.pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	realTree, realGroup := tree.dir, g.dir
	tree.dir, g.dir = fake, filepath.Join(fake, "t")
	reached, err := g.Kill()
	killed := g.Killed()
	kerr := c.KillAll()
	tree.dir, g.dir = realTree, realGroup
	if err == nil || kerr == nil {
		t.Fatalf("Kill, KillAll with cgroup.kill a directory = %v, %v; want errors", err, kerr)
	}
	if reached || killed {
		t.Errorf("Kill whose write failed: reached %v, Killed %v; want neither", reached, killed)
	}
	if g.Killed() {
		t.Error("KillAll whose write failed noted a kill")
	}
	if p, ok := readProc(s.pid); !ok || !p.live() {
		t.Fatalf("sleep is not live after kills that failed: %+v", p)
	}
	reached, err = g.Kill()
	if !reached || err != nil || !g.Killed() {
		t.Errorf("Kill = %v, %v, Killed %v; want reached, noted", reached, err, g.Killed())
	}
	s.reap(t)
	waitDone(t, g)
	if err := g.Close(); err != nil {
		t.Error(err)
	}
}

// A kill in cgroup mode is noted (Group.Killed) by the time it has been
// sent: the terminal whose processes it ends may see them gone, and ask
// Killed for its exit status, before the sender returns. Both senders,
// the group's Kill and the containment's KillAll, are looked at the
// moment their kill has been sent, once the group is empty.
// Before, the kill was noted after the write returned, and an exit could
// say SIGTERM for a command the second stop signal killed
// (TestSecondSignalDuringShutdown failed so once).
func TestKillIsNotedBeforeItsProcessesAreGone(t *testing.T) {
	for _, tt := range killers {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := openCgroupMode(t)
			defer func() {
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			s := start(t, c, "exec sleep 30")
			sleeping(t, s.pid)
			looked, noted := false, false
			look := func(string) {
				if looked {
					return
				}
				looked = true
				waitDone(t, s.g)
				noted = s.g.Killed()
			}
			afterKill.Store(&look)
			err := tt.kill(c, s.g)
			afterKill.Store(nil)
			if err != nil {
				t.Fatal(err)
			}
			if !looked || !noted {
				t.Errorf("once the kill was sent (looked %v) and the group empty, Killed = %v; want true", looked, noted)
			}
			s.reap(t)
			if err := s.g.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}
