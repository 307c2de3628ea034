package contain

import (
	"sync"
	"time"
)

// An ending tells when the processes a loop keeps killing (Close, the
// sweep) must be given up on. Each look scans, then sends SIGKILL to what
// it found; what it found was live before its own signals. So a look
// that finds a process says nothing of a signal sent by the same look,
// and on a loaded machine one look can outlast the whole timeout: the
// rule counts only what a look that began after the deadline still finds
// from the look before it, as live and not yet on its way out (neither
// exiting nor doomed, see proc.doomed), which no SIGKILL has reached.
// Processes on their way out, or new ones that keep appearing, are given
// up on once a look begins a second timeout later. A look that finds only
// processes an earlier ending of the same containment gave up on with
// their SIGKILL pending (past), still so, gives them up at once: they
// were waited for already (KillAll, then Close at the agent's end).
type ending struct {
	start, deadline, last time.Time
	before                map[procID]bool // what the previous look found
	seen                  map[procID]bool // what any look found
	past                  *givenUp        // nil: none kept
}

// procID names one process: its pid and start time.
type procID struct {
	pid   int
	start uint64
}

// newEnding returns an ending with timeout that gives up at once on what
// past holds, and keeps there what it gives up on; past may be nil.
func newEnding(timeout time.Duration, past *givenUp) *ending {
	now := time.Now()
	return &ending{start: now, deadline: now.Add(timeout), last: now.Add(2 * timeout), seen: make(map[procID]bool), past: past}
}

// givenUp is what the endings of one containment gave up on with a
// SIGKILL pending (proc.doomed): processes that do not act on it.
type givenUp struct {
	mu  sync.Mutex
	ids map[procID]bool
}

// add keeps the doomed processes of ps.
func (g *givenUp) add(ps []proc) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range ps {
		if p.doomed() {
			if g.ids == nil {
				g.ids = make(map[procID]bool)
			}
			g.ids[procID{p.pid, p.start}] = true
		}
	}
}

// holdsAll reports whether ps is not empty and g holds each of them,
// still doomed.
func (g *givenUp) holdsAll(ps []proc) bool {
	if g == nil || len(ps) == 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range ps {
		if !p.doomed() || !g.ids[procID{p.pid, p.start}] {
			return false
		}
	}
	return true
}

// left takes what a look that began at began found, and returns the
// processes to give up on: none while the look goes on.
func (e *ending) left(began time.Time, found []proc) []proc {
	before := e.before
	e.before = make(map[procID]bool, len(found))
	for _, p := range found {
		e.before[procID{p.pid, p.start}] = true
		e.seen[procID{p.pid, p.start}] = true
	}
	if e.past.holdsAll(found) {
		return found
	}
	if began.Before(e.deadline) {
		return nil
	}
	if e.over(began) {
		e.past.add(found)
		return found
	}
	var resisted []proc
	for _, p := range found {
		if before[procID{p.pid, p.start}] && !p.exiting && !p.doomed() {
			resisted = append(resisted, p)
		}
	}
	return resisted
}

// count returns how many processes the looks found, each once however
// many looks found it.
func (e *ending) count() int { return len(e.seen) }

// tried returns how long the looks have gone on, for an error: from one
// timeout to two.
func (e *ending) tried() time.Duration { return time.Since(e.start).Round(time.Millisecond) }

// over reports whether a look that began at began is past the second
// timeout: whatever it finds is given up on.
func (e *ending) over(began time.Time) bool { return !began.Before(e.last) }
