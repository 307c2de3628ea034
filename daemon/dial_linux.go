package daemon

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// OwnPipe opens the pipe f anew, by /proc/self/fd, for mode (O_WRONLY
// for stdout, O_RDONLY for stdin), non-blocking: an open file of the
// caller's own, so that its O_NONBLOCK is not set on f's, which f's
// process shares with the shell that ran it and the commands after it.
// The relay passes such a file to the daemon (clientStdout, clientStdin);
// the agent on stdio reads and writes its own through the runtime
// poller. It never calls f.Fd(). It returns nil for anything but a pipe
// (a socket cannot be opened so), or where the open fails (no /proc; a
// pipe whose reader is gone: ENXIO).
func OwnPipe(f *os.File, mode int) *os.File {
	fi, err := f.Stat()
	if err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		return nil
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(descriptor(f)), mode|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), f.Name())
}
