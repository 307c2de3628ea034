package journal

import (
	"fmt"
	"maps"
	"os"
	"syscall"
	"time"
)

// Handed is what the writer knows of the file of a session live in this
// Store, as an upgrade in place hands it over to the next image
// (Handover, Adopt), which then need not read the file to write to it.
// Its JSON crosses the exec: its shape is the old image's and the new
// one's alike. It holds the file's identity (size, modification time,
// inode), so that a file changed since is read again.
type Handed struct {
	Size    int64
	ModTime int64  // nanoseconds since the epoch
	Inode   uint64 `json:",omitempty"`

	Terms map[string][3]int64 `json:",omitempty"` // per terminal: output bytes in the file, bytes of their lines, bytes written (gaps included)
	Items map[string]int      `json:",omitempty"` // bytes of each item's last line
	Dead  int64               `json:",omitempty"` // bytes of items' earlier lines

	Cwd, Title string
	Last       time.Time // the latest record's time
}

// Handover waits, as Written does, until everything queued so far is
// written (not fsynced), and returns what the writer knows of the file
// of each session live in this Store that it wrote to, by id: for the
// next image of an upgrade in place (Adopt).
func (s *Store) Handover() (map[string]*Handed, error) {
	done := make(chan error, 1)
	out := make(map[string]*Handed)
	if !s.enqueue(op{kind: opHandover, done: done, handed: out}) {
		return nil, nil
	}
	if err := <-done; err != nil {
		return nil, err
	}
	return out, nil
}

// Adopt makes a past session live again in this process, as Reopen
// does, without returning its history: for the next image of an upgrade
// in place, which has it from the old one. With h, what Handover of the
// old image returned for the session, and the file unchanged since, the
// file is not read; else it is read for what the writer needs of it
// (and, as with Reopen, a file that cannot be read is an error).
func (s *Store) Adopt(id string, h *Handed) error {
	_, err := reopen(s, id, h, keepSizes)
	return err
}

// handed returns what the writer needs of the file of session id, as h
// says, or nil if the file at path is not the one h describes.
func handed(path, id string, h *Handed) *parsed {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != h.Size || fi.ModTime().UnixNano() != h.ModTime || inode(fi) != h.Inode {
		return nil
	}
	p := newParsed(id, h.Size, 0, keepSizes)
	p.valid = h.Size
	p.info.Cwd, p.info.Title, p.info.UpdatedAt = h.Cwd, h.Title, h.Last
	maps.Copy(p.itemLen, h.Items)
	p.deadItems = h.Dead
	for term, t := range h.Terms {
		p.terms[term] = &termState{inFile: t[0], lines: t[1], written: t[2]}
	}
	return p
}

// handOver fills out with what the writer knows of each file of a
// session live here; the batch's lines are written. It first touches
// the file of every session live here (its modification time, now): from
// the exec to the next image's Adopt no process holds their locks, and
// the pruning of another process that shares the directory spares a file
// that was never closed and was touched within the settling time.
func (w *writer) handOver(out map[string]*Handed) error {
	w.touchLive()
	for id, f := range w.files {
		w.s.mu.Lock()
		e := w.x.entries[id]
		live := e != nil && e.live
		w.s.mu.Unlock()
		if !live || len(f.pend) > 0 || f.failing || f.dropping {
			continue // a file the writer failed to write: what it knows is not the file's
		}
		var fi os.FileInfo
		var err error
		if f.f != nil {
			fi, err = f.f.Stat()
		} else {
			fi, err = os.Stat(w.x.path(id)) // compacted, not written to since
		}
		if err != nil {
			return fmt.Errorf("hand over history of session %s: %w", id, err)
		}
		if fi.Size() != f.size || f.f == nil && f.valid != f.size {
			continue // a write failed part way, or a torn line: the next image reads it
		}
		h := &Handed{Size: f.size, ModTime: fi.ModTime().UnixNano(), Inode: inode(fi),
			Terms: make(map[string][3]int64, len(f.terms)), Items: make(map[string]int, len(f.itemLen)),
			Dead: f.deadItems, Cwd: f.cwd, Title: f.title, Last: f.last}
		for term, t := range f.terms {
			h.Terms[term] = [3]int64{t.data, t.lines, t.written}
		}
		maps.Copy(h.Items, f.itemLen)
		out[id] = h
	}
	return nil
}

// touchLive sets the modification time of the file of each session live
// here to now.
func (w *writer) touchLive() {
	w.s.mu.Lock()
	var live []string
	for id, e := range w.x.entries {
		if e.live {
			live = append(live, id)
		}
	}
	w.s.mu.Unlock()
	now := time.Now()
	for _, id := range live {
		if err := os.Chtimes(w.x.path(id), now, now); err != nil && !notExist(err) {
			w.log.Warn("history: cannot touch a session file for the upgrade in place", "file", id+".jsonl", "err", err)
		}
	}
}

// inode returns the inode number of fi, 0 where the system has none.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
