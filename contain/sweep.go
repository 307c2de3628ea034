package contain

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// SweepTimeout bounds how long Sweep waits for the processes it killed;
// twice that for those on their way out (see ending).
const SweepTimeout = 2 * time.Second

// Sweep removes what agent instances that are no longer alive left
// behind, whichever mode they ran in: it kills the processes of their
// cgroups and removes the cgroups (wherever in the cgroup2 hierarchy this
// agent can see and write them), and kills every process whose
// SHELLAGENT_INSTANCE names a dead instance. An instance is dead when its
// pid no longer names a process with its start time. Instances of another
// pid namespace are left alone, as this agent cannot tell whether they
// live, and so are instances of another sweep scope (SweepScopeEnv). It
// returns how many cgroups and processes it removed.
func (c *Containment) Sweep() (cgroups, procs int, err error) {
	cgroups, err1 := sweepCgroups(c.inst)
	procs, err2 := sweepMarked(c.inst)
	return cgroups, procs, errors.Join(err1, err2)
}

// dead reports whether an instance named s is of self's pid namespace and
// sweep scope, and no longer alive.
func dead(s string, self instance) bool {
	inst, ok := parseInstance(s)
	return ok && inst.ns == self.ns && inst.scope == self.scope && !inst.alive()
}

// sweepMarked kills the processes marked with a dead instance until none
// is left (a fork loop keeps making more for a moment; see ending).
func sweepMarked(self instance) (int, error) {
	for end := newEnding(SweepTimeout); ; {
		began := time.Now()
		procs, err := scanProcs()
		if err != nil {
			return end.count(), err
		}
		var found []proc
		var errs []error
		for _, p := range procs {
			if !p.live() {
				continue
			}
			inst, ok := environValue(p.pid, InstanceEnv)
			if !ok || !dead(inst, self) {
				continue
			}
			found = append(found, p)
			start := p.start
			if _, err := signalProcess(p.pid, []unix.Signal{unix.SIGKILL}, byKill, func(q proc) bool { return q.start == start }); err != nil {
				errs = append(errs, err)
			}
		}
		left := end.left(began, found)
		if len(found) == 0 || len(errs) > 0 {
			return end.count(), errors.Join(errs...)
		}
		if len(left) > 0 {
			return end.count(), fmt.Errorf("sweep: marked processes still appear after %v: %s", end.tried(), listProcs(left))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
