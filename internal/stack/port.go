package stack

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// PortHolder reports whether port is free to listen on, and if it is not,
// who holds it where the system tells (Linux: the pid and command line of
// a process of this user that has the listening socket open; elsewhere,
// or when it cannot be read, pid 0 and ""). The port is taken when a TCP
// listen on 0.0.0.0 (which any IPv4 listener on the port conflicts with)
// or on [::] (IPv6 only) fails with EADDRINUSE, or when the system lists
// a listening socket on it (a port below 1024 that this user may not bind
// is judged that way alone). err is only about a port out of range; the
// rest is best effort.
//
// No child is forked while one of its probe listeners is open (see
// holdForks), so that none outlives it: a child forked then held a copy
// of the first probe until its exec, and the next probe failed on it.
func PortHolder(port int) (free bool, pid int, cmd string, err error) {
	if port < 1 || port > 65535 {
		return false, 0, "", fmt.Errorf("stack: port %d: not a port (1 to 65535)", port)
	}
	taken := probe(port)
	inodes := listeners(port)
	if !taken && len(inodes) == 0 {
		return true, 0, "", nil
	}
	pid, cmd = holder(inodes)
	return false, pid, cmd, nil
}

// probe reports whether a listen on port fails with EADDRINUSE on 0.0.0.0
// or [::]; the two do not conflict with each other.
func probe(port int) (taken bool) {
	release := holdForks()
	defer release()
	for _, network := range []string{"tcp4", "tcp6"} {
		l, err := net.Listen(network, ":"+strconv.Itoa(port))
		if err == nil {
			l.Close() // Best effort: it never accepted.
			continue
		}
		if errors.Is(err, syscall.EADDRINUSE) {
			return true
		}
		// EACCES (a privileged port), EADDRNOTAVAIL (no IPv6): this
		// address says nothing; the system's list may.
	}
	return false
}
