package procexit

import "golang.org/x/sys/unix"

// noteExitStatus asks the exit event for the wait status; macOS grants it
// to the parent only.
const noteExitStatus = unix.NOTE_EXITSTATUS
