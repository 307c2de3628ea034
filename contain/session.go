package contain

import "time"

// openSession opens Session mode, the mode of every OS: each terminal's
// shell leads a session of its own, and a group's members are the
// processes of that session (and process group), the processes a look
// recorded and their descendants, and any process that carries the
// terminal's marker, read from /proc/PID/environ on Linux and through
// sysctl elsewhere (KERN_PROCARGS2 on macOS, kern.proc.env on FreeBSD:
// this user's processes only).
//
// Nothing is re-parented to the agent here, and that is what escapes: a
// process that leaves the session (setsid, a daemon's double fork) and
// drops the marker (env -i, a program that execs with an environment of
// its own), once its parent has exited before any look saw it (a look
// is made when a member exits, and at every /ps, stop and kill), belongs
// to init and to no terminal. One that stays in the session, or keeps its
// environment, is held. On macOS no user process can be re-parented to the
// agent at all; on Linux, Subreaper mode is the one that catches them.
//
// Exits are watched through procexit (a pidfd on Linux, kqueue on macOS
// and FreeBSD); there are no orphans to reap, unless the agent is the
// init of its pid namespace (Linux), where Open starts the reaper.
func openSession(inst instance) *markerMode {
	// A setsid child in the middle of an exec when its parent's exit
	// makes the group look shows an empty environment for a moment: were
	// its marker not waited for, the group would end without it. Only
	// processes younger than the agent are read (see markedFacts), so the
	// wait is for few.
	s := newMarkerMode(inst, 20*time.Millisecond)
	s.facts = s.markedFacts
	return s
}

// markedFacts returns the live processes among procs that carry this
// instance's marker, with their markers. It reads the markers of those
// that could be a terminal's: started since the agent (by the clock of
// proc.start: on macOS and FreeBSD the wall clock, so a clock set back
// hides a young process from this rule, not from the others), not kernel
// threads, and not in the agent's own session, where every process the
// agent forks outside a terminal stays and no terminal's process can ever
// be (they start in sessions of their own and cannot join another).
func (s *markerMode) markedFacts(procs []proc) map[int]procFacts {
	inst := s.inst.String()
	out := make(map[int]procFacts)
	for _, p := range procs {
		if !p.live() || p.kthread || p.start < s.inst.start || p.sid == s.sid || p.pid == s.self {
			continue
		}
		o := procFacts{start: p.start}
		if o.inst, o.term = s.markers.get(p); o.inst == inst {
			out[p.pid] = o
		}
	}
	return out
}
