package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// lockFDEnv names the environment variable by which Connect's start hands
// the daemon it starts the lock it took: the number of the inherited
// descriptor. InheritedLock reads it and removes it from the environment.
const lockFDEnv = "SHELLAGENT_DAEMON_LOCK_FD"

// A Lock is the flock of a socket's lock file (socket + ".lock"). A daemon
// holds it for as long as it lives; a client holds it while it starts one,
// and hands it over. The kernel releases it when the last descriptor of
// its open file goes, so a dead daemon holds nothing.
type Lock struct {
	mu sync.Mutex // guards f, which renew replaces
	f  *os.File
}

func lockPath(socket string) string { return socket + ".lock" }

// TryLock takes the lock of socket without waiting: ok is false when
// another process holds it. The socket's directory must have been
// prepared (PrepareDir); the lock file is opened through the directory's
// checked descriptor. Something at socket's path that is not a socket is
// refused before a lock file is created beside it.
func TryLock(socket string) (l *Lock, ok bool, err error) {
	d, err := openDir(filepath.Dir(socket), false)
	if err != nil {
		return nil, false, err
	}
	defer d.close()
	base := filepath.Base(socket)
	if err := d.checkSocketFile(base); err != nil {
		return nil, false, err
	}
	fd, err := unix.Openat(d.fd(), base+".lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", lockPath(socket), err)
	}
	f := os.NewFile(uintptr(fd), lockPath(socket))
	switch err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); {
	case errors.Is(err, unix.EWOULDBLOCK):
		f.Close() // Best effort: never locked.
		return nil, false, nil
	case err != nil:
		f.Close() // Best effort: never locked.
		return nil, false, fmt.Errorf("lock %s: %w", lockPath(socket), err)
	}
	return &Lock{f: f}, true, nil
}

// LockHolder reports whether a process holds socket's lock: a daemon,
// from its start until it has exited (so also while it starts or stops
// and answers no one), or a client starting one. holder tells one hold
// from the next where the system says who took it (Linux: the pid in
// /proc/locks, which for a daemon a relay started is the relay's), else
// 0. It creates no lock file and, on Linux, never takes the lock (a
// daemon starting meanwhile would find it taken); elsewhere it takes it
// shared for an instant.
func LockHolder(socket string) (holder int, held bool, err error) {
	d, err := openDir(filepath.Dir(socket), false)
	if err != nil {
		return 0, false, err
	}
	defer d.close()
	fd, err := unix.Openat(d.fd(), filepath.Base(socket)+".lock", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("lock %s: %w", lockPath(socket), err)
	}
	defer unix.Close(fd) // Best effort: read only.
	holder, held, err = flockHolder(fd)
	if err != nil {
		return 0, false, fmt.Errorf("lock %s: %w", lockPath(socket), err)
	}
	return holder, held, nil
}

// current reports whether socket's lock file is still the file l holds.
func (l *Lock) current(socket string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	var got, want unix.Stat_t
	return unix.Fstat(int(l.f.Fd()), &got) == nil && unix.Lstat(lockPath(socket), &want) == nil && idOf(&got) == idOf(&want)
}

// renew takes socket's lock file anew when the one l holds was removed
// (or replaced): ok is false when another process holds the new one.
func (l *Lock) renew(socket string) (ok bool, err error) {
	if l.current(socket) {
		return true, nil
	}
	n, ok, err := TryLock(socket)
	if !ok {
		return false, err
	}
	l.mu.Lock()
	old := l.f
	l.f = n.f
	l.mu.Unlock()
	old.Close() // Best effort: a lock on a removed file guards nothing.
	return true, nil
}

// InheritedLock returns the lock of socket that the process that started
// this one handed over (see Connect), or nil if none was. A descriptor
// that is not socket's lock file is closed and ignored.
func InheritedLock(socket string) *Lock {
	v := os.Getenv(lockFDEnv)
	os.Unsetenv(lockFDEnv) // Best effort: fails only for an invalid name.
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil
	}
	f := os.NewFile(uintptr(fd), lockPath(socket))
	var got, want unix.Stat_t
	if unix.Fstat(fd, &got) != nil || unix.Stat(lockPath(socket), &want) != nil || got.Dev != want.Dev || got.Ino != want.Ino {
		f.Close() // Best effort: not ours to keep.
		return nil
	}
	return &Lock{f: f}
}

// HandOver makes cmd, the daemon that the holder starts, inherit the
// lock: its descriptor goes into cmd.ExtraFiles and its number into
// cmd.Env (os.Environ() if cmd.Env is nil), for InheritedLock.
func (l *Lock) HandOver(cmd *exec.Cmd) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cmd.ExtraFiles = append(cmd.ExtraFiles, l.f)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, lockFDEnv+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
}

// Close lets go of this process's hold of the lock. A daemon that
// inherited it holds it on.
func (l *Lock) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// LockOpening takes the flock of socket's opening lock (socket +
// ".open.lock"), waiting for another holder to let it go: the command
// line (shellagent up) holds it while it looks for the session of its
// directory and, finding none, opens one, so that two of them started at
// once open one session, not one each. release lets it go; so does the
// end of the process. The socket's directory must be there (Connect
// makes it).
func LockOpening(socket string) (release func(), err error) {
	d, err := openDir(filepath.Dir(socket), false)
	if err != nil {
		return nil, err
	}
	defer d.close()
	path := socket + ".open.lock"
	fd, err := unix.Openat(d.fd(), filepath.Base(path), unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	for {
		if err = unix.Flock(fd, unix.LOCK_EX); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close() // Best effort: never locked.
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // Best effort: closing lets the flock go.
}
