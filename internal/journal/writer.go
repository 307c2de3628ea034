package journal

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"time"

	"shellagent/acp"
)

type opKind uint8

// The kinds of queued records. opBarrier and opDelete answer on done.
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
	opSync
	opClosed
	opBarrier
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
	done           chan error
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
	failing   bool                 // the last write or fsync failed (logged once)
}

// file returns the writer's state of the file p read.
func (p *parsed) file(id string) *file {
	f := &file{id: id, valid: p.valid, size: p.info.Size, terms: make(map[string]*outBytes, len(p.terms)),
		itemLen: p.itemLen, deadItems: p.deadItems}
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

// writer is the Store's one goroutine: it writes what is queued, in
// batches, until Close.
func (s *Store) writer() {
	defer close(s.done)
	timer := time.NewTimer(syncEvery)
	timer.Stop()
	armed := false
	for {
		fired := false
		select {
		case <-s.wake:
		case <-timer.C:
			armed, fired = false, true
		}
		if h := s.opts.hooks; h != nil && h.batch != nil {
			h.batch()
		}
		s.mu.Lock()
		batch, closing := s.queue, s.closing
		s.queue = nil
		s.mu.Unlock()

		touched, barrier := s.apply(batch)
		if fired || closing {
			// A second after output, or the last chance: read every
			// terminal's output (barriers read it in apply).
			touched = s.pullAll(touched)
		}
		s.write(touched, fired || closing || barrier)
		s.release(batch, touched)
		for _, f := range touched {
			s.maybeCompact(f)
		}
		s.prune()
		for i := range batch {
			switch o := &batch[i]; o.kind {
			case opBarrier:
				o.done <- nil
			case opRefresh:
				o.done <- s.rescan()
			}
		}
		if closing {
			for _, f := range s.files {
				s.closeFile(f)
			}
			timer.Stop()
			return
		}
		if !armed && (s.unsynced() || s.flowing()) {
			timer.Reset(syncEvery)
			armed = true
		}
	}
}

// unsynced reports whether a file was written since its last fsync.
func (s *Store) unsynced() bool {
	for _, f := range s.files {
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
func (s *Store) apply(batch []op) (touched []*file, barrier bool) {
	for i := range batch {
		o := &batch[i]
		switch o.kind {
		case opBarrier, opRefresh:
			barrier = true
			touched = s.pullAll(touched)
			continue
		case opDelete:
			o.done <- s.remove(o.id)
			touched = slices.DeleteFunc(touched, func(f *file) bool { return f.id == o.id })
			continue
		case opCreate:
			s.create(o)
		}
		f := s.files[o.id]
		if f == nil {
			continue // deleted or pruned meanwhile
		}
		touched = touch(touched, f)
		switch o.kind {
		case opAttach:
			s.attach(f, o.term, o.tap)
			continue
		case opExit:
			if t := f.taps[o.term]; t != nil {
				s.pull(f, o.term, t) // all that it wrote before its exit
			}
		case opSync, opClosed:
			s.pullFile(f)
		case opForget:
			delete(f.taps, o.item)
		}
		f.pend = s.encode(f, o)
	}
	return touched, barrier
}

// create starts a new file for o's session, replacing any.
func (s *Store) create(o *op) {
	if old := s.files[o.id]; old != nil {
		s.closeFile(old)
	}
	f := &file{id: o.id, terms: make(map[string]*outBytes), itemLen: make(map[string]int)}
	fd, err := os.OpenFile(s.path(o.id), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		s.log.Warn("history: cannot create a session file", "session", o.id, "err", err)
		f.failing = true
	}
	f.f, f.valid = fd, -1
	s.files[o.id] = f
}

// encode appends o's line to f.pend and notes what it changes.
func (s *Store) encode(f *file, o *op) []byte {
	b := f.pend
	r := record{At: o.at.UTC().Truncate(time.Millisecond)}
	switch o.kind {
	case opCreate:
		b = appendRecord(b, &record{T: "session", V: version, ID: o.id, At: r.At})
		r.T, r.Cwd, r.Title = "meta", o.meta.Cwd, o.meta.Title
	case opMeta:
		r.T, r.Cwd, r.Title = "meta", o.meta.Cwd, o.meta.Title
	case opOpen:
		r.T = "open"
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
		f.durable, f.closeFd = true, true
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

// appendRecord appends r's line to b.
func appendRecord(b []byte, r *record) []byte {
	j, err := json.Marshal(r)
	if err != nil {
		panic("journal: encoding a record: " + err.Error()) // only RawMessage can fail, and it comes from json.Marshal
	}
	return append(append(b, j...), '\n')
}

// appendOut appends an out record's line to b, without encoding/json's
// copies.
func appendOut(b []byte, at time.Time, term string, d []byte) []byte {
	b = append(b, `{"t":"out","at":"`...)
	b = at.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","term":`...)
	b = strconv.AppendQuote(b, term)
	b = append(b, `,"d":"`...)
	b = base64.StdEncoding.AppendEncode(b, d)
	return append(b, "\"}\n"...)
}

// parseOut reads line as appendOut wrote it into rec, without
// encoding/json's passes over the data: rec.D is the quoted base64 in
// line. It reports false, leaving rec alone, for any line that is not
// exactly such a line (then encoding/json reads it).
func parseOut(line []byte, rec *record) bool {
	rest, ok := bytes.CutPrefix(line, []byte(`{"t":"out","at":"`))
	if !ok {
		return false
	}
	at, rest, ok := bytes.Cut(rest, []byte(`","term":"`))
	if !ok {
		return false
	}
	term, rest, ok := bytes.Cut(rest, []byte(`","d":`))
	if !ok || bytes.IndexByte(term, '\\') >= 0 {
		return false
	}
	d, ok := bytes.CutSuffix(rest, []byte("}\n"))
	if !ok || len(d) < 2 || d[0] != '"' || d[len(d)-1] != '"' || bytes.ContainsAny(d[1:len(d)-1], `"\\`) {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, string(at))
	if err != nil {
		return false
	}
	*rec = record{T: "out", At: t, Term: string(term), D: d}
	return true
}

// write writes each touched file's pending lines, and fsyncs the files
// at a durable point, or every unsynced file with all.
func (s *Store) write(touched []*file, all bool) {
	for _, f := range touched {
		s.writePend(f)
	}
	for _, f := range s.files {
		if f.f != nil && f.unsynced && (f.durable || all) {
			err := f.f.Sync()
			s.syncs.Add(1)
			f.unsynced = false
			s.report(f, "fsync", err)
		}
		f.durable = false
		if f.closeFd {
			f.closeFd = false
			s.closeFile(f)
		}
	}
}

// writePend writes f's pending lines.
func (s *Store) writePend(f *file) {
	if len(f.pend) == 0 {
		return
	}
	err := s.openFile(f)
	if err == nil {
		var n int
		n, err = f.f.Write(f.pend)
		f.size += int64(n)
		f.unsynced = true
	}
	s.report(f, "write", err)
	if cap(f.pend) > 2*pendMax {
		f.pend = nil
	} else {
		f.pend = f.pend[:0]
	}
}

// pendMax is how many bytes of pending lines reading output gathers
// before it writes them: a file's pending lines stay within about
// twice it, and grow no more than once, however much output is read.
const pendMax = 256 << 10

// report logs a failure of f, once until it works again.
func (s *Store) report(f *file, what string, err error) {
	if err != nil && !f.failing {
		s.log.Warn("history: cannot "+what+" a session file", "session", f.id, "err", err)
	}
	f.failing = err != nil
}

// openFile opens f to append, first cutting off a torn last line.
func (s *Store) openFile(f *file) error {
	if f.f != nil {
		return nil
	}
	fd, err := os.OpenFile(s.path(f.id), os.O_WRONLY|os.O_APPEND, 0)
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
func (s *Store) closeFile(f *file) {
	if f.f == nil {
		return
	}
	if f.unsynced {
		s.report(f, "fsync", f.f.Sync())
		s.syncs.Add(1)
		f.unsynced = false
	}
	s.report(f, "close", f.f.Close())
	f.f = nil
}

// release gives back the queue's room the batch held, and updates the
// index's sizes and, for the output it read, times.
func (s *Store) release(batch []op, touched []*file) {
	var ctl int
	for i := range batch {
		ctl += batch[i].cost()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctlBytes -= ctl
	s.room.Broadcast()
	for _, f := range touched {
		s.setSize(f)
		if e := s.index[f.id]; e != nil && f.pulledAt.After(e.info.UpdatedAt) {
			e.info.UpdatedAt = f.pulledAt
		}
		f.pulledAt = time.Time{}
	}
}

// setSize records f's size in the index; s.mu is held.
func (s *Store) setSize(f *file) {
	if e := s.index[f.id]; e != nil {
		s.total += f.size - e.info.Size
		e.info.Size = f.size
	}
}

// remove removes session id's file for good.
func (s *Store) remove(id string) error {
	if f := s.files[id]; f != nil {
		f.unsynced = false // nothing to keep
		s.closeFile(f)
		delete(s.files, id)
	}
	err := os.Remove(s.path(id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete history of session %s: %w", id, err)
	}
	return s.syncDir()
}

// syncDir fsyncs the sessions directory, so that a rename or a removal
// in it is durable.
func (s *Store) syncDir() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close() // Best effort: read only.
	return d.Sync()
}

// maybeCompact compacts f once what it no longer needs is at least
// CompactAt bytes and half of it.
func (s *Store) maybeCompact(f *file) {
	dead := f.deadItems
	for _, t := range f.terms {
		dead += t.dead(s.opts.Scrollback)
	}
	if dead < s.opts.CompactAt || dead*2 < f.size {
		return
	}
	if err := s.compact(f); err != nil {
		s.log.Warn("history: cannot compact a session file", "session", f.id, "err", err)
	}
}

// compact rewrites f as Load reads it: into a temporary file beside it,
// fsynced, renamed over it, and the directory fsynced.
func (s *Store) compact(f *file) error {
	path := s.path(f.id)
	p, err := readFile(path, f.id, s.opts.Scrollback, true)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, "."+f.id+".*.tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(p.encode(f.id))
	err = errors.Join(err, tmp.Sync(), tmp.Close())
	if h := s.opts.hooks; err == nil && h != nil && h.beforeRename != nil {
		err = h.beforeRename(tmp.Name())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name()) // Best effort: the old file is whole.
		return err
	}
	s.syncs.Add(1)
	if err := s.syncDir(); err != nil {
		return err
	}
	np, err := readFile(path, f.id, s.opts.Scrollback, false)
	if err != nil {
		return err
	}
	f.unsynced = false
	s.closeFile(f)
	nf := np.file(f.id)
	nf.taps, nf.pend = f.taps, f.pend[:0]
	s.files[f.id] = nf
	s.mu.Lock()
	s.setSize(nf)
	s.mu.Unlock()
	return nil
}

// encode returns what p read as a file of its own: the lines that Load
// needs and nothing else.
func (p *parsed) encode(id string) []byte {
	// Sized once: a flood's scrollback is most of it.
	size := 1 << 10
	for _, it := range p.items {
		size += len(it.Update) + 128
	}
	for _, t := range p.terms {
		size += base64.StdEncoding.EncodedLen(len(t.data)) + (len(t.data)/maxChunk+3)*128
	}
	b := make([]byte, 0, size)
	b = appendRecord(b, &record{T: "session", V: version, ID: id, At: p.created})
	b = appendRecord(b, &record{T: "meta", At: p.info.UpdatedAt, Cwd: p.info.Cwd, Title: p.info.Title})
	for _, it := range p.updates() {
		b = appendRecord(b, &record{T: "update", At: it.At, Item: it.Item, U: it.Update})
	}
	for _, id := range p.termOrder {
		t := p.terms[id]
		if gap := t.written - int64(len(t.data)); gap > 0 {
			b = appendRecord(b, &record{T: "gap", At: p.created, Term: id, N: gap})
		}
		for d := t.data; len(d) > 0; {
			n := min(len(d), maxChunk)
			b = appendOut(b, p.created, id, d[:n])
			d = d[n:]
		}
		if t.exit != nil {
			b = appendRecord(b, &record{T: "exit", At: p.created, Term: id, Status: t.exit})
		}
	}
	for _, pr := range p.prompts {
		b = appendRecord(b, &record{T: "prompt", At: pr.At, Key: pr.Key, MessageID: pr.MessageID})
	}
	if p.info.Closed {
		b = appendRecord(b, &record{T: "closed", At: p.info.UpdatedAt})
	}
	return b
}

// prune removes the least recently updated closed sessions that are not
// live here until the history is within Max.
func (s *Store) prune() {
	s.mu.Lock()
	if s.total <= s.opts.Max {
		s.mu.Unlock()
		return
	}
	var cands []Info
	for _, e := range s.index {
		if e.info.Closed && !e.live {
			cands = append(cands, e.info)
		}
	}
	slices.SortFunc(cands, func(a, b Info) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
	var gone []string
	for _, c := range cands {
		if s.total <= s.opts.Max {
			break
		}
		delete(s.index, c.ID)
		s.total -= c.Size
		gone = append(gone, c.ID)
	}
	s.mu.Unlock()
	for _, c := range cands[:len(gone)] {
		if fi, err := os.Stat(s.path(c.ID)); err == nil && fi.Size() != c.Size {
			// Another process wrote to it since: it may have made it live.
			s.mu.Lock()
			s.index[c.ID] = &entry{info: c, keys: make(map[string]string)}
			s.total += c.Size
			s.mu.Unlock()
			s.rescanOne(c.ID, fi.Size())
			gone = slices.DeleteFunc(gone, func(id string) bool { return id == c.ID })
		}
	}
	for _, id := range gone {
		if err := s.remove(id); err != nil {
			s.log.Warn("history: cannot prune a session", "session", id, "err", err)
		} else {
			s.log.Info("history: pruned the oldest closed session", "session", id, "max", s.opts.Max)
		}
	}
}

// rescan reads again what changed in the directory since the Store read
// it: files of other processes' sessions, new, grown or removed. The
// sessions live here are the Store's own, and left alone.
func (s *Store) rescan() error {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("read history %s: %w", s.dir, err)
	}
	seen := make(map[string]bool, len(des))
	for _, de := range des {
		id, ok := idOf(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		seen[id] = true
		fi, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		s.rescanOne(id, fi.Size())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.index {
		if !seen[id] && !e.live {
			delete(s.index, id)
			s.total -= e.info.Size
			delete(s.files, id)
		}
	}
	return nil
}

// rescanOne reads session id's file again unless it is live here or
// its size is what the Store knows.
func (s *Store) rescanOne(id string, size int64) {
	s.mu.Lock()
	e := s.index[id]
	was, logged := s.skipped[id]
	skip := e != nil && (e.live || e.info.Size == size) || e == nil && logged && was == size
	s.mu.Unlock()
	if skip {
		return
	}
	p, err := readFile(s.path(id), id, s.opts.Scrollback, false)
	if err != nil {
		s.skip(id, size, err)
		return
	}
	if f := s.files[id]; f != nil {
		f.unsynced = false
		s.closeFile(f)
	}
	s.files[id] = p.file(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.index[id]; cur != nil && cur.live { // made live meanwhile: the Store's own now
		s.total += p.info.Size - cur.info.Size
		cur.info.Size = p.info.Size
		return
	}
	if e := s.index[id]; e != nil {
		s.total -= e.info.Size
	}
	s.index[id] = &entry{info: p.info, keys: p.keyMap()}
	s.total += p.info.Size
	delete(s.skipped, id)
}

// skip logs a file it cannot read, once for each size it has.
func (s *Store) skip(id string, size int64, err error) {
	s.mu.Lock()
	was, ok := s.skipped[id]
	logged := ok && was == size
	s.skipped[id] = size
	if e := s.index[id]; e != nil && !e.live {
		delete(s.index, id)
		s.total -= e.info.Size
	}
	s.mu.Unlock()
	if !logged {
		s.log.Warn("history: skipping a session file", "file", id+".jsonl", "err", err)
	}
}
