package daemon

import (
	"os"
	"path/filepath"
	"strconv"
)

// name returns the path by which bind and connect reach name in the open
// directory: /proc/self/fd/N/name, which the kernel resolves through the
// descriptor, so that a directory swapped in at d.path since it was
// checked is not the one used. Where /proc is not mounted, or that path
// would not fit in sun_path (a name of about 90 bytes in a short
// directory), it is the directory's path joined with name: checked, but
// not race-free.
func (d *socketDir) name(name string) string {
	p := "/proc/self/fd/" + strconv.Itoa(d.fd())
	if len(p)+1+len(name) > maxPath {
		return filepath.Join(d.path, name)
	}
	if _, err := os.Stat(p); err != nil {
		return filepath.Join(d.path, name)
	}
	return p + "/" + name
}
