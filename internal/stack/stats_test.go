package stack

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// TestTreeStats: this process has memory and has spent CPU; a child
// adds its own; a pid that is gone adds nothing.
func TestTreeStats(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TreeStats reads /proc")
	}
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) { // spend some CPU: the clock ticks at 10 ms
	}
	rss, cpu := TreeStats([]int{os.Getpid()})
	if rss <= 1<<20 || cpu <= 0 {
		t.Fatalf("TreeStats(self) = %d bytes, %v; want more than 1 MiB and some CPU", rss, cpu)
	}
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		child.Process.Kill()
		child.Wait()
	})
	rss2, _ := TreeStats([]int{os.Getpid(), child.Process.Pid})
	if rss2 <= rss {
		t.Errorf("TreeStats(self, sleep) = %d bytes, not more than self alone (%d)", rss2, rss)
	}
	if rss, cpu := TreeStats([]int{1 << 30}); rss != 0 || cpu != 0 {
		t.Errorf("TreeStats(no such pid) = %d, %v; want 0, 0", rss, cpu)
	}
}
