// Package peercred tells who is at the other end of a unix socket: the
// user id the kernel recorded for the peer when the connection was made
// (SO_PEERCRED on Linux, LOCAL_PEERCRED elsewhere, as getpeereid reads
// it). A daemon reads it once per connection, at accept, and refuses a
// peer of another user.
//
// Files: peercred.go (the API), peercred_linux.go, peercred_bsd.go.
package peercred

import (
	"fmt"
	"net"
)

// PeerUID returns the user id of the process that connected conn (for an
// accepted connection) or that listened (for a dialled one), as it was
// when the connection was made.
func PeerUID(conn *net.UnixConn) (uid int, err error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("peer credentials: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { uid, serr = peerUID(int(fd)) }); err != nil {
		return -1, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return -1, fmt.Errorf("peer credentials: %w", serr)
	}
	return uid, nil
}
