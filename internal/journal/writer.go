package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"shellagent/acp"
)

type opKind uint8

// The kinds of queued records. opCreate, opBarrier, opWritten,
// opHandover and opDelete answer on done, and so do opIDs, opPrompt,
// opExit and opConfig when they carry one (once written, before the
// fsync: write).
const (
	opCreate opKind = iota
	opOpen
	opMeta
	opUpdate
	opOut
	opGap
	opExit
	opPrompt
	opForget
	opConfig
	opIDs // Store.Reserve
	opSync
	opClosed
	opBarrier
	opWritten  // a barrier without the fsync (Store.Written)
	opHandover // opWritten, and what the writer knows of each live file (Store.Handover)
	opRefresh
	opDelete
	opAttach
)

// op is a queued record.
type op struct {
	kind           opKind
	id, term, item string
	key, msgID     string
	at             time.Time
	data           []byte // output, or an update's JSON
	n              int64  // a gap's bytes
	meta           Meta
	status         acp.ExitStatus
	tap            *Tap
	ids            map[string]int // opIDs
	done           chan error
	parsed         *parsed            // opOpen: the file as Reopen read it
	handed         map[string]*Handed // opHandover: filled before done
}

// cost is what o counts in the queue's bound.
func (o *op) cost() int { return len(o.data) + opCost }

// file is a session file as the writer keeps it.
type file struct {
	id        string
	f         *os.File // nil until written, and after a close
	valid     int64    // before f is first opened: where its whole lines end; else -1
	size      int64
	pend      []byte               // lines to write at the end of the batch
	terms     map[string]*outBytes // the output in the file, by terminal
	taps      map[string]*Tap      // the terminals whose output the writer reads (tap.go)
	pulledAt  time.Time            // when it last read output, if since the last release
	itemLen   map[string]int       // bytes of each item's last line
	deadItems int64                // bytes of items' earlier lines
	unsynced  bool                 // written since the last fsync
	durable   bool                 // fsync at the end of the batch
	closeFd   bool                 // close f at the end of the batch (closed)
	failing   bool                 // the last fsync or close failed (logged once)
	dropping  bool                 // a write failed: lines are dropped until resync reads the file again
	writes    retry                // the run of failed writes
	compacts  retry                // the run of failed compactions

	// What the file's next mark says, and the bytes since its last one.
	cwd, title string
	closed     bool
	last       time.Time // the latest record's time
	sinceMark  int64
}

// file returns the writer's state of the file p read.
func (p *parsed) file(id string) *file {
	f := &file{id: id, valid: p.valid, size: p.info.Size, terms: make(map[string]*outBytes, len(p.terms)),
		itemLen: p.itemLen, deadItems: p.deadItems,
		cwd: p.info.Cwd, title: p.info.Title, closed: p.info.Closed, last: p.info.UpdatedAt,
		sinceMark: markEvery} // not known: a mark with the next write
	for k, t := range p.terms {
		f.terms[k] = &outBytes{data: t.inFile, lines: t.lines, written: t.written}
	}
	return f
}

// outBytes is a terminal's output in a file.
type outBytes struct {
	data    int64 // bytes of output
	lines   int64 // bytes of the lines that hold them
	written int64 // bytes of output and gaps: the offset of the next byte
}

// dead estimates the bytes of lines that hold output beyond scroll.
func (o *outBytes) dead(scroll int) int64 {
	if o.data <= int64(scroll) {
		return 0
	}
	return o.lines * (o.data - int64(scroll)) / o.data
}

// A writer is the Store's one goroutine and what it owns: it writes
// what is queued, in batches, until Close; it creates, compacts, prunes
// and removes the files, and reads them for the index (at Open, and at
// each Refresh).
type writer struct {
	s      *Store
	x      *index // s.idx, under s.mu
	opts   Options
	log    *slog.Logger
	open   func(string) (source, error) // how the index opens a file
	settle time.Duration                // pruneSettle
	opened time.Time
	clock  func() time.Time // the clock of its retries (time.Now)

	files map[string]*file // the files written to, by session: read when first written to
	out   outReader        // reads the terminals' output (tap.go)

	syncs atomic.Int64 // fsyncs done, for tests
}

