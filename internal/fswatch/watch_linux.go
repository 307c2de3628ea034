//go:build linux

package fswatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// inotify is Watch on Linux: one inotify descriptor per watch, a
// watch descriptor on each directory of the tree (the directory of a
// watched file, for a file), and one goroutine that reads the events,
// which adds the directories that appear in the tree. The descriptor is
// non-blocking and in the runtime's poller, so Close ends a Read. One
// watch watches at most Share directories.
type inotify struct {
	file  *os.File
	over  error          // what add returns once share directories are watched
	share int            // the most directories it watches (see Share)
	only  string         // for a file: its name, the only one in its directory that counts
	root  int            // the watch descriptor of the top directory
	dirs  map[int]string // watch descriptor → directory; the reading goroutine's once it runs
	done  chan struct{}  // closed when the reading goroutine returns
}

// inotifyMask is what counts as a change in a directory: an entry
// created, removed, renamed, written or with new attributes. Reading
// (IN_ACCESS, IN_OPEN) does not count, so a command that reads the tree
// it watches does not run itself again.
const inotifyMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// Watch watches path, a directory with everything under it or a file,
// and calls changed after each batch of changes and failed once if it
// can watch no more (the top directory went away, or the tree grew past
// Share directories). Neither is called once Close has returned; both
// are called on the watch's goroutine. dir reports whether path is a
// directory.
func Watch(path string, changed func(), failed func(error)) (_ io.Closer, dir bool, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, false, err
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, false, fmt.Errorf("inotify_init1: %w (fs.inotify.max_user_instances bounds the watches of a user)", err)
	}
	w := &inotify{file: os.NewFile(uintptr(fd), "inotify"), root: -1, dirs: make(map[int]string), done: make(chan struct{})}
	w.share, w.over = Share()
	if fi.IsDir() {
		err = w.addTree(path)
	} else {
		w.only = filepath.Base(path)
		_, err = w.add(filepath.Dir(path))
	}
	if err != nil {
		w.file.Close() // Best effort: it was never used.
		return nil, false, err
	}
	go w.read(changed, failed)
	return w, fi.IsDir(), nil
}

// Close stops the watch and waits for its goroutine.
func (w *inotify) Close() error {
	err := w.file.Close()
	<-w.done
	return err
}

// maxUserWatches is where Linux keeps how many inotify watches a user may
// hold.
const maxUserWatches = "/proc/sys/fs/inotify/max_user_watches"

// Share returns how many directories one watch may watch: an eighth of
// the user's inotify watches, at most MaxDirs (MaxDirs if the limit
// cannot be read), and the error that says so once a tree has more.
func Share() (share int, over error) {
	share = MaxDirs
	rule := fmt.Sprintf("at most %d", MaxDirs)
	if b, err := os.ReadFile(maxUserWatches); err == nil {
		if limit, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && limit > 0 {
			share = min(limit/8, MaxDirs)
			rule = fmt.Sprintf("the smaller of %d and an eighth of this user's %d (fs.inotify.max_user_watches)", MaxDirs, limit)
		}
	}
	share = max(share, 1)
	return share, fmt.Errorf("it has more than %d directories, and one watch takes at most %d inotify watches (%s); watch a smaller tree", share, share, rule)
}

// add watches directory dir; the first is the top. Past w.share
// directories it watches no more and returns w.over.
func (w *inotify) add(dir string) (wd int, err error) {
	if len(w.dirs) >= w.share {
		return -1, w.over
	}
	rc, err := w.file.SyscallConn()
	if err != nil {
		return -1, err
	}
	if cerr := rc.Control(func(fd uintptr) { wd, err = unix.InotifyAddWatch(int(fd), dir, inotifyMask) }); cerr != nil {
		return -1, cerr // closed meanwhile
	}
	if errors.Is(err, unix.ENOSPC) {
		return -1, errors.New("the inotify watches of this user are used up (see fs.inotify.max_user_watches); watch a smaller tree")
	}
	if err != nil {
		return -1, &fs.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	w.dirs[wd] = dir
	if w.root < 0 {
		w.root = wd
	}
	return wd, nil
}

// addTree watches dir and every directory under it. Only a failure to
// watch dir itself, or the end of the watches a user may have, is an
// error; a directory that goes away or cannot be read meanwhile is left
// out.
func (w *inotify) addTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && p == dir:
			return err
		case err != nil || !d.IsDir():
			return nil
		}
		if _, err := w.add(p); err != nil {
			if p == dir || !errors.As(err, new(*fs.PathError)) {
				return err
			}
			return fs.SkipDir
		}
		return nil
	})
}

// read reads events until the watch is closed or its top directory goes.
func (w *inotify) read(changed func(), failed func(error)) {
	defer close(w.done)
	buf := make([]byte, 16<<10) // room for at least 60 events
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				failed(fmt.Errorf("reading inotify events: %w", err))
			}
			return
		}
		some, err := w.events(buf[:n])
		if some {
			changed()
		}
		if err != nil {
			failed(err)
			return
		}
	}
}

// events reads a batch of events and reports whether any is a change, or
// the error that ends the watch.
func (w *inotify) events(p []byte) (some bool, err error) {
	for len(p) >= unix.SizeofInotifyEvent {
		wd := int(int32(binary.NativeEndian.Uint32(p[0:])))
		mask := binary.NativeEndian.Uint32(p[4:])
		size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(p[12:]))
		if size > len(p) {
			break
		}
		name := string(bytes.TrimRight(p[unix.SizeofInotifyEvent:size], "\x00"))
		p = p[size:]
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0: // events were lost: something changed
			some = true
		case mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0 && wd == w.root:
			if w.only != "" {
				return some, errors.New("its directory was removed or moved")
			}
			return some, errors.New("it was removed or moved")
		case mask&unix.IN_IGNORED != 0:
			delete(w.dirs, wd)
		case mask&unix.IN_MOVE_SELF != 0: // moved out of the tree, or within it (then it comes back as IN_MOVED_TO)
			w.remove(wd)
		case w.only != "":
			some = some || name == w.only
		default:
			some = true
			if dir, ok := w.dirs[wd]; ok && mask&unix.IN_ISDIR != 0 && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				if err := w.addTree(filepath.Join(dir, name)); err != nil && !errors.As(err, new(*fs.PathError)) {
					return some, err
				}
			}
		}
	}
	return some, nil
}

// remove stops watching the directory of wd.
func (w *inotify) remove(wd int) {
	delete(w.dirs, wd)
	if rc, err := w.file.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.InotifyRmWatch(int(fd), uint32(wd)) }) // Best effort: it may be gone already.
	}
}
