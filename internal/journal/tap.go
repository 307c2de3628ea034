package journal

import (
	"slices"
	"sync/atomic"
	"time"

	"shellagent/outputbuf"
)

// A Source is a terminal's output as the history reads it: every byte
// written has an absolute offset, and the source holds the last ones
// (an outputbuf.Ring is one). Its methods are safe for use by the
// Store's writer while the terminal writes.
type Source interface {
	outputbuf.Reader // the bytes by offset, as the history's Cursor reads them
	// Total returns the offset just past the last byte written.
	Total() int64
}

// A Tap is a terminal's output as the history follows it. The history
// copies nothing as the output is written: its writer reads from the
// terminal's Source what it has not written yet, on its own schedule
// (at most a second after Wrote, at the session's durable points, at
// the terminal's exit, and at Flush and Close), at most the last
// Scrollback bytes of it; the bytes the source no longer holds by then
// are recorded as a gap. A nil *Tap (history off) does nothing.
type Tap struct {
	s     *Store
	src   Source
	dirty atomic.Bool      // written since the writer last read
	cur   outputbuf.Cursor // the writer's: at the first byte not in the history
}

// Attach makes the output of terminal term of session id, as src holds
// it, part of the session's history. The first byte the history lacks
// is found in its file: all of src's output for a new terminal, what
// follows what an earlier agent wrote for a terminal handed over in an
// upgrade in place. It returns nil for a session the Store does not
// have, or with history off.
func (s *Store) Attach(id, term string, src Source) *Tap {
	if s.opts.Off {
		return nil
	}
	t := &Tap{s: s, src: src}
	if !s.enqueue(op{kind: opAttach, id: id, term: term, tap: t}) {
		return nil
	}
	return t
}

// Wrote tells the Store that the terminal wrote output: the writer
// reads it within a second. It costs an atomic load while the writer
// has not read the output before it; it never waits.
func (t *Tap) Wrote() {
	if t != nil && !t.dirty.Load() && t.dirty.CompareAndSwap(false, true) {
		t.s.wake.poke()
	}
}

// An outReader is the writer's reading of the terminals' output (Tap):
// what it reads it encodes into the files' pending lines.
type outReader struct {
	w   *writer
	buf []byte // where it reads output (pull), maxChunk bytes
}

// flowing reports whether a terminal wrote output the writer has not
// read.
func (r *outReader) flowing() bool {
	for _, f := range r.w.files {
		for _, t := range f.taps {
			if t.dirty.Load() {
				return true
			}
		}
	}
	return false
}

// attach starts reading t for terminal term of f, from what f holds.
func (r *outReader) attach(f *file, term string, t *Tap) {
	if f.taps == nil {
		f.taps = make(map[string]*Tap)
	}
	var off int64
	if o := f.terms[term]; o != nil {
		off = o.written
	}
	// A source that restarted its offsets (it never does: a ring
	// handed over keeps them) has nothing the file has.
	t.cur = outputbuf.CursorAt(min(off, t.src.Total()))
	f.taps[term] = t
}

// pullAll reads every tap of every file, and adds the files it wrote
// lines for to touched.
func (r *outReader) pullAll(touched []*file) []*file {
	for _, f := range r.w.files {
		if r.pullFile(f) {
			touched = touch(touched, f)
		}
	}
	return touched
}

// pullFile reads every tap of f, and reports whether it added lines:
// none while f drops its lines (a failed write), whose taps resync
// starts again from what the file holds.
func (r *outReader) pullFile(f *file) bool {
	if f.dropping {
		return false
	}
	added := false
	for term, t := range f.taps {
		added = r.pull(f, term, t) || added
	}
	return added
}

// pull encodes what t's source holds that f lacks, at most the last
// Scrollback bytes, into f's pending lines, a gap before it for what
// the source no longer holds; it reports whether it added lines.
func (r *outReader) pull(f *file, term string, t *Tap) bool {
	t.dirty.Store(false) // a write from now on asks again
	end := t.src.Total()
	if end <= t.cur.Offset() {
		return false
	}
	now := time.Now()
	if r.buf == nil {
		r.buf = make([]byte, maxChunk)
	}
	t.cur.Skip(end - int64(r.w.opts.Scrollback))
	for from := t.cur.Offset(); from < end; from = t.cur.Offset() {
		n, lost := t.cur.Next(t.src, r.buf[:min(int64(len(r.buf)), end-from)])
		if lost > 0 {
			f.pend = r.w.encode(f, &op{kind: opGap, id: f.id, term: term, n: lost, at: now})
		}
		if n == 0 {
			break
		}
		f.pend = r.w.encode(f, &op{kind: opOut, id: f.id, term: term, data: r.buf[:n], at: now})
		if len(f.pend) >= pendMax {
			r.w.writePend(f)
		}
	}
	f.pulledAt = now
	return true
}

// touch adds f to touched unless it holds it.
func touch(touched []*file, f *file) []*file {
	if slices.Contains(touched, f) {
		return touched
	}
	return append(touched, f)
}
