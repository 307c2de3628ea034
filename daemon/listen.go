package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A Listener is what Server.Serve accepts connections from: a
// *net.UnixListener (the one systemd passes, Activated), or a Socket.
type Listener interface {
	AcceptUnix() (*net.UnixConn, error)
	Close() error
}

// keepEvery is how often a kept Socket looks at its path and its lock
// file.
const keepEvery = 500 * time.Millisecond

// A Socket is the daemon's listening socket at its path. Kept (Keep), it
// binds the path again when the socket file, its lock file or its whole
// directory was removed (rm, a tmp cleaner), so that clients reach the
// same daemon there. On Linux it also holds the path's claim, an
// abstract socket named after the path that no file removal can take:
// while it lives, no second daemon starts for the path (Listen refuses,
// and Connect starts none). Its methods may be called from any
// goroutine.
type Socket struct {
	path  string
	claim io.Closer // nil where there is none

	mu     sync.Mutex // guards what follows
	l      *net.UnixListener
	id     fileID // the socket file that l bound
	closed bool
	stop   chan struct{} // closed by Close; nil unless kept
	done   chan struct{} // closed when Keep's goroutine has ended
}

// Listen takes socket's claim, binds socket, mode 0600, and listens on
// it. The caller holds the socket's lock (Lock): a socket file that
// exists then is a dead daemon's and is removed first; anything else at
// that path is an error. The directory is checked (CheckDir) and bound
// through one descriptor (socketDir). Close removes the socket file,
// if it is still this one.
func Listen(socket string) (*Socket, error) {
	claim, err := claimPath(socket)
	if err != nil {
		return nil, err
	}
	l, id, err := bind(socket, true)
	if err != nil {
		closeClaim(claim)
		return nil, err
	}
	return &Socket{path: socket, claim: claim, l: l, id: id}, nil
}

// bind binds and listens on socket, as Listen says, and returns the
// socket file's id. With umask, the process's umask is 077 during the
// bind, so that the socket is 0600 from the moment it exists; that is
// for a daemon's start only: the umask is the process's, and a command
// started meanwhile would inherit it. Without, the socket is made 0600
// right after the bind, inside a directory that only its owner can reach.
func bind(socket string, umask bool) (*net.UnixListener, fileID, error) {
	d, err := openDir(filepath.Dir(socket), true)
	if err != nil {
		return nil, fileID{}, err
	}
	defer d.close()
	base := filepath.Base(socket)
	if err := d.removeSocket(base, fileID{}); err != nil {
		return nil, fileID{}, fmt.Errorf("remove the stale socket: %w", err)
	}
	// No other goroutine creates files or starts commands while the
	// daemon starts.
	var old int
	if umask {
		old = syscall.Umask(0o077)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: d.name(base), Net: "unix"})
	if umask {
		syscall.Umask(old)
	}
	if err != nil {
		return nil, fileID{}, fmt.Errorf("listen on %s: %w", socket, errno(err))
	}
	// Bound by a /proc path, which means another directory once d is
	// closed: Socket.Close removes the file, by its id.
	l.SetUnlinkOnClose(false)
	st, err := d.stat(base)
	if err == nil {
		err = unix.Fchmodat(d.fd(), base, 0o600, 0)
	}
	if err != nil {
		l.Close()                      // Best effort: the error below is the one to report.
		d.removeSocket(base, fileID{}) // Best effort: as above.
		return nil, fileID{}, fmt.Errorf("socket %s: %w", socket, err)
	}
	return l, idOf(&st), nil
}

// errno returns the system error inside a net error, for a message that
// names the socket's path rather than the path it was reached by.
func errno(err error) error {
	if e, ok := errors.AsType[syscall.Errno](err); ok {
		return e
	}
	return err
}

// AcceptUnix accepts the next connection, on whichever listener the
// socket has: one bound again replaces the last.
func (s *Socket) AcceptUnix() (*net.UnixConn, error) {
	for {
		s.mu.Lock()
		l := s.l
		s.mu.Unlock()
		nc, err := l.AcceptUnix()
		if err == nil {
			return nc, nil
		}
		s.mu.Lock()
		rebound := s.l != l && !s.closed
		s.mu.Unlock()
		if !rebound {
			return nil, err
		}
	}
}

// Keep makes the socket look at its path every keepEvery, until Close:
// when the socket file is gone or another file is there, or the lock
// file is not lock's any more, it re-creates the directory (0700,
// checked), takes the lock again (a lock file that is held by another
// process is tried again at the next look), and binds the path again.
// lock is the daemon's, held since before Listen. Call Keep once,
// before the socket is served.
func (s *Socket) Keep(lock *Lock, log *slog.Logger) {
	s.mu.Lock()
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	stop, done := s.stop, s.done
	s.mu.Unlock()
	go func() {
		defer close(done)
		tick := time.NewTicker(keepEvery)
		defer tick.Stop()
		var failed string // the last failure, logged once
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			err := s.keep(lock, log)
			switch {
			case err == nil:
				failed = ""
			case err.Error() != failed:
				failed = err.Error()
				log.Warn("the socket was removed, and binding it again failed; trying again", "socket", s.path, "err", err)
			}
		}
	}()
}

// keep looks at the socket's path and lock file once, as Keep says.
func (s *Socket) keep(lock *Lock, log *slog.Logger) error {
	s.mu.Lock()
	id := s.id
	s.mu.Unlock()
	var st unix.Stat_t
	bound := unix.Lstat(s.path, &st) == nil && idOf(&st) == id
	locked := lock.current(s.path)
	if bound && locked {
		return nil
	}
	if err := PrepareDir(s.path); err != nil {
		return err
	}
	if !locked {
		ok, err := lock.renew(s.path)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s is held by another process", lockPath(s.path))
		}
		log.Info("the socket's lock file was removed; took a new one", "lock", lockPath(s.path))
	}
	if bound {
		return nil
	}
	l, id, err := bind(s.path, false) // commands run: the umask is theirs
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		closeListener(l, s.path, id)
		return nil
	}
	old := s.l
	s.l, s.id = l, id
	s.mu.Unlock()
	old.Close() // Best effort: no client reaches it any more; its AcceptUnix goes on with l.
	log.Info("the socket was removed; bound it again", "socket", s.path)
	return nil
}

// Close stops Keep, closes the listener, removes the socket file if it
// is still the one bound, and lets go of the claim.
func (s *Socket) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	stop, done := s.stop, s.done
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	s.mu.Lock()
	l, id := s.l, s.id
	s.mu.Unlock()
	err := closeListener(l, s.path, id)
	closeClaim(s.claim)
	return err
}

// closeListener closes l and removes its socket file at path, if the
// file there is still id.
func closeListener(l *net.UnixListener, path string, id fileID) error {
	err := l.Close()
	if d, derr := openDir(filepath.Dir(path), false); derr == nil {
		d.removeSocket(filepath.Base(path), id) // Best effort: a socket left behind is replaced by the next daemon.
		d.close()
	}
	return err
}

func closeClaim(c io.Closer) {
	if c != nil {
		c.Close() // Best effort: the exit lets go of it anyway.
	}
}
