//go:build darwin || freebsd

// What this file does: reads the peer's user id with LOCAL_PEERCRED (what
// getpeereid(3) reads). TestPeerUID checks the same on Linux's
// SO_PEERCRED.

package peercred

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// xucredVersion is XUCRED_VERSION of <sys/ucred.h>, on macOS and FreeBSD.
const xucredVersion = 0

// peerUID reads LOCAL_PEERCRED.
func peerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return -1, err
	}
	if cred.Version != xucredVersion {
		return -1, fmt.Errorf("xucred version %d, want %d", cred.Version, xucredVersion)
	}
	return int(cred.Uid), nil
}
