//go:build darwin || freebsd

package daemon

import (
	"errors"

	"golang.org/x/sys/unix"
)

// flockHolder takes the flock of the file open at fd shared, without
// waiting, and lets go of it: held is whether that was refused. The
// system does not say who holds it.
func flockHolder(fd int) (pid int, held bool, err error) {
	switch err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); {
	case errors.Is(err, unix.EWOULDBLOCK):
		return 0, true, nil
	case err != nil:
		return 0, false, err
	}
	return 0, false, unix.Flock(fd, unix.LOCK_UN)
}
