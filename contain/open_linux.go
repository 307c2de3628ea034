package contain

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// open opens mode's side of c: Cgroup, else (in Auto) Subreaper; or
// Session when asked for.
func (c *Containment) open(mode Mode) error {
	var err error
	switch mode {
	case Cgroup, Auto:
		var t *cgroupTree
		if t, err = openCgroups(c.inst, func() int64 { return c.next.Load() + 1 }); err == nil {
			c.m, c.mode = t, Cgroup
			return nil
		}
		if mode == Cgroup {
			return fmt.Errorf("cgroup containment is not available: %w", err)
		}
		c.nogroup = err
		fallthrough
	case Subreaper:
		var s *markerMode
		if s, err = openSubreaper(c.inst); err != nil {
			return err
		}
		c.m, c.mode = s, Subreaper
	case Session:
		s := openSession(c.inst)
		if os.Getpid() == 1 {
			// Init of its pid namespace: every orphan there is the
			// agent's to reap, by the reaper's rule, as in Cgroup mode.
			if s.reap, err = startReaper(s.scans.scan, s.known); err != nil {
				return err
			}
		}
		c.m, c.mode = s, Session
	}
	return nil
}

// pidNamespace returns the inode of this process's pid namespace.
func pidNamespace() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0, fmt.Errorf("stat /proc/self/ns/pid: %w", err)
	}
	return st.Ino, nil
}
