package contain

import "sync"

// A spare is the cgroup of the next terminal, made ahead (issue 26,
// bench/README.md round 5): making a cgroup (a mkdir in cgroupfs, the
// inotify watch on its cgroup.events, its directory opened for
// CLONE_INTO_CGROUP) is then off a spawn's path. One is made when the
// tree opens and, at each Prepare (once the launcher's last process has
// got going), on a goroutine of its own that close waits for. It is named
// for the number the next NewGroup will issue, so
// that it is that group's cgroup in every respect (its name, which Adopt
// finds after an exec in place, and its marker); a spare whose number was
// not the next after all (two launches at once, an adoption) is removed
// at the next NewGroup. It lives below the instance's cgroup like every
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
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.fill(t)
	}()
}

// take returns the spare if it was made for group n, else nil; a spare
// made for another number is removed.
func (s *spare) take(n int64) *cgroupGroup {
	s.mu.Lock()
	g := s.g
	s.g = nil
	s.mu.Unlock()
	if g == nil {
		return nil
	}
	if k, ok := g.number(); ok && k == n {
		return g
	}
	g.Close() // Best effort: an empty cgroup that nothing uses.
	return nil
}

// close waits for the refills under way and releases the spare; its
// cgroup goes with the tree's.
func (s *spare) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
	s.take(-1) // no group is numbered -1: the spare is closed
}
