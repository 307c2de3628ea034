package procexit

// noteExitStatus is nothing on FreeBSD: NOTE_EXIT always carries the
// wait status.
const noteExitStatus = 0