func newWriter(s *Store) *writer {
	w := &writer{s: s, x: &s.idx, opts: s.opts, log: s.log, open: openSource, settle: pruneSettle,
		opened: time.Now(), files: make(map[string]*file)}
	w.out.w = w
	if h := s.opts.hooks; h != nil && h.open != nil {
		w.open = h.open
	}
	if h := s.opts.hooks; h != nil && h.settle != nil {
		w.settle = *h.settle
	}
	w.clock = time.Now
	if h := s.opts.hooks; h != nil && h.now != nil {
		w.clock = h.now
	}
	return w
}

// run writes what is queued, in batches, until Close.
func (w *writer) run() {
	defer close(w.s.done)
	timer := time.NewTimer(syncEvery)
	timer.Stop()
	armed := false
	for {
		fired := false
		select {
		case <-w.s.wake:
		case <-timer.C:
			armed, fired = false, true
		}
		if h := w.opts.hooks; h != nil && h.batch != nil {
			h.batch()
		}
		w.s.mu.Lock()
		batch, closing := w.s.queue, w.s.closing
		w.s.queue = nil
		w.s.mu.Unlock()

		w.resyncDue()
		touched, barrier := w.apply(batch)
		if fired || closing {
			// A second after output, or the last chance: read every
			// terminal's output (barriers read it in apply).
			touched = w.out.pullAll(touched)
		}
		w.write(touched, fired || closing || barrier, batch)
		w.release(batch, touched)
		for _, f := range touched {
			w.maybeCompact(f)
		}
		w.prune()
		for i := range batch {
			switch o := &batch[i]; o.kind {
			case opBarrier, opWritten:
				o.done <- nil
			case opHandover:
				o.done <- w.handOver(o.handed)
			case opRefresh:
				o.done <- w.rescan(false)
			}
		}
		if closing {
			for _, f := range w.files {
				w.closeFile(f)
			}
			w.s.mu.Lock()
			for id, l := range w.x.locks {
				l.Close() // Best effort: closing drops the lock.
				delete(w.x.locks, id)
			}
			w.s.mu.Unlock()
			timer.Stop()
			return
		}
		if !armed && (w.unsynced() || w.out.flowing()) {
			timer.Reset(syncEvery)
			armed = true
		}
	}
}

// unsynced reports whether a file was written since its last fsync.
func (w *writer) unsynced() bool {
	for _, f := range w.files {
		if f.unsynced {
			return true
		}
	}
	return false
}

// apply encodes a batch into its files' pending lines, and does its
// creates and deletes; the output of a terminal is read (pull) where a
// record needs it first: before its exit, at a durable point of its
// session, at a barrier. It returns the files it touched and whether
// the batch holds a barrier.
func (w *writer) apply(batch []op) (touched []*file, barrier bool) {
	for i := range batch {
		o := &batch[i]
		switch o.kind {
		case opBarrier, opRefresh:
			barrier = true
			touched = w.out.pullAll(touched)
			continue
		case opWritten, opHandover:
			touched = w.out.pullAll(touched) // written, not fsynced
			continue
		case opDelete:
			o.done <- w.remove(o.id)
			touched = slices.DeleteFunc(touched, func(f *file) bool { return f.id == o.id })
			continue
		case opCreate:
			w.create(o)
		}
		f := w.fileFor(o.id, o.parsed)
		if f == nil {
			continue // deleted or pruned meanwhile
		}
		touched = touch(touched, f)
		switch o.kind {
		case opAttach:
			w.out.attach(f, o.term, o.tap)
			continue
		case opExit:
			if t := f.taps[o.term]; t != nil {
				w.out.pull(f, o.term, t) // all that it wrote before its exit
			}
		case opSync, opClosed:
			w.out.pullFile(f)
		case opForget:
			delete(f.taps, o.item)
		}
		f.pend = w.encode(f, o)
	}
	return touched, barrier
}

