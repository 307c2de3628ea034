package journal

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// An index is what a Store knows of each session without reading its
// file in full: what List shows, whether it is live here, and the locks
// this process holds. Its methods are called with Store.mu held, and do
// no I/O but closing a lock.
type index struct {
	dir     string // Dir/sessions; set at Open, then read only
	entries map[string]*entry
	total   int64                // bytes of every indexed file, and of those set aside
	skipped map[string]int64     // files that could not be read, by id: their size then
	aside   map[string]asideFile // the corrupt files set aside (SetAside), by id
	locks   map[string]*os.File  // the sessions this process holds live (lockFile), by id
}

// asideFile is a corrupt file set aside, as the index counts it.
type asideFile struct {
	size int64
	mod  time.Time
}

// entry is an indexed session.
type entry struct {
	info Info
	live bool // created or reopened here, and not closed since
}

func newIndex(dir string) index {
	return index{dir: dir, entries: make(map[string]*entry), skipped: make(map[string]int64), aside: make(map[string]asideFile), locks: make(map[string]*os.File)}
}

func (x *index) path(id string) string { return filepath.Join(x.dir, id+".jsonl") }

// asidePath is where session id's file is set aside.
func (x *index) asidePath(id string) string { return x.path(id) + SetAside }

// countAside counts f, the file of session id set aside, in place of what
// the index counted of it before.
func (x *index) countAside(id string, f asideFile) {
	x.total += f.size - x.aside[id].size
	x.aside[id] = f
}

// uncountAside no longer counts the file of session id set aside.
func (x *index) uncountAside(id string) {
	x.total -= x.aside[id].size
	delete(x.aside, id)
}

// list returns every entry's Info, in no order.
func (x *index) list() []Info {
	out := make([]Info, 0, len(x.entries))
	for _, e := range x.entries {
		out = append(out, e.info)
	}
	return out
}

// note applies o to the index, and reports whether o is to be queued:
// not when it is for a session the index does not have.
func (x *index) note(o *op) bool {
	e := x.entries[o.id]
	switch {
	case o.kind == opBarrier || o.kind == opWritten || o.kind == opHandover || o.kind == opRefresh:
		return true
	case o.kind == opCreate:
		if e != nil {
			x.total -= e.info.Size
		}
		e = &entry{info: Info{ID: o.id}, live: true}
		x.entries[o.id] = e
	case e == nil:
		_, aside := x.aside[o.id]
		return o.kind == opDelete && aside // the writer removes it
	}
	e.info.UpdatedAt = o.at
	switch o.kind {
	case opCreate, opMeta:
		e.info.Cwd, e.info.Title = o.meta.Cwd, o.meta.Title
	case opOpen:
		e.info.Closed, e.info.Elsewhere, e.live = false, false, true
	case opClosed:
		e.info.Closed, e.live = true, false
	case opDelete: // the lock stays, for the writer's remove
		x.total -= e.info.Size
		delete(x.entries, o.id)
	}
	return true
}

// put indexes info as read from its file, unless the session is live
// here: it is this process's own then.
func (x *index) put(info Info) {
	if e := x.entries[info.ID]; e != nil {
		if e.live {
			x.setSize(info.ID, info.Size)
			return
		}
		x.total -= e.info.Size
	}
	x.entries[info.ID] = &entry{info: info}
	x.total += info.Size
	delete(x.skipped, info.ID)
}

// drop removes session id from the index, and drops its lock.
func (x *index) drop(id string) {
	if e := x.entries[id]; e != nil {
		x.total -= e.info.Size
		delete(x.entries, id)
	}
	if l := x.locks[id]; l != nil {
		l.Close() // Best effort: closing drops the lock.
		delete(x.locks, id)
	}
}

// setSize records the size of session id's file.
func (x *index) setSize(id string, size int64) {
	if e := x.entries[id]; e != nil {
		x.total += size - e.info.Size
		e.info.Size = size
	}
}

// release drops the lock of session id unless it is live here.
func (x *index) release(id string) {
	if e := x.entries[id]; e != nil && e.live {
		return
	}
	if l := x.locks[id]; l != nil {
		l.Close() // Best effort: closing drops the lock.
		delete(x.locks, id)
	}
}

// pruneSettle is how long after Open a session that was never closed
// starts to count as prunable: long enough for a daemon upgraded in place
// (which takes over within 10 s) to make its sessions live again first.
const pruneSettle = 30 * time.Second

// prunable returns the sessions that pruning may remove, in the order it
// removes them: the closed ones, then (with neverClosed) the others,
// each the least recently updated first; never one live here. Whether
// another process holds one live is for the pruner to find out.
func (x *index) prunable(neverClosed bool) []Info {
	var closed, open []Info
	for _, e := range x.entries {
		switch {
		case e.live || x.locks[e.info.ID] != nil:
		case e.info.Closed:
			closed = append(closed, e.info)
		case neverClosed:
			open = append(open, e.info)
		}
	}
	oldest := func(a, b Info) int { return a.UpdatedAt.Compare(b.UpdatedAt) }
	slices.SortFunc(closed, oldest)
	slices.SortFunc(open, oldest)
	return append(closed, open...)
}

// The writer appends a mark, a record of what List shows of the session
// (cwd, title, closed and the time of the last record), after a batch
// once markEvery bytes were written since the last one, and at the end
// of a compacted file: so a file's last mark is less than markEvery bytes
// from its end, and the index reads a file's header and what follows its
// last mark, never the whole file (readInfo). A file without a mark (a
// small one, or an older build's) is read whole.
const (
	markEvery = 16 << 10
	tailBlock = 32 << 10 // what readInfo reads at once, backwards, to find the last mark
)

// markStart is how a mark's line starts, newline before it included: a
// newline in a line of JSON is escaped, so this is only found at a line's
// start.
var markStart = []byte("\n{\"t\":\"mark\",")

// source is a file as the index reads it.
type source interface {
	io.ReaderAt
	io.Closer
}

func openSource(path string) (source, error) { return os.Open(path) }

// readInfo reads what List shows of session id's file at path, of size
// bytes: its header, and its lines from the last mark on.
func readInfo(open func(string) (source, error), path, id string, size int64) (Info, error) {
	f, err := open(path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close() // Best effort: read only.
	p := newParsed(id, size, 0, keepSizes)
	start, err := p.header(f)
	if err != nil {
		return Info{}, corrupt(path, size, err)
	}
	from, err := lastMark(f, start, size)
	if err != nil {
		return Info{}, err
	}
	if err := p.lines(f, from); err != nil {
		return Info{}, corrupt(path, size, err)
	}
	return p.info, nil
}

// lastMark returns where the last mark of r after start (where the
// header's line ends) begins, or start if there is none.
func lastMark(r io.ReaderAt, start, end int64) (int64, error) {
	buf := make([]byte, tailBlock)
	for end > start {
		lo := max(start-1, end-tailBlock) // start-1: the header's newline
		n, err := r.ReadAt(buf[:end-lo], lo)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndex(buf[:n], markStart); i >= 0 {
			return lo + int64(i) + 1, nil
		}
		if lo == start-1 {
			break
		}
		end = lo + int64(len(markStart)) - 1 // a mark across the blocks' border
	}
	return start, nil
}
