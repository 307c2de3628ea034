package service

import "shellagent/procexit"

// awaitExit blocks until pid, a child of this process, has exited, and
// leaves it unreaped (a pidfd in the runtime poller); false if it cannot
// tell, and then pid may run yet.
func awaitExit(pid int) bool {
	p, err := procexit.WatchChild(pid)
	if err != nil {
		return false
	}
	defer p.Close() // Best effort: a pidfd, read only.
	return p.Wait() == nil
}
