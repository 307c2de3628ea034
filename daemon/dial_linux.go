package daemon

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ownFile opens the pipe f anew, by /proc/self/fd, for mode (O_WRONLY
// for stdout, O_RDONLY for stdin): an open file of the
// daemon's own, so that the O_NONBLOCK the daemon sets on it
// (clientStdout, clientStdin) is not set on the client's, which the client shares
// with the shell that ran it and the commands after it. It returns nil
// for anything but a pipe (a socket cannot be opened so), or where the
// open fails (no /proc; a pipe whose reader is gone: ENXIO): f itself is
// passed then.
func ownFile(f *os.File, mode int) *os.File {
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
