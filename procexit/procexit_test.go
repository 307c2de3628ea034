package procexit

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start starts /bin/sh -c script as a child of the test.
func start(t *testing.T, script string) int {
	t.Helper()
	pid, err := syscall.ForkExec("/bin/sh", []string{"/bin/sh", "-c", script}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func waitWithin(t *testing.T, p *Process, d time.Duration) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- p.Wait() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(d):
		t.Fatalf("Wait did not return within %v", d)
	}
	return nil
}

// The rules every OS's watch keeps: Wait returns once the process has
// exited; a child's Status is its wait status, and the child is still
// there (a zombie) until Reap; Close ends a Wait in progress; a process
// that is gone is ErrGone.
func TestWatch(t *testing.T) {
	tests := []struct {
		script string
		want   unix.WaitStatus
	}{
		{"exit 3", 3 << 8},
		{"exit 0", 0},
		{"kill -TERM $$", unix.WaitStatus(unix.SIGTERM)},
		{"sleep 0.2; exit 7", 7 << 8},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			pid := start(t, tt.script)
			p, err := WatchChild(pid)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := waitWithin(t, p, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			ws, err := p.Status()
			if err != nil || ws != tt.want {
				t.Errorf("Status = %v (%#x), %v; want %#x", ws, uint32(ws), err, uint32(tt.want))
			}
			// Not reaped: the pid still names a zombie.
			if err := unix.Kill(pid, 0); err != nil {
				t.Errorf("after Status, kill(%d, 0) = %v: reaped too soon", pid, err)
			}
			if err := p.Reap(); err != nil {
				t.Error(err)
			}
			if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
				t.Errorf("after Reap, kill(%d, 0) = %v", pid, err)
			}
		})
	}
}

func TestCloseEndsWait(t *testing.T) {
	pid := start(t, "sleep 30")
	defer func() {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
	}()
	p, err := Watch(pid)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- p.Wait() }()
	time.Sleep(50 * time.Millisecond)
	p.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Wait after Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end Wait")
	}
}

func TestWatchGone(t *testing.T) {
	pid := start(t, "exit 0")
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	if p, err := Watch(pid); !errors.Is(err, ErrGone) {
		if p != nil {
			p.Close()
		}
		t.Errorf("Watch of a reaped process = %v, want ErrGone", err)
	}
}

// Two watches of one process both see its exit.
func TestTwoWatches(t *testing.T) {
	pid := start(t, "sleep 0.1")
	a, err := WatchChild(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Watch(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, p := range []*Process{a, b} {
		if err := waitWithin(t, p, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Reap(); err != nil {
		t.Fatal(err)
	}
}
