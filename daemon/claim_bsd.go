//go:build darwin || freebsd

package daemon

import "io"

// claimPath takes no claim: there are no abstract sockets on macOS and
// FreeBSD. The lock file alone guards the path there, so a daemon whose
// whole socket directory was removed may see a second daemon start in
// the half second before it binds its socket again (Socket.Keep).
func claimPath(string) (io.Closer, error) { return nil, nil }

// claimant finds no claim: see claimPath.
func claimant(string) (pid int, ok bool) { return 0, false }
