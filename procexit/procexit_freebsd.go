// What this file does: nothing to ask of FreeBSD's exit event, which
// always carries the wait status (see procexit_bsd.go). TestWatch checks
// the same status on Linux.

package procexit

// noteExitStatus is nothing on FreeBSD: NOTE_EXIT always carries the
// wait status.
const noteExitStatus = 0
