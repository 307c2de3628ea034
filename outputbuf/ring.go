// Package outputbuf keeps the most recent output of a terminal in a ring
// buffer and lets any number of readers follow it by absolute offset.
//
// Offsets count every byte ever written to a Ring, so a reader that remembers
// the offset of the last byte it sent can ask for "everything since N" and learn
// exactly how many bytes were overwritten before it could read them.
//
// The ring memory grows with what is written (doubling up to its capacity) and
// only then starts to wrap, so a terminal that prints little costs little.
//
// armon/circbuf was the first choice, but it cannot serve a byte range: its
// Bytes method copies the whole ring once it has wrapped, which on a busy
// terminal would put a full-ring allocation on every chunk sent.
package outputbuf

import (
	"sync"
	"sync/atomic"
)

// minAlloc is the first allocation of a ring's memory.
const minAlloc = 4 << 10

// A Ring holds the last Cap bytes written to it. It is safe for concurrent
// use by one writer and any number of readers; Write never blocks on readers
// for longer than a memory copy.
type Ring struct {
	capacity int

	mu    sync.Mutex
	buf   []byte // len(buf) <= capacity; grows until it reaches capacity
	total int64  // bytes ever written
	// closed is set by Close: no more bytes will be written.
	closed bool

	watchers atomic.Pointer[[]*watcher]
}

// New returns an empty ring that keeps at most capacity bytes.
// A capacity below 1 is treated as 1.
func New(capacity int) *Ring {
	return &Ring{capacity: max(capacity, 1)}
}

// Cap returns the most bytes the ring keeps.
func (r *Ring) Cap() int { return r.capacity }

// Write appends p, overwriting the oldest bytes once the ring is full, then
// calls every watcher. It always consumes all of p and never fails.
func (r *Ring) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return len(p), nil
	}
	r.write(p)
	r.mu.Unlock()
	r.notify()
	return len(p), nil
}

func (r *Ring) write(p []byte) {
	n := len(p)
	r.total += int64(n)
	if n >= r.capacity {
		// Only the tail survives; lay it out so that offset total-capacity
		// sits at index (total-capacity) % capacity.
		r.grow(r.capacity)
		p = p[n-r.capacity:]
		at := int((r.total - int64(r.capacity)) % int64(r.capacity))
		m := copy(r.buf[at:], p)
		copy(r.buf, p[m:])
		return
	}
	start := r.total - int64(n)
	if end := start + int64(n); end > int64(len(r.buf)) && len(r.buf) < r.capacity {
		r.grow(int(min(end, int64(r.capacity))))
	}
	at := int(start % int64(len(r.buf)))
	m := copy(r.buf[at:], p)
	copy(r.buf, p[m:])
}

// grow makes the ring's memory at least need bytes long (at most capacity),
// keeping the bytes it holds at their positions. It is only called while the
// ring has not wrapped yet, or with need == capacity.
func (r *Ring) grow(need int) {
	if need <= len(r.buf) {
		return
	}
	size := max(len(r.buf)*2, minAlloc, need)
	size = min(size, r.capacity)
	nb := make([]byte, size)
	if held := r.held(); held > 0 {
		// The ring has not wrapped (len(buf) < capacity): bytes sit at
		// index offset % len(buf), and offset % size for the new size is the
		// same index because offset < len(buf) <= size.
		copy(nb, r.buf[:held])
	}
	r.buf = nb
}

// held returns how many bytes the ring currently holds.
func (r *Ring) held() int {
	return int(min(r.total, int64(len(r.buf))))
}

// Total returns the number of bytes ever written.
func (r *Ring) Total() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// ReadAt copies bytes starting at absolute offset off into p and returns how
// many it copied and the offset where they start. If bytes from off onwards
// were already overwritten, start is the oldest offset still held (start > off)
// and start-off bytes were lost to this reader. n is 0 when nothing is held at
// or after off.
func (r *Ring) ReadAt(p []byte, off int64) (n int, start int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	oldest := r.total - int64(r.held())
	start = max(off, oldest)
	if start >= r.total || len(p) == 0 {
		return 0, start
	}
	want := int(min(int64(len(p)), r.total-start))
	at := int(start % int64(len(r.buf)))
	n = copy(p[:want], r.buf[at:])
	n += copy(p[n:want], r.buf)
	return n, start
}

// Snapshot returns a copy of everything the ring holds and the absolute offset
// just past it.
func (r *Ring) Snapshot() (data []byte, end int64) {
	return r.AppendSnapshot(nil)
}

// AppendSnapshot appends everything the ring holds to dst, as one
// consistent copy, and returns the offset just past it.
func (r *Ring) AppendSnapshot(dst []byte) (data []byte, end int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.appendLinear(dst, r.held()), r.total
}

// appendLinear appends the last held bytes to dst, oldest first.
func (r *Ring) appendLinear(dst []byte, held int) []byte {
	if held == 0 {
		return dst
	}
	at := int((r.total - int64(held)) % int64(len(r.buf)))
	first := r.buf[at:min(len(r.buf), at+held)]
	dst = append(dst, first...)
	return append(dst, r.buf[:held-len(first)]...)
}

// Compact shrinks the ring's memory to exactly what it holds and closes it to
// further writes (a later Write is dropped). Use it once a terminal has exited
// and its output is kept only for display and replay.
func (r *Ring) Compact() {
	r.mu.Lock()
	defer r.mu.Unlock()
	held := r.held()
	if held == len(r.buf) {
		r.closed, r.capacity = true, max(held, 1)
		return
	}
	// Keep the layout rule: offset o sits at index o % len(buf).
	data := r.appendLinear(nil, held)
	k := int((r.total - int64(held)) % int64(held))
	nb := make([]byte, held)
	copy(nb[k:], data[:held-k])
	copy(nb[:k], data[held-k:])
	r.buf, r.capacity, r.closed = nb, max(held, 1), true
}

// Watch registers fn to be called after every Write, on the writing
// goroutine. fn must not block. The returned function unregisters it.
func (r *Ring) Watch(fn func()) (unwatch func()) {
	w := &watcher{fn: fn}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setWatchers(append(r.watcherList(), w))
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		var kept []*watcher
		for _, o := range r.watcherList() {
			if o != w {
				kept = append(kept, o)
			}
		}
		r.setWatchers(kept)
	}
}

type watcher struct{ fn func() }

func (r *Ring) watcherList() []*watcher {
	if w := r.watchers.Load(); w != nil {
		return *w
	}
	return nil
}

// setWatchers publishes a fresh copy, so that notify can range over the
// list without a lock and without allocating.
func (r *Ring) setWatchers(w []*watcher) {
	c := make([]*watcher, len(w))
	copy(c, w)
	r.watchers.Store(&c)
}

func (r *Ring) notify() {
	if w := r.watchers.Load(); w != nil {
		for _, o := range *w {
			o.fn()
		}
	}
}
