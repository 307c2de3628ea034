package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// SocketEnv names the environment variable that sets the socket path
// when no --socket is given.
const SocketEnv = "SHELLAGENT_SOCKET"

// maxPath is the longest socket path the OS takes: sun_path holds 108
// bytes on Linux, 104 on macOS and FreeBSD, the terminating NUL included.
const maxPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// SocketPath returns the socket path: flag if it is not empty, else
// $SHELLAGENT_SOCKET, else $XDG_RUNTIME_DIR/shellagent/daemon.sock, else
// /tmp/shellagent-UID/daemon.sock. A relative path is made absolute. A
// path too long for a unix socket is an error that says so.
func SocketPath(flag string) (string, error) {
	path, from := flag, "--socket"
	if path == "" {
		path, from = os.Getenv(SocketEnv), "$"+SocketEnv
	}
	switch {
	case path != "":
	case os.Getenv("XDG_RUNTIME_DIR") != "":
		path, from = filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "shellagent", "daemon.sock"), "$XDG_RUNTIME_DIR"
	default:
		path, from = filepath.Join(os.TempDir(), "shellagent-"+strconv.Itoa(os.Geteuid()), "daemon.sock"), "the default"
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("socket %s (from %s): %w", path, from, err)
	}
	if len(abs) > maxPath {
		return "", fmt.Errorf("socket %s (from %s) is %d bytes long; a unix socket path holds at most %d on Linux: choose a shorter one with --socket or $%s",
			abs, from, len(abs), maxPath, SocketEnv)
	}
	return abs, nil
}

// PrepareDir creates the directory of socket, mode 0700, if it does not
// exist, and checks it as CheckDir does.
func PrepareDir(socket string) error {
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	return CheckDir(dir)
}

// CheckDir refuses a socket directory that another user could reach or
// replace: it must be a directory, not a symlink, owned by this process's
// user, and closed to group and others (tmux's check, stricter on group).
// The error says which rule failed and how to put it right.
func CheckDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	uid := os.Geteuid()
	switch st, _ := fi.Sys().(*syscall.Stat_t); {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("socket directory %s is a symlink; it must be a directory of its own (remove the link)", dir)
	case !fi.IsDir():
		return fmt.Errorf("socket directory %s is not a directory", dir)
	case st == nil:
		return fmt.Errorf("socket directory %s: no owner to check", dir)
	case int(st.Uid) != uid:
		return fmt.Errorf("socket directory %s is owned by uid %d, not by uid %d that runs shellagent; another user could replace the socket", dir, st.Uid, uid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("socket directory %s has mode %04o: group or others can reach it; it must be 0700 (chmod 700 %s)", dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// Listen binds socket, mode 0600, and listens on it. The caller holds the
// socket's lock (Lock): a socket file that exists then is a dead daemon's
// and is removed first; anything else at that path is an error. The
// socket file is removed when the listener is closed.
func Listen(socket string) (*net.UnixListener, error) {
	if err := PrepareDir(socket); err != nil {
		return nil, err
	}
	switch fi, err := os.Lstat(socket); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("%s exists and is not a socket; remove it, or choose another path with --socket", socket)
	default:
		if err := os.Remove(socket); err != nil {
			return nil, fmt.Errorf("remove the stale socket: %w", err)
		}
	}
	// The umask makes the socket 0600 from the moment it exists; no other
	// goroutine creates files while the daemon starts.
	old := syscall.Umask(0o077)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		l.Close() // Best effort: the error below is the one to report.
		return nil, fmt.Errorf("socket: %w", err)
	}
	return l, nil
}

// listenFDsStart is the first descriptor systemd passes (SD_LISTEN_FDS_START).
const listenFDsStart = 3

// Activated returns the listening socket that systemd passed to this
// process by socket activation (LISTEN_PID is this process's pid and
// LISTEN_FDS is 1: descriptor 3), or nil when there is none. It removes
// LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES from the environment, so that
// no command inherits them.
func Activated() (*net.UnixListener, error) {
	pid, fds := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS")
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(k) // Best effort: fails only for an invalid name.
	}
	if pid != strconv.Itoa(os.Getpid()) {
		return nil, nil // not for this process, or not activated at all
	}
	if fds != "1" {
		return nil, fmt.Errorf("socket activation passed LISTEN_FDS=%s; shellagent.socket must have exactly one ListenStream", fds)
	}
	f := os.NewFile(listenFDsStart, "LISTEN_FDS")
	l, err := net.FileListener(f)
	f.Close() // Best effort: the listener holds its own descriptor.
	if err != nil {
		return nil, fmt.Errorf("socket activation: %w", err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		l.Close() // Best effort: refused anyway.
		return nil, fmt.Errorf("socket activation passed a %s socket, not a unix stream socket", l.Addr().Network())
	}
	return ul, nil
}
