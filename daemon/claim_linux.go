package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"

	"shellagent/peercred"
)

// claimName is the abstract socket name of socket's claim: the user id
// and a hash of the path (an abstract name has no file to remove, and at
// most 107 bytes).
func claimName(socket string) string {
	sum := sha256.Sum256([]byte(socket))
	return "@shellagent-daemon-" + strconv.Itoa(os.Geteuid()) + "-" + hex.EncodeToString(sum[:16])
}

// claimPath takes socket's claim: it binds the claim's abstract name and
// accepts (and closes at once) every connection to it, so that claimant
// can tell the daemon lives. It is an error when a live process of this
// user holds the claim: the daemon that holds it is binding its removed
// socket again. A claim held by a process of another user (any user can
// bind an abstract name) is ignored: no claim is taken, the lock file
// alone guards the path.
func claimPath(socket string) (io.Closer, error) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: claimName(socket), Net: "unix"})
	if err != nil {
		if pid, ok := claimant(socket); ok {
			return nil, fmt.Errorf("another daemon (pid %d) serves %s; its socket file was removed, and it binds it again within a second: not starting a second daemon", pid, socket)
		}
		return nil, nil
	}
	c := &claim{l: l, done: make(chan struct{})}
	go c.refuse()
	return c, nil
}

// claimant returns the pid of the live process of this user that holds
// socket's claim (0 where the kernel does not tell), and whether there is
// one.
func claimant(socket string) (pid int, ok bool) {
	nc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: claimName(socket), Net: "unix"})
	if err != nil {
		return 0, false
	}
	defer nc.Close() // Best effort: only its credentials were wanted.
	cred, err := peercred.Peer(nc)
	if err != nil || cred.UID != os.Geteuid() {
		return 0, false
	}
	return cred.PID, true
}

// A claim is a held claim: its listener and the goroutine that closes
// what connects.
type claim struct {
	l    *net.UnixListener
	done chan struct{}
}

func (c *claim) refuse() {
	defer close(c.done)
	for {
		nc, err := c.l.AcceptUnix()
		if err != nil {
			return // closed
		}
		nc.Close() // Best effort: the connect was the answer.
	}
}

// Close lets go of the claim.
func (c *claim) Close() error {
	err := c.l.Close()
	<-c.done
	return err
}
