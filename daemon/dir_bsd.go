//go:build darwin || freebsd

package daemon

import "path/filepath"

// name returns the path by which bind and connect reach name in the open
// directory: its path joined with name. macOS has no bindat, and no
// /proc/self/fd to resolve a path through a descriptor (FreeBSD has
// bindat(2) and connectat(2), which x/sys/unix does not wrap): the
// directory is checked on its descriptor, but bind and connect go by
// path, so a swap of the directory between the two is not ruled out
// there. CI only builds these OSes.
func (d *socketDir) name(name string) string { return filepath.Join(d.path, name) }
