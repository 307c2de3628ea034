//go:build darwin || freebsd

package daemon

import (
	"errors"
	"net"
	"os"
	"time"
)

// errNoUpgrade: upgrade in place needs Linux's memfd, pidfds and /proc.
var errNoUpgrade = errors.New("upgrade in place is supported on Linux only: stop the daemon (daemon stop) and start the new one")

// execNew refuses: see errNoUpgrade.
func (s *Server) execNew(*net.UnixConn, string, []byte, []*os.File) error { return errNoUpgrade }

// Resumed is what the new image of an upgrade got from the old one; on
// macOS and FreeBSD there is none.
type Resumed struct {
	From      string
	Listener  Listener
	Activated bool
	Lock      *Lock
	State     []byte
	Files     []*os.File
	Ended     []int
	Execed    time.Time
}

// Resume refuses: see errNoUpgrade.
func Resume(int) (*Resumed, error) { return nil, errNoUpgrade }

// Answer does nothing: there is no requester.
func (r *Resumed) Answer(string, error) {}
