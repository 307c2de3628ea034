package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"

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
type Lock struct{ f *os.File }

func lockPath(socket string) string { return socket + ".lock" }

// TryLock takes the lock of socket without waiting: ok is false when
// another process holds it. The socket's directory must have been
// prepared (PrepareDir).
func TryLock(socket string) (l *Lock, ok bool, err error) {
	f, err := os.OpenFile(lockPath(socket), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("lock: %w", err)
	}
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
	case errors.Is(err, unix.EWOULDBLOCK):
		f.Close() // Best effort: never locked.
		return nil, false, nil
	case err != nil:
		f.Close() // Best effort: never locked.
		return nil, false, fmt.Errorf("lock %s: %w", lockPath(socket), err)
	}
	return &Lock{f: f}, true, nil
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
	cmd.ExtraFiles = append(cmd.ExtraFiles, l.f)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, lockFDEnv+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
}

// Close lets go of this process's hold of the lock. A daemon that
// inherited it holds it on.
func (l *Lock) Close() error { return l.f.Close() }
