//go:build darwin || freebsd

// What this file does: reads the peer's user id with LOCAL_PEERCRED (what
// getpeereid(3) reads), and its pid where the OS tells (peerPID).
// TestPeerUID and TestPeerUIDOfAnotherUser check the same on Linux's
// SO_PEERCRED.

package peercred

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// xucredVersion is XUCRED_VERSION of <sys/ucred.h>, on macOS and FreeBSD.
const xucredVersion = 0

// peer reads LOCAL_PEERCRED.
func peer(fd int) (Cred, error) {
	x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return Cred{}, err
	}
	if x.Version != xucredVersion {
		return Cred{}, fmt.Errorf("xucred version %d, want %d", x.Version, xucredVersion)
	}
	return Cred{UID: int(x.Uid), PID: peerPID(fd)}, nil
}
