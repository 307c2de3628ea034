package peercred

import "golang.org/x/sys/unix"

// peer reads SO_PEERCRED.
func peer(fd int) (Cred, error) {
	c, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Cred{}, err
	}
	return Cred{UID: int(c.Uid), PID: int(c.Pid)}, nil
}