// fileFor returns the writer's state of session id's file, reading the
// file the first time it is written to (or taking p, what Reopen read);
// nil if the index no longer has the session.
func (w *writer) fileFor(id string, p *parsed) *file {
	f := w.files[id]
	var taps map[string]*Tap // the terminals it reads go on
	if f != nil && p != nil && f.size != p.info.Size {
		// Written since Reopen read it, or by another process before:
		// what either knows is not all of it.
		f.unsynced = false
		w.closeFile(f)
		taps, f, p = f.taps, nil, nil
	}
	if f != nil {
		return f
	}
	w.s.mu.Lock()
	e := w.x.entries[id]
	w.s.mu.Unlock()
	if e == nil {
		return nil // deleted or pruned meanwhile
	}
	if p == nil {
		var err error
		if p, err = readFile(w.x.path(id), id, w.opts.Scrollback, keepSizes); err != nil {
			w.log.Warn("history: cannot read a session file to write to it", "session", id, "err", err)
			return nil
		}
	}
	f = p.file(id)
	f.taps = taps
	w.files[id] = f
	return f
}

// create starts a new file for o's session, replacing any that is not
// live in another process.
func (w *writer) create(o *op) {
	if old := w.files[o.id]; old != nil {
		w.closeFile(old)
	}
	delete(w.files, o.id)
	f := &file{id: o.id, terms: make(map[string]*outBytes), itemLen: make(map[string]int), valid: -1}
	if err := w.createFile(f, o); err != nil {
		// The session keeps no history: its appends are ignored from
		// now on, and never go to another process's file of the id.
		w.log.Warn("history: cannot create a session file; the session keeps no history", "session", o.id, "err", err)
		w.s.mu.Lock()
		if e := w.x.entries[o.id]; e != nil && e.live {
			w.x.total -= e.info.Size
			delete(w.x.entries, o.id)
		}
		w.s.mu.Unlock()
		o.done <- err
		return
	}
	w.files[o.id] = f
	o.done <- nil
}

// createFile makes f's file, locked, with its header and its meta line
// (cwd, title): written to a temporary file beside it, fsynced and
// renamed, so that no process sees a session file without them.
func (w *writer) createFile(f *file, o *op) (err error) {
	path := w.x.path(o.id)
	w.s.mu.Lock()
	old := w.x.locks[o.id]
	delete(w.x.locks, o.id)
	w.s.mu.Unlock()
	if old == nil {
		if old, err = lockFile(path); err != nil && !notExist(err) {
			return err // ErrLive: another process's, not to be replaced
		}
	}
	if old != nil {
		defer old.Close() // Best effort: closing drops the old file's lock.
	}
	tmp, err := os.CreateTemp(w.x.dir, "."+o.id+".*.tmp")
	if err != nil {
		return err
	}
	at := o.at.UTC().Truncate(time.Millisecond)
	hdr := appendRecord(nil, &record{T: "session", V: version, ID: o.id, At: at})
	// The meta line goes in with the header: a file without its cwd
	// cannot be resumed, and the agent can die right after the rename.
	hdr = appendRecord(hdr, &record{T: "meta", At: at, Cwd: o.meta.Cwd, Title: o.meta.Title})
	err = lockNew(tmp)
	if err == nil {
		_, err = tmp.Write(hdr)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		tmp.Close()           // Best effort: the error that matters is the one above.
		os.Remove(tmp.Name()) // Best effort: ignored at the next Open.
		return err
	}
	f.size, f.valid = int64(len(hdr)), int64(len(hdr)) // whole lines, not opened yet
	w.s.mu.Lock()
	w.x.locks[o.id] = tmp
	w.s.mu.Unlock()
	return w.syncDir()
}

