package contain

import (
	"errors"
	"fmt"
	"slices"
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
// pid no longer names a process with its start time, at two looks
// confirmAfter apart (see judge). Instances of another
// pid namespace are left alone, as this agent cannot tell whether they
// live, and so are instances of another sweep scope (SweepScopeEnv). It
// returns how many cgroups and processes it removed.
func (c *Containment) Sweep() (cgroups, procs int, err error) {
	j := newJudge(c.inst)
	cgroups, err1 := sweepCgroups(j, nil)
	procs, err2 := sweepMarked(j, nil)
	return cgroups, procs, errors.Join(err1, err2)
}

// confirmAfter is how long a sweep waits before its second look at an
// instance that looked dead.
const confirmAfter = 500 * time.Millisecond

// A judge tells, for one sweep, which instances are dead. An instance is
// dead when it is of self's pid namespace and sweep scope and its agent
// looked gone twice, confirmAfter apart: for a moment of an exec from a
// thread other than its first (an upgrade in place), a live agent's pid
// names no process. Suspect takes the first look, confirm the second, for
// every instance suspected since at once; dead answers from then on.
type judge struct {
	self     instance
	alive    func(instance) bool
	wait     func()
	verdict  map[string]bool     // by name: dead, once known
	suspects map[string]instance // by name: looked gone, not yet confirmed
}

func newJudge(self instance) *judge {
	return &judge{
		self: self, alive: instance.alive, wait: func() { time.Sleep(confirmAfter) },
		verdict: make(map[string]bool), suspects: make(map[string]instance),
	}
}

// suspect takes the first look at instance s: it reports whether s may be
// dead, that is, it is of the judge's pid namespace and sweep scope, and
// its agent looks gone now (or has been confirmed dead).
func (j *judge) suspect(s string) bool {
	if v, ok := j.verdict[s]; ok {
		return v
	}
	if _, ok := j.suspects[s]; ok {
		return true
	}
	inst, ok := parseInstance(s)
	if !ok || inst.ns != j.self.ns || inst.scope != j.self.scope || j.alive(inst) {
		j.verdict[s] = false
		return false
	}
	j.suspects[s] = inst
	return true
}

// confirm takes the second look at every instance suspected since the
// last confirm, after one wait for them all.
func (j *judge) confirm() {
	if len(j.suspects) == 0 {
		return
	}
	j.wait()
	for s, inst := range j.suspects {
		j.verdict[s] = !j.alive(inst)
	}
	clear(j.suspects)
}

// dead reports whether instance s was confirmed dead.
func (j *judge) dead(s string) bool { return j.verdict[s] }

// A terminalSet names terminals of dead instances, by instance and
// terminal number (InstanceEnv, TerminalEnv): what StopOrphans stops. A
// nil set holds every terminal of every dead instance.
type terminalSet map[[2]string]bool

// has reports whether the set holds terminal term of instance inst.
func (s terminalSet) has(inst, term string) bool { return s == nil || s[[2]string{inst, term}] }

// A markedProc is a live process with its markers.
type markedProc struct {
	p          proc
	inst, term string // InstanceEnv, TerminalEnv
}

// deadMarked returns the live processes of procs that are marked with an
// instance j judges dead, of a terminal of only.
func deadMarked(j *judge, procs []proc, only terminalSet) []markedProc {
	var suspected []markedProc
	for _, p := range procs {
		if !p.live() {
			continue
		}
		env, err := environ(p.pid)
		if err != nil {
			continue // gone, or another user's: not ours
		}
		inst, ok := lookupEnv(env, InstanceEnv)
		term, _ := lookupEnv(env, TerminalEnv)
		if ok && only.has(inst, term) && j.suspect(inst) {
			suspected = append(suspected, markedProc{p, inst, term})
		}
	}
	j.confirm()
	return slices.DeleteFunc(suspected, func(m markedProc) bool { return !j.dead(m.inst) })
}

// sweepMarked kills the processes of the terminals of only that are marked
// with a dead instance until none is left (a fork loop keeps making more
// for a moment; see ending).
func sweepMarked(j *judge, only terminalSet) (int, error) {
	for end := newEnding(SweepTimeout, nil); ; {
		began := time.Now()
		procs, err := scanProcs()
		if err != nil {
			return end.count(), err
		}
		var found []proc
		var errs []error
		for _, m := range deadMarked(j, procs, only) {
			found = append(found, m.p)
			start := m.p.start
			if _, err := signalProcess(m.p.pid, []unix.Signal{unix.SIGKILL}, byKill, func(q proc) bool { return q.start == start }); err != nil {
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
