// What this file does: asks macOS's exit event for the wait status (see
// procexit_bsd.go). TestWatch checks the same status on Linux.

package procexit

import "golang.org/x/sys/unix"

// noteExitStatus asks the exit event for the wait status; macOS grants it
// to the parent only.
const noteExitStatus = unix.NOTE_EXITSTATUS
