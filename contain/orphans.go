package contain

import (
	"errors"
	"os"
	"slices"
)

// An Orphan is a live process that an agent instance no longer alive left
// running: one that Sweep would remove.
type Orphan struct {
	Pid     int
	Command string // its command line, arguments joined by spaces
	Dir     string // its working directory; "" where it cannot be read (macOS, FreeBSD)

	inst, term string // its markers (InstanceEnv, TerminalEnv)
}

// Orphans returns, by pid, the live processes marked with an instance of
// this process's pid namespace and sweep scope whose agent is no longer
// alive, judged as Sweep judges it (two looks, confirmAfter apart, when
// there is a suspect). It stops nothing: see StopOrphans.
func Orphans() ([]Orphan, error) {
	self, err := self()
	if err != nil {
		return nil, err
	}
	j := newJudge(self)
	// A process of an orphan's terminal (a shell that outlived its agent)
	// may be asking: it is not its own orphan.
	ownInst, ownTerm := os.Getenv(InstanceEnv), os.Getenv(TerminalEnv)
	procs, err := scanProcs()
	if err != nil {
		return nil, err
	}
	var found []Orphan
	for _, m := range deadMarked(j, procs, nil) {
		if (m.inst != ownInst || m.term != ownTerm) && liveNow(m.p.pid) {
			pid := m.p.pid
			found = append(found, Orphan{Pid: pid, Command: commandLine(pid), Dir: workDir(pid), inst: m.inst, term: m.term})
		}
	}
	slices.SortFunc(found, func(a, b Orphan) int { return a.Pid - b.Pid })
	return found, nil
}

// StopOrphans stops the terminals of orphans, as Sweep stops what a dead
// instance left, but only those: each terminal's cgroup (where its agent
// ran in cgroup mode) is killed and removed, and every process marked with
// its instance and terminal is killed, until none is left (at most
// SweepTimeout, or twice that for processes on their way out). Other
// terminals of the same dead instances are left to a sweep.
func StopOrphans(orphans []Orphan) error {
	if len(orphans) == 0 {
		return nil
	}
	self, err := self()
	if err != nil {
		return err
	}
	// Orphans judged these instances dead; a pid and start time never
	// name a live agent again. Any other instance is not to be touched.
	j := newJudge(self)
	j.alive = func(instance) bool { return true }
	only := make(terminalSet)
	for _, o := range orphans {
		j.verdict[o.inst] = true
		only[[2]string{o.inst, o.term}] = true
	}
	_, err1 := sweepCgroups(j, only)
	_, err2 := sweepMarked(j, only)
	return errors.Join(err1, err2)
}
