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
// listen on 127.0.0.1, 0.0.0.0 or [::] fails with EADDRINUSE, or when the
// system lists a listening socket on it (a port below 1024 that this user
// may not bind is judged that way alone). err is only about a port out of
// range; the rest is best effort.
func PortHolder(port int) (free bool, pid int, cmd string, err error) {
	if port < 1 || port > 65535 {
		return false, 0, "", fmt.Errorf("stack: port %d: not a port (1 to 65535)", port)
	}
	taken := false
	for _, a := range []struct{ network, host string }{
		{"tcp4", "127.0.0.1"}, {"tcp4", "0.0.0.0"}, {"tcp6", "::"},
	} {
		l, err := net.Listen(a.network, net.JoinHostPort(a.host, strconv.Itoa(port)))
		if err == nil {
			l.Close() // Best effort: it never accepted.
			continue
		}
		if errors.Is(err, syscall.EADDRINUSE) {
			taken = true
			break
		}
		// EACCES (a privileged port), EADDRNOTAVAIL (no IPv6): this
		// address says nothing; the system's list may.
	}
	inodes := listeners(port)
	if !taken && len(inodes) == 0 {
		return true, 0, "", nil
	}
	pid, cmd = holder(inodes)
	return false, pid, cmd, nil
}
