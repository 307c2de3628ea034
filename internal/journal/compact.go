package journal

import (
	"bufio"
	"errors"
	"maps"
	"os"
	"slices"
)

// maybeCompact compacts f once what it no longer needs is at least
// CompactAt bytes and half of it.
func (w *writer) maybeCompact(f *file) {
	dead := f.deadItems
	for _, t := range f.terms {
		dead += t.dead(w.opts.Scrollback)
	}
	if dead < w.opts.CompactAt || dead*2 < f.size {
		return
	}
	if err := w.compact(f); err != nil {
		w.log.Warn("history: cannot compact a session file", "session", f.id, "err", err)
	}
}

// compact rewrites f as Load reads it: into a temporary file beside it,
// fsynced, renamed over it, and the directory fsynced.
func (w *writer) compact(f *file) error {
	path := w.x.path(f.id)
	p, err := readFile(path, f.id, w.opts.Scrollback, true)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(w.x.dir, "."+f.id+".*.tmp")
	if err != nil {
		return err
	}
	// Locked before it is renamed: a process that opens the new file
	// finds it held as the old one was.
	err = lockNew(tmp)
	if err == nil {
		err = p.encode(bufio.NewWriterSize(tmp, encodeBuffer), f.id)
	}
	err = errors.Join(err, tmp.Sync())
	if h := w.opts.hooks; err == nil && h != nil && h.beforeRename != nil {
		err = h.beforeRename(tmp.Name())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		tmp.Close()           // Best effort: the old file is whole.
		os.Remove(tmp.Name()) // Best effort: the old file is whole.
		return err
	}
	w.syncs.Add(1)
	w.s.mu.Lock()
	if old := w.x.locks[f.id]; old != nil {
		w.x.locks[f.id], tmp = tmp, old
	}
	w.s.mu.Unlock()
	tmp.Close() // Best effort: the lock of the file renamed over, or of one not live here.
	if err := w.syncDir(); err != nil {
		return err
	}
	np, err := readFile(path, f.id, w.opts.Scrollback, false)
	if err != nil {
		return err
	}
	f.unsynced = false
	w.closeFile(f)
	nf := np.file(f.id)
	nf.sinceMark = 0 // it ends with one
	nf.taps, nf.pend = f.taps, f.pend[:0]
	w.files[f.id] = nf
	w.s.mu.Lock()
	w.x.setSize(nf.id, nf.size)
	w.s.mu.Unlock()
	return nil
}

// encodeBuffer is the buffer of encode's writes: an out line of maxChunk
// bytes fits.
const encodeBuffer = 128 << 10

// encode writes p to w as the lines that Load reads back, and flushes w.
// It holds one line at a time: a compaction's memory is the scrollback it
// keeps and its buffers, not the file.
func (p *parsed) encode(w *bufio.Writer, id string) error {
	var line []byte
	put := func(r *record) {
		line = appendRecord(line[:0], r)
		w.Write(line) // an error sticks: Flush returns it
	}
	put(&record{T: "session", V: version, ID: id, At: p.created})
	put(&record{T: "meta", At: p.info.UpdatedAt, Cwd: p.info.Cwd, Title: p.info.Title})
	for _, it := range p.updates() {
		put(&record{T: "update", At: it.At, Item: it.Item, U: it.Update})
	}
	for _, id := range p.termOrder {
		t := p.terms[id]
		if gap := t.written - int64(len(t.data)); gap > 0 {
			put(&record{T: "gap", At: p.created, Term: id, N: gap})
		}
		for d := t.data; len(d) > 0; {
			n := min(len(d), maxChunk)
			line = appendOut(line[:0], p.created, id, d[:n])
			w.Write(line)
			d = d[n:]
		}
		if t.exit != nil {
			put(&record{T: "exit", At: p.created, Term: id, Status: t.exit})
		}
	}
	for _, pr := range p.prompts {
		put(&record{T: "prompt", At: pr.At, Key: pr.Key, MessageID: pr.MessageID})
	}
	for _, k := range slices.Sorted(maps.Keys(p.config)) {
		v := p.config[k]
		put(&record{T: "config", At: p.created, Option: k, Value: &v})
	}
	if p.info.Closed {
		put(&record{T: "closed", At: p.info.UpdatedAt})
	}
	i := p.info
	put(&record{T: "mark", At: i.UpdatedAt, Cwd: i.Cwd, Title: i.Title, Closed: i.Closed})
	return w.Flush()
}
