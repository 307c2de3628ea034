//go:build darwin || freebsd

package daemon

import (
	"time"

	"golang.org/x/sys/unix"
)

// endProbe kills every process of the probe's process group, which the
// probe, process pid, leads: twice, a moment apart, so that a process
// forked meanwhile is killed too. The probe must be a child of this
// process that has not been reaped: its pid then names its process group,
// and nothing else. A descendant in another group is not found (on
// Linux, every process of its session and every descendant is), and
// nothing checks what is left: upgrade in place is refused here anyway
// (errNoUpgrade), once the probe has run.
func endProbe(pid int) error {
	for range 2 {
		unix.Kill(-pid, unix.SIGKILL) // Best effort: ESRCH once the group is gone.
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}