// encode appends o's line to f.pend and notes what it changes.
func (w *writer) encode(f *file, o *op) []byte {
	b := f.pend
	r := record{At: o.at.UTC().Truncate(time.Millisecond)}
	if o.at.After(f.last) {
		f.last = o.at
	}
	switch o.kind {
	case opCreate: // createFile wrote the header and this meta line
		f.cwd, f.title = o.meta.Cwd, o.meta.Title
		return b
	case opMeta:
		r.T, r.Cwd, r.Title = "meta", o.meta.Cwd, o.meta.Title
		f.cwd, f.title = o.meta.Cwd, o.meta.Title
	case opOpen:
		r.T = "open"
		f.closed = false
		f.durable = true // what an earlier image wrote and did not fsync (Store.Written) is, now
	case opConfig: // key and msgID carry the option and its value
		r.T, r.Option, r.Value = "config", o.key, &o.msgID
	case opIDs:
		r.T, r.IDs = "ids", o.ids
	case opUpdate:
		r.T, r.Item, r.U = "update", o.item, o.data
	case opOut:
		t := f.term(o.term)
		n := len(b)
		b = appendOut(b, r.At, o.term, o.data)
		t.data += int64(len(o.data))
		t.written += int64(len(o.data))
		t.lines += int64(len(b) - n)
		return b
	case opGap:
		r.T, r.Term, r.N = "gap", o.term, o.n
		f.term(o.term).written += o.n
	case opExit:
		r.T, r.Term, r.Status = "exit", o.term, &o.status
		f.durable = true
	case opPrompt:
		r.T, r.Key, r.MessageID = "prompt", o.key, o.msgID
	case opForget:
		r.T, r.Item = "forget", o.item
		f.deadItems += int64(f.itemLen[o.item])
		if t := f.terms[o.item]; t != nil {
			f.deadItems += t.lines
		}
		delete(f.itemLen, o.item)
		delete(f.terms, o.item)
	case opSync:
		f.durable = true
		return b // a durable point writes nothing
	case opClosed:
		r.T = "closed"
		f.durable, f.closeFd, f.closed = true, true, true
		clear(f.taps) // read: a closed session's terminals are gone
	}
	n := len(b)
	b = appendRecord(b, &r)
	if o.kind == opUpdate && o.item != "" {
		f.deadItems += int64(f.itemLen[o.item])
		f.itemLen[o.item] = len(b) - n
	}
	return b
}

// term returns the output in f of terminal id, new if it has none.
func (f *file) term(id string) *outBytes {
	t := f.terms[id]
	if t == nil {
		t = &outBytes{}
		f.terms[id] = t
	}
	return t
}

// write writes each touched file's pending lines, and fsyncs the files
// at a durable point, or every unsynced file with all.
func (w *writer) write(touched []*file, all bool, batch []op) {
	for _, f := range touched {
		w.writePend(f)
	}
	for i := range batch {
		switch o := &batch[i]; o.kind {
		case opIDs, opPrompt, opExit, opConfig:
			if o.done != nil {
				o.done <- nil // written, or its file gone; the fsync follows
			}
		}
	}
	w.s.stalled.Store(false)
	for _, f := range w.files {
		if f.f != nil && f.unsynced && (f.durable || all) {
			err := f.f.Sync()
			w.syncs.Add(1)
			f.unsynced = false
			w.report(f, "fsync", err)
		}
		f.durable = false
		if f.closeFd {
			f.closeFd = false
			w.closeFile(f)
			w.s.mu.Lock()
			w.x.release(f.id) // unless it was made live again meanwhile
			w.s.mu.Unlock()
		}
	}
}

// mark returns f's mark: what List shows of its session.
func (f *file) mark() *record {
	return &record{T: "mark", At: f.last.UTC().Truncate(time.Millisecond), Cwd: f.cwd, Title: f.title, Closed: f.closed}
}

// writePend writes f's pending lines, with a mark after them once
// markEvery bytes were written since the last.
func (w *writer) writePend(f *file) {
	if len(f.pend) == 0 {
		return
	}
	if f.sinceMark += int64(len(f.pend)); f.sinceMark >= markEvery {
		f.pend = appendRecord(f.pend, f.mark())
		f.sinceMark = 0
	}
	if !f.dropping {
		w.writeOut(f)
	}
	if cap(f.pend) > 2*pendMax {
		f.pend = nil
	} else {
		f.pend = f.pend[:0]
	}
}

// writeOut writes f's pending lines to its file. If that fails (a full
// disk), it cuts off what part of them was written, so that the file
// ends with a whole line, and the file drops what it is given until
// resync reads it again.
func (w *writer) writeOut(f *file) {
	before := f.size
	err := w.openFile(f)
	if err == nil {
		var n int
		if h := w.opts.hooks; h != nil && h.write != nil {
			n, err = h.write(f.f, f.pend)
		} else {
			n, err = f.f.Write(f.pend)
		}
		f.size += int64(n)
		f.unsynced = true
	}
	if err == nil {
		f.writes.ok(w.log, f.id, "writing")
		return
	}
	f.writes.fail(w.log, f.id, "write", w.clock(), err)
	f.dropping = true
	if f.f == nil || f.size == before {
		return
	}
	if f.f.Truncate(before) == nil {
		f.size = before
		return
	}
	// The torn line stays until resync reads the file again, and the
	// write after it cuts it off: closed now, nothing goes after it.
	f.unsynced = false
	w.closeFile(f)
}

