package contain

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// watcher is one inotify descriptor for every group's cgroup.events. It is
// served by the runtime poller: however many terminals there are, waiting
// costs one parked goroutine and no OS thread, and nothing polls.
type watcher struct {
	f    *os.File
	done chan struct{} // closed when run returns

	mu    sync.Mutex // guards calls
	calls map[int]func()
}

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{}), calls: make(map[int]func())}
	go w.run()
	return w, nil
}

// add calls changed on every modification of the file at name, from the
// watcher's goroutine, until remove.
func (w *watcher) add(name string, changed func()) (int, error) {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return -1, err
	}
	wd := -1
	var werr error
	if err := rc.Control(func(fd uintptr) {
		wd, werr = unix.InotifyAddWatch(int(fd), name, unix.IN_MODIFY)
	}); err != nil {
		return -1, err
	}
	if werr != nil {
		return -1, fmt.Errorf("watch %s: %w", name, werr)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.calls == nil {
		return -1, fmt.Errorf("watch %s: the containment is closed", name)
	}
	w.calls[wd] = changed
	return wd, nil
}

// remove stops watching wd.
func (w *watcher) remove(wd int) error {
	w.mu.Lock()
	delete(w.calls, wd)
	w.mu.Unlock()
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		_, rerr = unix.InotifyRmWatch(int(fd), uint32(wd))
	}); err != nil {
		return err
	}
	if rerr != nil && !errors.Is(rerr, unix.EINVAL) { // EINVAL: the cgroup is gone already
		return fmt.Errorf("inotify_rm_watch: %w", rerr)
	}
	return nil
}

// close stops the watcher and waits for its goroutine. Every file still
// watched gets one last call, so that a change the watcher had no time to
// dispatch is not lost.
func (w *watcher) close() error {
	err := w.f.Close()
	<-w.done
	w.mu.Lock()
	calls := w.calls
	w.calls = nil
	w.mu.Unlock()
	for _, changed := range calls {
		changed()
	}
	return err
}

func (w *watcher) run() {
	defer close(w.done)
	rc, err := w.f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf)
			return rerr != unix.EAGAIN
		}); err != nil {
			return // closed
		}
		if rerr != nil {
			if rerr == unix.EINTR {
				continue
			}
			return
		}
		w.dispatch(buf[:n])
	}
}

// dispatch calls the callback of every watch named in a batch of events,
// outside the lock.
func (w *watcher) dispatch(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int(int32(binary.NativeEndian.Uint32(b[0:4])))
		mask := binary.NativeEndian.Uint32(b[4:8])
		size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:16]))
		b = b[min(size, len(b)):]
		w.mu.Lock()
		changed := w.calls[wd]
		if mask&unix.IN_IGNORED != 0 {
			delete(w.calls, wd) // the file is gone
		}
		w.mu.Unlock()
		if changed != nil {
			changed()
		}
	}
}
