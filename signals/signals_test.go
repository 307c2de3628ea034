package signals

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseStat(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
		want Proc
	}{
		{"42 (sleep) S 1 40 39 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 777 1 2", true, Proc{Pid: 42, Pgid: 40, Sid: 39, Start: 777}},
		{"42 (a) b (c) R 1 40 39 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 9 1 2", true, Proc{Pid: 42, Pgid: 40, Sid: 39, Start: 9}},
		{"42 (dash) Z 1 40 39 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 9 1 2", false, Proc{}},
		{"42 (short) S 1 40", false, Proc{}},
		{"garbage", false, Proc{}},
	}
	for _, tt := range tests {
		got, ok := parseStat(42, []byte(tt.line))
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func TestName(t *testing.T) {
	for sig, want := range map[unix.Signal]string{unix.SIGTERM: "SIGTERM", unix.SIGKILL: "SIGKILL", unix.SIGINT: "SIGINT", unix.SIGHUP: "SIGHUP"} {
		if got := Name(sig); got != want {
			t.Errorf("Name(%d) = %q, want %q", sig, got, want)
		}
	}
}

// startSession runs script with /bin/sh in a new session and waits until
// want processes of it are running.
func startSession(t *testing.T, script string, want int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, cmd.Process.Pid, func(n int) bool { return n >= want })
	return cmd
}

func waitMembers(t *testing.T, sid int, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs, err := SessionMembers(sid)
		if err != nil {
			t.Fatal(err)
		}
		if ok(len(procs)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d has %d live processes", sid, len(procs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEscalation(t *testing.T) {
	tests := []struct {
		name   string
		script string
		procs  int
		grace  time.Duration
		hurry  bool
		want   unix.Signal
	}{
		{"honours TERM", "sleep 30 & sleep 30; wait", 3, time.Hour, false, unix.SIGTERM},
		{"ignores TERM and HUP", "trap '' TERM HUP; sleep 30 & sleep 30; wait", 3, 200 * time.Millisecond, false, unix.SIGKILL},
		{"second cancel skips the grace", "trap '' TERM HUP; sleep 30; wait", 2, time.Hour, true, unix.SIGKILL},
		// -m gives the job its own process group: only the session scan finds it.
		{"job in its own group", "set -m; trap '' TERM HUP; sleep 30 & wait", 2, 200 * time.Millisecond, false, unix.SIGKILL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := startSession(t, tt.script, tt.procs)
			sid := cmd.Process.Pid
			waited := make(chan struct{})
			go func() { cmd.Wait(); close(waited) }()
			start := time.Now()
			e := Escalate(sid, tt.grace)
			if tt.hurry {
				e.Hurry()
				e.Hurry() // idempotent
			}
			waitMembers(t, sid, func(n int) bool { return n == 0 })
			e.Finish()
			<-waited
			if got := e.Last(); got != tt.want {
				t.Errorf("Last() = %s, want %s", Name(got), Name(tt.want))
			}
			if tt.want == unix.SIGKILL && !tt.hurry && time.Since(start) < tt.grace {
				t.Errorf("SIGKILL came before the grace period")
			}
		})
	}
}

func TestEscalateEmptySessionSendsNothing(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	e := Escalate(cmd.Process.Pid, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	e.Finish()
	if e.Last() != 0 {
		t.Errorf("Last() = %s for an empty session", Name(e.Last()))
	}
}

func TestSessionMembersOldestFirst(t *testing.T) {
	cmd := startSession(t, "sleep 30 & sleep 30 & wait", 3)
	defer func() {
		SignalSession(cmd.Process.Pid, unix.SIGKILL)
		cmd.Wait()
	}()
	procs, err := SessionMembers(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 3 || procs[0].Pid != cmd.Process.Pid {
		t.Errorf("members %+v: want 3, the leader %d first", procs, cmd.Process.Pid)
	}
	for _, p := range procs {
		if p.Sid != cmd.Process.Pid {
			t.Errorf("member %+v is not in session %d", p, cmd.Process.Pid)
		}
	}
}
