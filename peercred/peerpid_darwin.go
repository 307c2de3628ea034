// What this file does: reads the peer's pid with LOCAL_PEERPID, for
// logs; 0 if it cannot. TestPeerUID checks the pid on Linux.

package peercred

import "golang.org/x/sys/unix"

func peerPID(fd int) int {
	pid, err := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	if err != nil {
		return 0
	}
	return pid
}
