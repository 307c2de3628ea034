package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLive is the error of Reopen and Delete for a session that another
// process sharing the state directory has live: it holds the lock of the
// session's file.
var ErrLive = errors.New("live in another process that shares the state directory")

// A LiveError is ErrLive with the process that holds the session, where
// the system says (Linux's /proc/locks); PID is 0 where it does not.
type LiveError struct{ PID int }

func (e *LiveError) Error() string {
	if e.PID == 0 {
		return ErrLive.Error()
	}
	return fmt.Sprintf("%v (pid %d)", ErrLive, e.PID)
}

// Is makes a LiveError ErrLive for errors.Is.
func (e *LiveError) Is(target error) bool { return target == ErrLive }

// A process holds an exclusive flock on a session's file (its own open
// file of it, apart from the one it writes through) for as long as the
// session is live in it. The kernel drops the lock with the process, so a
// crashed agent holds nothing. Another process neither makes the session
// live (Reopen), nor removes its file (Delete, prune), while it is held.

// lockTries and lockPause bound how long lockFile retries a lock that is
// held: another process's probe (probeLocked) holds one for microseconds.
const (
	lockTries = 5
	lockPause = 2 * time.Millisecond
)

// lockFile takes the lock of the session file at path: ErrLive if another
// process holds it, fs.ErrNotExist if there is no such file. The file it
// returns holds the lock until it is closed.
func lockFile(path string) (*os.File, error) {
	for range lockTries {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil && samePath(f, path) {
			return f, nil
		}
		f.Close() // Best effort: read only; closing drops a lock of a file renamed over.
		if err != nil && !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		time.Sleep(lockPause)
	}
	return nil, &LiveError{PID: holder(path)}
}

// holder returns the pid of the process that holds the flock of the file
// at path, as /proc/locks lists it ("1: FLOCK ADVISORY WRITE 2598
// fe:00:10002909 0 EOF"), or 0.
//
// The kernel serves /proc/locks a page per read and finds where the next
// page starts by counting lines again, so a lock taken or dropped anywhere
// on the system between two reads can shift a line out of the file as
// read. The holder's line stays for as long as it holds, so holder reads
// the file again (holderReads in all) before it gives up; each time
// against the file at path then, which the holder's compaction may have
// replaced by a new one, locked before the rename.
func holder(path string) int {
	for range holderReads {
		want, ok := lockName(path)
		if !ok {
			return 0
		}
		b, err := os.ReadFile("/proc/locks")
		if err != nil {
			return 0
		}
		if pid := writeFlockHolder(string(b), want); pid != 0 {
			return pid
		}
	}
	return 0
}

// lockName names the file at path as /proc/locks does:
// "MAJOR:MINOR:INODE", the device's numbers in hex.
func lockName(path string) (string, bool) {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return "", false
	}
	dev := uint64(st.Dev) // int32 on some systems
	return fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), st.Ino), true
}

// writeFlockHolder returns the pid of the line of locks, as /proc/locks
// lists them, that is an exclusive flock of the file want names
// ("MAJOR:MINOR:INODE"), or 0.
func writeFlockHolder(locks, want string) int {
	for line := range strings.Lines(locks) {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "FLOCK" && f[3] == "WRITE" && f[5] == want {
			pid, _ := strconv.Atoi(f[4])
			return pid
		}
	}
	return 0
}

// holderReads bounds how often holder reads /proc/locks: one read in a
// few hundred misses a line while other locks change (TestHolderUnderChurn).
const holderReads = 4

// lockNew locks f, a file no other process has opened yet.
func lockNew(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return nil
}

// samePath reports whether f is still the file at path.
func samePath(f *os.File, path string) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	pi, err := os.Stat(path)
	return err == nil && os.SameFile(fi, pi)
}

// probeLocked reports whether another process holds the lock of the
// session file at path; a file that is gone is not locked.
func probeLocked(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close() // Best effort: read only; closing drops the probe's lock.
	return errors.Is(unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK)
}

// notExist reports whether err says the file is gone.
func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