// resyncDue reads again each file that dropped lines after a failed
// write and whose next try is due, so that what the writer knows of it
// is what it holds: the records of the batches it dropped are lost, and
// each terminal's output goes on from what the file holds, the bytes
// its source no longer holds recorded as a gap.
func (w *writer) resyncDue() {
	now := w.clock()
	for id, f := range w.files {
		if !f.dropping || !f.writes.Due(now) {
			continue
		}
		f.unsynced = false
		w.closeFile(f)
		p, err := readFile(w.x.path(id), id, w.opts.Scrollback, keepSizes)
		if err != nil {
			f.writes.fail(w.log, id, "read", w.clock(), err)
			continue
		}
		nf := p.file(id)
		nf.writes, nf.compacts = f.writes, f.compacts
		w.files[id] = nf
		for term, t := range f.taps {
			w.out.attach(nf, term, t)
		}
	}
}

// pendMax is how many bytes of pending lines reading output gathers
// before it writes them: a file's pending lines stay within about
// twice it, and grow no more than once, however much output is read.
const pendMax = 256 << 10

// report logs a failure of f, once until it works again.
func (w *writer) report(f *file, what string, err error) {
	if err != nil && !f.failing {
		w.log.Warn("history: cannot "+what+" a session file", "session", f.id, "err", err)
	}
	f.failing = err != nil
}

// openFile opens f to append, first cutting off a torn last line.
func (w *writer) openFile(f *file) error {
	if f.f != nil {
		return nil
	}
	fd, err := os.OpenFile(w.x.path(f.id), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if f.valid >= 0 && f.size > f.valid {
		if err := fd.Truncate(f.valid); err != nil {
			fd.Close() // Best effort: the error that matters is Truncate's.
			return err
		}
		f.size = f.valid
	}
	f.f, f.valid = fd, -1
	return nil
}

// closeFile closes f's descriptor, fsyncing what it has not.
func (w *writer) closeFile(f *file) {
	if f.f == nil {
		return
	}
	if f.unsynced {
		w.report(f, "fsync", f.f.Sync())
		w.syncs.Add(1)
		f.unsynced = false
	}
	w.report(f, "close", f.f.Close())
	f.f = nil
}

// release gives back the queue's room the batch held, and updates the
// index's sizes and, for the output it read, times.
func (w *writer) release(batch []op, touched []*file) {
	var ctl int
	for i := range batch {
		ctl += batch[i].cost()
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.ctlBytes -= ctl
	w.s.room.Broadcast()
	for _, f := range touched {
		w.x.setSize(f.id, f.size)
		if e := w.x.entries[f.id]; e != nil && f.pulledAt.After(e.info.UpdatedAt) {
			e.info.UpdatedAt = f.pulledAt
		}
		f.pulledAt = time.Time{}
	}
}

// remove removes session id's file for good, unless another process
// has the session live (ErrLive).
func (w *writer) remove(id string) error {
	if err := removeAside(w.s, id); err != nil {
		return err
	}
	w.s.mu.Lock()
	l := w.x.locks[id]
	delete(w.x.locks, id)
	w.s.mu.Unlock()
	if l == nil {
		var err error
		switch l, err = lockFile(w.x.path(id)); {
		case notExist(err):
			return nil
		case err != nil:
			return fmt.Errorf("delete history of session %s: %w", id, err)
		}
	}
	defer l.Close() // Best effort: closing drops the lock, once the file is gone.
	if f := w.files[id]; f != nil {
		f.unsynced = false // nothing to keep
		w.closeFile(f)
		delete(w.files, id)
	}
	err := os.Remove(w.x.path(id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete history of session %s: %w", id, err)
	}
	return w.syncDir()
}

// syncDir fsyncs the sessions directory, so that a rename or a removal
// in it is durable.
func (w *writer) syncDir() error { return syncDir(w.x.dir) }

// syncDir fsyncs directory dir.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close() // Best effort: read only.
	return d.Sync()
}
