package watch

import (
	"errors"
	"io"
	"io/fs"
	"sync"
	"time"

	"shellagent/internal/fswatch"
)

// changes is a watch on a file or a directory tree, debounced: it calls
// fire once changes have stopped for quiet, and failed once if it can
// watch no more. Both run on a goroutine of their own, never the watch's,
// so they may block. After stop neither starts, but a call that had
// started may still come: the caller tells it apart (Watch.gen).
type changes struct {
	quiet time.Duration
	fire  func()
	fail  func(error)
	tree  io.Closer // the operating system's watch

	mu      sync.Mutex // guards what follows
	timer   *time.Timer
	stopped bool
}

// watchChanges starts watching path, and reports whether it is a
// directory.
func watchChanges(path string, quiet time.Duration, fire func(), failed func(error)) (c *changes, dir bool, err error) {
	c = &changes{quiet: quiet, fire: fire, fail: failed}
	c.tree, dir, err = fswatch.Watch(path, c.changed, c.failed)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err // the path is the caller's to name
		}
		return nil, false, err
	}
	return c, dir, nil
}

// changed (re)starts the quiet period: on the watch's goroutine, it must
// not block.
func (c *changes) changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.stopped:
	case c.timer == nil:
		c.timer = time.AfterFunc(c.quiet, func() { c.call(c.fire) })
	default:
		c.timer.Reset(c.quiet)
	}
}

// failed reports, on a goroutine of its own, that the watch ended.
func (c *changes) failed(err error) {
	go c.call(func() { c.fail(err) })
}

// call calls f unless the watch was stopped.
func (c *changes) call(f func()) {
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if !stopped {
		f()
	}
}

// stop stops watching. It returns once the operating system's watch is
// closed; a call of fire or failed that has begun may still be running.
func (c *changes) stop() {
	c.mu.Lock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.tree.Close() // Best effort: closing an inotify descriptor fails only if it was closed.
}
