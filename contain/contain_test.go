package contain

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// modes are the modes this machine can run: Subreaper always, Cgroup
// where cgroups can be created. SHELLAGENT_TEST_CONTAINMENT=subreaper
// keeps the tests to Subreaper.
func modes(t *testing.T) []Mode {
	if os.Getenv("SHELLAGENT_TEST_CONTAINMENT") == "subreaper" {
		return []Mode{Subreaper}
	}
	c, err := Open(Cgroup)
	if err != nil {
		t.Logf("cgroup mode unavailable: %v", err)
		return []Mode{Subreaper}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return []Mode{Cgroup, Subreaper}
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
	g, err := c.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := g.ForkExec("/bin/sh", []string{"/bin/sh", "-c", script}, &syscall.ProcAttr{
		Env: []string{"PATH=" + os.Getenv("PATH")},
		Sys: &syscall.SysProcAttr{Setsid: true},
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

func waitDone(t *testing.T, g Group, within time.Duration) {
	t.Helper()
	select {
	case <-g.Done():
	case <-time.After(within):
		m, _ := g.Members()
		t.Fatalf("group not done after %v; members %v", within, m)
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
		waitDone(t, s.g, 5*time.Second)
		if reached, err := s.g.Signal(unix.SIGTERM); reached || err != nil {
			t.Errorf("Signal on an empty group = %v, %v", reached, err)
		}
		if err := s.g.Close(); err != nil {
			t.Error(err)
		}
	})
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
		waitDone(t, s.g, 5*time.Second)
		if ws := s.reap(t); ws.Signal() != unix.SIGKILL {
			t.Errorf("shell status %v", ws)
		}
		if err := s.g.Close(); err != nil {
			t.Error(err)
		}
	})
}

func TestSignalDoesNotCountAZombie(t *testing.T) {
	eachMode(t, func(t *testing.T, c *Containment) {
		s := start(t, c, "exit 0")
		waitDone(t, s.g, 5*time.Second)
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
