package daemon

import (
	"fmt"
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
	d, err := openDir(filepath.Dir(socket), true)
	if err != nil {
		return err
	}
	d.close()
	return nil
}

// CheckDir refuses a socket directory that another user could reach or
// replace: it must be a directory, not a symlink, owned by this process's
// user, and closed to group and others (tmux's check, stricter on group).
// The error says which rule failed and how to put it right. The check is
// made on an open descriptor of the directory (O_NOFOLLOW, fstat); what
// uses the directory afterwards goes through such a descriptor too.
func CheckDir(dir string) error {
	d, err := openDir(dir, false)
	if err != nil {
		return err
	}
	d.close()
	return nil
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
