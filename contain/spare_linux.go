package contain

import "sync"

// A spare is the cgroup of the next terminal, made ahead (issue 26,
// bench/HISTORY.md round 5): making a cgroup (a mkdir in cgroupfs, the
// inotify watch on its cgroup.events, its directory opened for
// CLONE_INTO_CGROUP) is then off a spawn's path. One is made when the
// tree opens and, at each Prepare (once the launcher's last process has
// got going), on a goroutine of its own that close waits for. It is named
// for the number the next NewGroup will issue, so
// that it is that group's cgroup in every respect (its name, which Adopt
// finds after an exec in place, and its marker); a NewGroup of an
// earlier number leaves it for its own (two launches at once), one of a
// later number removes it (an adoption skipped its number). It lives below the instance's cgroup like every
// group, so closing removes it and a sweep after a crash finds it.
type spare struct {
	next func() int64 // the number the next NewGroup issues

	mu     sync.Mutex // guards g and closed
	g      *cgroupGroup
	closed bool
	wg     sync.WaitGroup // refills under way
}

// fill makes the spare for the next number, unless there is one or the
// tree is closed. A failure leaves no spare: NewGroup makes its cgroup
// then, and reports the error.
func (s *spare) fill(t *cgroupTree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.g != nil {
		return
	}
	// Never reuse: a cgroup of that name made before an exec in place
	// may be a group that is yet to be adopted.
	if g, err := t.makeGroup(s.next(), false); err == nil {
		s.g = g
	}
}

// refill makes the next spare on a goroutine of its own, unless one is
// held already.
func (s *spare) refill(t *cgroupTree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.g != nil {
		return
	}
	s.wg.Go(func() {
		s.fill(t)
	})
}

// take returns the spare if it was made for group n, else nil. A spare
// made for a later number stays for that number's NewGroup (launches at
// once: one issued its number while the spare was being made for the
// next). One made for an earlier number is stale (an adoption skipped
// its number) and is removed here, under mu: removed outside it, a
// NewGroup of that number that found no spare could take the empty
// cgroup over (makeGroup's reuse) and see it removed under its fork,
// which then failed with ENOENT.
func (s *spare) take(n int64) *cgroupGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.g
	if g == nil {
		return nil
	}
	k, ok := g.number()
	if ok && k > n {
		return nil
	}
	s.g = nil
	if !ok || k != n {
		g.Close() // Best effort: an empty cgroup that nothing uses.
		return nil
	}
	return g
}

// close waits for the refills under way and releases the spare; its
// cgroup goes with the tree's.
func (s *spare) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.g != nil {
		s.g.Close() // Best effort: an empty cgroup that nothing uses.
		s.g = nil
	}
}
