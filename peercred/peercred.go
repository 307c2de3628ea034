// Package peercred tells who is at the other end of a unix socket: the
// user id (and process id, where the OS says) that the kernel recorded
// for the peer when the connection was made (SO_PEERCRED on Linux;
// LOCAL_PEERCRED, as getpeereid reads it, on macOS and FreeBSD, and
// LOCAL_PEERPID on macOS). A daemon reads it once per connection, at
// accept, and refuses a peer of another user.
//
// Files: peercred.go (the API), peercred_linux.go, peercred_bsd.go,
// peerpid_darwin.go, peerpid_freebsd.go.
package peercred

import (
	"fmt"
	"net"
)

// Cred is a peer's credentials as the kernel recorded them when the
// connection was made.
type Cred struct {
	UID int
	PID int // 0 where the OS does not tell (FreeBSD)
}

// Peer returns the credentials of the process that connected conn (for
// an accepted connection) or that listened (for a dialled one).
func Peer(conn *net.UnixConn) (Cred, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", err)
	}
	var c Cred
	var serr error
	if err := rc.Control(func(fd uintptr) { c, serr = peer(int(fd)) }); err != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", serr)
	}
	return c, nil
}
