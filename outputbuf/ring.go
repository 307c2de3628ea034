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
// A reader that reads some time after the output was written (a
// service's log, the history, a wait's line scan) keeps a Cursor: it
// reads what the ring holds past its offset and learns how many bytes it
// lost, and never makes Write wait.
//
// A reader that must not lose bytes follows the ring and holds it: Write
// then waits instead of overwriting bytes that reader has not taken, as a
// terminal emulator that stops reading its PTY makes the kernel block the
// child. A ring nobody holds never blocks.
//
// armon/circbuf was the first choice, but it cannot serve a byte range: its
// Bytes method copies the whole ring once it has wrapped, which on a busy
// terminal would put a full-ring allocation on every chunk sent.
package outputbuf

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// minAlloc is the first allocation of a ring's memory.
const minAlloc = 4 << 10

// A Ring holds the last Cap bytes written to it. It is safe for concurrent
// use by one writer and any number of readers. Write waits only while a
// Follower holds the ring (see Follower); otherwise it never blocks on
// readers for longer than a memory copy.
type Ring struct {
	capacity int

	mu    sync.Mutex
	buf   []byte // len(buf) <= capacity; grows until it reaches capacity
	total int64  // bytes ever written
	// closed is set by Compact: no more bytes will be written.
	closed    bool
	followers []*Follower
	waiting   bool       // a Write waits for the followers that hold
	room      *sync.Cond // signalled when a waiting Write may go on; made by the first wait

	notifyList atomic.Pointer[[]*Follower] // a copy of followers for notify
}

// New returns an empty ring that keeps at most capacity bytes.
// A capacity below 1 is treated as 1.
func New(capacity int) *Ring {
	return &Ring{capacity: max(capacity, 1)}
}

// Write appends p, overwriting the oldest bytes once the ring is full, and
// notifies every follower. While a follower holds the ring, Write writes no
// more than that follower can take without losing a byte, then waits until
// it has taken enough (see Follower) or stops holding. It always consumes
// all of p and never fails; bytes written after Compact are dropped.
func (r *Ring) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		r.mu.Lock()
		room := r.waitForRoom()
		if room == 0 { // closed
			r.mu.Unlock()
			break
		}
		k := min(room, len(p))
		r.write(p[:k])
		r.mu.Unlock()
		r.notify()
		p = p[k:]
	}
	return n, nil
}

// waitForRoom returns how many bytes may be written now, waiting while a
// holding follower has no room; 0 means the ring is closed.
func (r *Ring) waitForRoom() int {
	for !r.closed {
		behind, held := r.behind()
		if !held {
			return math.MaxInt
		}
		if behind < int64(r.capacity) {
			return r.capacity - int(behind)
		}
		// Full for a follower: wait until every holder is down to the low
		// watermark, so that the writer resumes with room for a good share
		// rather than one read at a time.
		r.waiting = true
		if r.room == nil {
			r.room = sync.NewCond(&r.mu)
		}
		for !r.closed && !r.drained() {
			r.room.Wait()
		}
		r.waiting = false
	}
	return 0
}

// behind returns how far the furthest holding follower lags behind the
// last byte written, and whether any follower holds.
func (r *Ring) behind() (behind int64, held bool) {
	for _, f := range r.followers {
		if f.hold {
			behind, held = max(behind, r.total-f.taken), true
		}
	}
	return behind, held
}

// drained reports whether every holding follower is at or under the low
// watermark, half the capacity.
func (r *Ring) drained() bool {
	behind, _ := r.behind()
	return behind <= int64(r.capacity/2)
}

// wake lets a waiting Write re-check its followers.
func (r *Ring) wake() {
	if r.waiting {
		r.room.Broadcast()
	}
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
// further writes (a later Write is dropped, and a waiting one returns). Use it
// once a terminal has exited and its output is kept only for display and
// replay.
func (r *Ring) Compact() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wake()
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

// A Follower is a reader that the Ring notifies after every Write and that
// can hold the ring: while it holds, Write never overwrites a byte it has
// not taken. Once the follower is a full ring behind, Write waits until it
// is down to half a ring (the low watermark), it stops holding, it stops
// following, or the ring is compacted. Its methods are safe for concurrent
// use with the ring's writer and readers.
type Follower struct {
	r      *Ring
	notify func()
	taken  int64 // guarded by r.mu: every byte before it was taken
	hold   bool  // guarded by r.mu
}

// Follow registers a follower that has taken nothing the ring still holds:
// the oldest byte held is its first untaken one. It does not hold the ring
// until Hold(true). notify, if not nil, is called after every Write, on the
// writing goroutine, without the ring's lock; it must not block.
func (r *Ring) Follow(notify func()) *Follower {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := &Follower{r: r, notify: notify, taken: r.total - int64(r.held())}
	r.followers = append(r.followers, f)
	r.publish()
	return f
}

// Taken records that the follower has taken every byte before offset off.
// Offsets only move forward: a smaller off than before is ignored.
func (f *Follower) Taken(off int64) {
	r := f.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if off > f.taken {
		f.taken = off
		if r.waiting && r.drained() {
			r.room.Broadcast()
		}
	}
}

// Hold sets whether Write must wait for this follower rather than overwrite
// bytes it has not taken. A waiting Write re-checks at once.
func (f *Follower) Hold(on bool) {
	r := f.r
	r.mu.Lock()
	defer r.mu.Unlock()
	f.hold = on
	r.wake()
}

// Stop unregisters the follower: it no longer holds the ring, and notify
// is not called by a Write that starts after Stop returns.
func (f *Follower) Stop() {
	r := f.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.followers = slices.DeleteFunc(r.followers, func(o *Follower) bool { return o == f })
	r.publish()
	r.wake()
}

// publish makes a fresh copy of the followers for notify, so that notify
// can range over them without the lock and without allocating.
func (r *Ring) publish() {
	c := slices.Clone(r.followers)
	r.notifyList.Store(&c)
}

func (r *Ring) notify() {
	if l := r.notifyList.Load(); l != nil {
		for _, f := range *l {
			if f.notify != nil {
				f.notify()
			}
		}
	}
}

// Taken returns the offset up to which every follower that holds the
// ring has taken the bytes (the least of their Taken offsets), and false
// when none holds it: a caller can wait until what was written has
// reached every reader that must not lose it.
func (r *Ring) Taken() (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	least, held := int64(math.MaxInt64), false
	for _, f := range r.followers {
		if f.hold {
			least, held = min(least, f.taken), true
		}
	}
	if !held {
		return 0, false
	}
	return least, true
}

// Restored returns a ring that holds data as the last bytes of total
// written in all, closed to further writes as Compact leaves it: the
// output of a terminal that ran before, read back from its history, with
// the offsets it had then.
func Restored(data []byte, total int64) *Ring {
	total = max(total, int64(len(data)))
	r := &Ring{capacity: max(len(data), 1), total: total, closed: true}
	if n := len(data); n > 0 {
		// The layout rule: offset o sits at index o % len(buf).
		r.buf = make([]byte, n)
		k := int((total - int64(n)) % int64(n))
		copy(r.buf[k:], data[:n-k])
		copy(r.buf[:k], data[n-k:])
	}
	return r
}
