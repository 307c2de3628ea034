package ptyio

import "time"

// defaultPrepareAfter is how long after a launch's fork the next launch's
// spares are made: the PTY (Spare) and the containment's group
// (contain.Containment.Prepare). Made right after the fork, they took
// CPU and kernel locks from the shell's start, and the spawn took a
// quarter of a millisecond longer on two cores; made at the command's
// first output, they slowed that output's way to the client, by more
// (bench/HISTORY.md, round 9). By then a shell has started on a small
// machine; a launch that comes sooner opens its own PTY and group, as
// without spares.
const defaultPrepareAfter = 10 * time.Millisecond

// prepareNext has the next launch's spares made l.prepareAfter (if not
// zero, else defaultPrepareAfter) from now.
func (l Local) prepareNext() {
	after := l.prepareAfter
	if after == 0 {
		after = defaultPrepareAfter
	}
	time.AfterFunc(after, func() {
		l.PTYs.refill()
		l.Containment.Prepare()
	})
}
