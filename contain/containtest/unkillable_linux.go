package containtest

import (
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// freezerV1 is where the cgroup v1 freezer is mounted, on a machine that
// has one. A process frozen there cannot act on a SIGKILL until it is
// thawed: it stays in uninterruptible sleep ("D") with SIGKILL pending,
// as a process stuck on a dead NFS or FUSE mount does. (The cgroup v2
// freezer lets a killed process go.)
const freezerV1 = "/sys/fs/cgroup/freezer"

// Unkillable freezes process pid in a v1 freezer cgroup of its own, so that
// no signal ends it, and returns what thaws it. It skips the test where
// there is no v1 freezer to write (a machine with cgroup v2 alone, or
// no privilege): no other way to make a process that SIGKILL does not
// end is safe in a test.
func Unkillable(t *testing.T, pid int) (thaw func()) {
	t.Helper()
	dir := filepath.Join(freezerV1, "shellagent-test-"+rand.Text()[:12])
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no cgroup v1 freezer to make an unkillable process with: %v", err)
	}
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0); err != nil {
			t.Fatal(err)
		}
	}
	thawed := false
	thaw = func() {
		if !thawed {
			thawed = true
			write("freezer.state", "THAWED")
		}
	}
	t.Cleanup(func() {
		thaw()
		// The process dies of its SIGKILL once thawed, and leaves.
		RemoveOnceEmpty(t, dir)
	})
	write("cgroup.procs", strconv.Itoa(pid))
	write("freezer.state", "FROZEN")
	for deadline := time.Now().Add(testloop.Wait); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(b)) == "FROZEN" {
			return thaw
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not frozen after %v: %s", dir, testloop.Wait, b)
		}
	}
}

// RemoveOnceEmpty removes the cgroup directory dir, trying again until
// the processes it holds have left it (at most testloop.Wait); it is no
// error if dir is gone already.
func RemoveOnceEmpty(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(testloop.Wait); ; time.Sleep(5 * time.Millisecond) {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("remove %s: %v", dir, err)
			return
		}
	}
}
