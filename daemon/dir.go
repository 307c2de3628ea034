package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A socketDir is the socket's directory, open: the descriptor that was
// checked is the one every later step goes through (the socket file's
// type, the lock file, bind and connect), so that a directory swapped in
// after the check cannot receive them.
type socketDir struct {
	f    *os.File
	path string // the directory's path, for messages and the by-path fallback
}

// openDir opens dir, creating it 0700 first if create is set, and checks
// it as CheckDir says, on the descriptor it opened: O_DIRECTORY|O_NOFOLLOW
// refuses a symlink or a file, fstat gives the owner and mode.
func openDir(dir string, create bool) (*socketDir, error) {
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("socket directory: %w", err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// ELOOP (EMLINK on FreeBSD) or ENOTDIR: say what is there.
		if fi, lerr := os.Lstat(dir); lerr == nil {
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				return nil, fmt.Errorf("socket directory %s is a symlink; it must be a directory of its own (remove the link)", dir)
			case !fi.IsDir():
				return nil, fmt.Errorf("socket directory %s is not a directory", dir)
			}
		}
		return nil, fmt.Errorf("socket directory: %w", &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	d := &socketDir{f: os.NewFile(uintptr(fd), dir), path: dir}
	if err := d.check(); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// check applies CheckDir's rules to the open directory.
func (d *socketDir) check() error {
	var st unix.Stat_t
	if err := unix.Fstat(int(d.f.Fd()), &st); err != nil {
		return fmt.Errorf("socket directory %s: %w", d.path, err)
	}
	uid, mode := os.Geteuid(), st.Mode&0o7777
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("socket directory %s is not a directory", d.path)
	case int(st.Uid) != uid:
		return fmt.Errorf("socket directory %s is owned by uid %d, not by uid %d that runs shellagent; another user could replace the socket", d.path, st.Uid, uid)
	case mode&0o077 != 0:
		return fmt.Errorf("socket directory %s has mode %04o: group or others can reach it; it must be 0700 (chmod 700 %s)", d.path, mode&0o777, d.path)
	}
	return nil
}

func (d *socketDir) close() {
	d.f.Close() // Best effort: a directory opened for reading.
}

// fd is the directory's descriptor, for the *at calls.
func (d *socketDir) fd() int { return int(d.f.Fd()) }

// stat returns what sits at name in the directory, not following a
// symlink.
func (d *socketDir) stat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(d.fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// checkSocketFile refuses a file at the socket path that is not a
// socket: shellagent never removes nor binds over anything but a dead
// daemon's socket. No file there is no error.
func (d *socketDir) checkSocketFile(name string) error {
	st, err := d.stat(name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("socket %s: %w", filepath.Join(d.path, name), err)
	case st.Mode&unix.S_IFMT == unix.S_IFSOCK:
		return nil
	}
	return fmt.Errorf("socket %s is %s, not a socket; shellagent removes only a dead daemon's socket: remove it yourself, or choose another path with --socket",
		filepath.Join(d.path, name), kind(uint32(st.Mode)))
}

// kind names a file's type as a sentence says it.
func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symlink"
	case unix.S_IFIFO:
		return "a named pipe (FIFO)"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	}
	return fmt.Sprintf("a file of type %#o", mode&unix.S_IFMT)
}

// removeSocket removes the socket at name if it is still the one id
// names (ignoring a socket that another process bound since), or, for a
// zero id, any socket: never another kind of file.
func (d *socketDir) removeSocket(name string, id fileID) error {
	st, err := d.stat(name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return err
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return d.checkSocketFile(name)
	case id != fileID{} && id != idOf(&st):
		return nil // not ours any more
	}
	if err := unix.Unlinkat(d.fd(), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

// A fileID tells one file from another: its device and inode.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), uint64(st.Ino)} }
