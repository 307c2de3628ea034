package contain_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shellagent/contain"
	"shellagent/contain/containtest"
)

// A process that SIGKILL does not end (frozen in uninterruptible sleep, as
// on a dead NFS or FUSE mount), which KillAll gave up on after waiting for
// it, is not waited for again by the Close that follows, as at the agent's
// end: Close gives it up at once, with an error naming it. Before, Close
// waited for it as long again (twice CloseTimeout), and the agent's end
// took that much longer.
func TestCloseDoesNotWaitAgainForWhatKillAllGaveUp(t *testing.T) {
	t.Parallel()
	c, err := contain.Open(contain.Cgroup)
	if err != nil {
		t.Skipf("cgroup mode unavailable: %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			c.Close()
		}
	})
	g, err := c.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := g.ForkExec("/bin/sleep", []string{"sleep", "306"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Setsid: true}})
	if err != nil {
		t.Fatal(err)
	}
	cgroup := cgroupOf(t, pid)
	thaw := containtest.Unkillable(t, pid)
	if err := c.KillAll(); err == nil || !strings.Contains(err.Error(), strconv.Itoa(pid)) {
		t.Errorf("KillAll = %v, want an error naming %d", err, pid)
	}
	start := time.Now()
	err = c.Close()
	took := time.Since(start)
	closed = true
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(pid)) {
		t.Errorf("Close = %v, want an error naming %d", err, pid)
	}
	if took > contain.CloseTimeout {
		t.Errorf("Close took %v for a process KillAll had given up on, more than CloseTimeout %v", took, contain.CloseTimeout)
	}
	thaw()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Error(err)
	}
	// The cgroups Close could not remove, as the next agent's sweep would.
	for _, dir := range []string{cgroup, filepath.Dir(cgroup)} {
		containtest.RemoveOnceEmpty(t, dir)
	}
}

// cgroupOf returns the cgroup2 directory of process pid.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(unifiedRoot(t), rest)
		}
	}
	t.Fatalf("no cgroup2 line in /proc/%d/cgroup: %s", pid, b)
	return ""
}

// unifiedRoot is where the cgroup2 tree is mounted (/proc/self/mountinfo).
func unifiedRoot(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && len(f) > 4 && strings.HasPrefix(post, "cgroup2 ") {
			return f[4]
		}
	}
	t.Fatal("no cgroup2 mount")
	return ""
}
