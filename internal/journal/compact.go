package journal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	if dead < w.opts.CompactAt || dead*2 < f.size || f.dropping || !f.compacts.Due(w.clock()) {
		return
	}
	if err := w.compact(f); err != nil {
		f.compacts.fail(w.log, f.id, "compact", w.clock(), err)
		return
	}
	w.files[f.id].compacts.ok(w.log, f.id, "compacting")
}

// compact rewrites f as Load reads it: into a temporary file beside it,
// fsynced, renamed over it, and the directory fsynced.
func (w *writer) compact(f *file) error {
	path := w.x.path(f.id)
	p, err := readFile(path, f.id, w.opts.Scrollback, keepUpdates)
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
		err = p.rewrite(bufio.NewWriterSize(tmp, encodeBuffer), path)
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
	np, err := readFile(path, f.id, w.opts.Scrollback, keepSizes)
	if err != nil {
		return err
	}
	f.unsynced = false
	w.closeFile(f)
	nf := np.file(f.id)
	nf.sinceMark = 0 // it ends with one
	nf.taps, nf.pend = f.taps, f.pend[:0]
	nf.writes, nf.compacts = f.writes, f.compacts
	w.files[f.id] = nf
	w.s.mu.Lock()
	w.x.setSize(nf.id, nf.size)
	w.s.mu.Unlock()
	return nil
}

// encodeBuffer is the buffer of a compaction's writes: an out line of
// maxChunk bytes fits.
const encodeBuffer = 128 << 10

// rewrite writes to w, and flushes, what Load reads from the file at path,
// which p read with keepUpdates, in the fewest lines: each update's last
// content, and each terminal's last scroll bytes as the lines of the file
// that hold them (copied as they are, the first one cut) after a gap for
// the rest. It reads the file again and holds one line at a time: a
// compaction's memory is its buffers, not the file or its output.
func (p *parsed) rewrite(w *bufio.Writer, path string) error {
	src, err := openSource(path)
	if err != nil {
		return err
	}
	defer src.Close() // Best effort: read only.
	var line []byte
	put := func(r *record) {
		line = appendRecord(line[:0], r)
		w.Write(line) // an error sticks: Flush returns it
	}
	put(&record{T: "session", V: version, ID: p.info.ID, At: p.created})
	put(&record{T: "meta", At: p.info.UpdatedAt, Cwd: p.info.Cwd, Title: p.info.Title})
	for _, it := range p.updates() {
		put(&record{T: "update", At: it.At, Item: it.Item, U: it.Update})
	}
	for _, id := range p.termOrder {
		if t := p.terms[id]; t.written > p.kept(t) {
			put(&record{T: "gap", At: p.created, Term: id, N: t.written - p.kept(t)})
		}
	}
	if err := p.copyOutput(w, src); err != nil {
		return err
	}
	for _, id := range p.termOrder {
		if t := p.terms[id]; t.exit != nil {
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
	if len(p.ids) > 0 {
		put(&record{T: "ids", At: p.created, IDs: p.ids})
	}
	if p.info.Closed {
		put(&record{T: "closed", At: p.info.UpdatedAt})
	}
	i := p.info
	put(&record{T: "mark", At: i.UpdatedAt, Cwd: i.Cwd, Title: i.Title, Closed: i.Closed})
	return w.Flush()
}

// kept is how many of t's last bytes a compaction keeps.
func (p *parsed) kept(t *termState) int64 { return min(t.inFile, int64(p.scroll)) }

// copyOutput writes to w the out lines of src, which p read, that hold each
// terminal's kept bytes, in the file's order: whole lines as they are, the
// first one cut to what is kept. A terminal's lines before its last forget
// record are not its own.
func (p *parsed) copyOutput(w *bufio.Writer, src io.ReaderAt) error {
	skip := make(map[string]int64, len(p.terms)) // each terminal's bytes to leave out yet
	for id, t := range p.terms {
		skip[id] = t.inFile - p.kept(t)
	}
	var cut []byte
	return eachLine(src, p.body, p.valid, func(line []byte, at int64) error {
		var rec record
		if err := parseLine(line, &rec); err != nil {
			return fmt.Errorf("line at byte %d: %w", at, err)
		}
		if rec.T != "out" {
			return nil
		}
		left, ok := skip[rec.Term]
		if !ok || at < p.forgot[rec.Term] {
			return nil
		}
		n, err := dataLen(rec.D)
		if err != nil {
			return fmt.Errorf("line at byte %d: %w", at, err)
		}
		switch {
		case left == 0: // an empty line too: it lists the terminal
			w.Write(line)
		case left >= int64(n):
			skip[rec.Term] = left - int64(n)
		default:
			_, d, err := p.output(rec.D)
			if err != nil {
				return fmt.Errorf("line at byte %d: %w", at, err)
			}
			cut = appendOut(cut[:0], rec.At, rec.Term, d[left:])
			w.Write(cut)
			skip[rec.Term] = 0
		}
		return nil
	})
}

// dataLen is the length of the data of an out record's base64, which
// p.output has decoded before, without decoding it again.
func dataLen(raw json.RawMessage) (int, error) {
	b64, err := outBase64(raw)
	if err == nil && len(b64)%4 != 0 {
		err = errors.New("out record: base64 not padded")
	}
	if err != nil {
		return 0, err
	}
	n := len(b64) / 4 * 3
	for i := len(b64) - 1; i >= len(b64)-2 && i >= 0 && b64[i] == '='; i-- {
		n--
	}
	return n, nil
}
