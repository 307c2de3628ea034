//go:build darwin || freebsd

package daemon

import "os"

// OwnPipe returns nil: there is no /proc/self/fd to open a pipe anew by
// on macOS and FreeBSD (FreeBSD's fdescfs, where mounted, duplicates the
// descriptor instead). The client's own open file is passed, and the
// relay gives it back its O_NONBLOCK when it exits.
func OwnPipe(*os.File, int) *os.File { return nil }
