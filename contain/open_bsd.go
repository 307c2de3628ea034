//go:build darwin || freebsd

// What this file does: says which modes macOS and FreeBSD have (Session;
// Auto means Session) and refuses the others with the reason. The same
// refusal on Linux is TestContainmentFlag's (cmd/shellagent), and the
// session mode that Auto opens here is what every contain test runs in
// with SHELLAGENT_TEST_CONTAINMENT=session.

package contain

import (
	"fmt"
	"runtime"
)

func (c *Containment) open(mode Mode) error {
	switch mode {
	case Cgroup:
		return fmt.Errorf("cgroup containment is not available on %s: it needs Linux's cgroup v2 (use session, or auto)", runtime.GOOS)
	case Subreaper:
		return fmt.Errorf("subreaper containment is not available on %s: it needs Linux's PR_SET_CHILD_SUBREAPER (use session, or auto)", runtime.GOOS)
	}
	c.m, c.mode = openSession(c.inst), Session
	return nil
}

// pidNamespace is 0: there are no pid namespaces here.
func pidNamespace() (uint64, error) { return 0, nil }

// ownProc has nothing to check: processes are read through sysctl, which
// always shows this process's own pids.
func ownProc() error { return nil }

// sweepCgroups has nothing to sweep: there are no cgroups here.
func sweepCgroups(*judge, terminalSet) (int, error) { return 0, nil }
