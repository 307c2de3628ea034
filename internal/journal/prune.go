package journal

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// prune removes sessions until the history is within Max: the corrupt
// files set aside first (pruneAside), then the sessions that
// are closed, then (pruneSettle after Open) those that were never
// closed (their agent died), each the least recently updated first;
// never one live here, nor one whose file another process holds.
func (w *writer) prune() {
	w.s.mu.Lock()
	over := w.x.total > w.opts.Max
	w.s.mu.Unlock()
	if !over {
		return
	}
	pruneAside(w.s, w.opts.Max)
	w.s.mu.Lock()
	cands := w.x.prunable(time.Since(w.opened) >= w.settle)
	w.s.mu.Unlock()
	for _, c := range cands {
		w.s.mu.Lock()
		e := w.x.entries[c.ID]
		over, gone := w.x.total > w.opts.Max, e == nil || e.live // e.live under mu: Reopen sets it
		w.s.mu.Unlock()
		if !over {
			return
		}
		if gone {
			continue
		}
		switch gone, err := w.pruneOne(c); {
		case err != nil:
			w.log.Warn("history: cannot prune a session", "session", c.ID, "err", err)
		case gone:
			w.log.Info("history: pruned the least recently updated session", "session", c.ID, "closed", c.Closed, "max", w.opts.Max)
		}
	}
}

// pruneOne removes session c's file, unless another process holds it
// or wrote to it since the index read it, or, if it was never closed,
// touched it within the settling time (Handover does, for an upgrade in
// place, whose images hold no lock in between).
func (w *writer) pruneOne(c Info) (gone bool, err error) {
	path := w.x.path(c.ID)
	l, err := lockFile(path)
	switch {
	case errors.Is(err, ErrLive):
		w.s.mu.Lock()
		if e := w.x.entries[c.ID]; e != nil && !e.live {
			e.info.Elsewhere = true
		}
		w.s.mu.Unlock()
		return false, nil
	case notExist(err): // removed by another process
		w.s.mu.Lock()
		if e := w.x.entries[c.ID]; e != nil && !e.live {
			w.x.drop(c.ID)
		}
		w.s.mu.Unlock()
		return false, nil
	case err != nil:
		return false, err
	}
	defer l.Close() // Best effort: closing drops the lock, once the file is gone.
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.Size() != c.Size:
		w.rescanOne(c.ID, fi.Size()) // another process wrote to it since: it may have made it live
		return false, nil
	case err == nil && !c.Closed && time.Since(fi.ModTime()) < w.settle:
		// Touched lately, and never closed: a daemon being upgraded in
		// place, between its images, holds no lock on it (Handover).
		return false, nil
	}
	if f := w.files[c.ID]; f != nil {
		f.unsynced = false
		w.closeFile(f)
		delete(w.files, c.ID)
	}
	if err := os.Remove(path); err != nil && !notExist(err) {
		return false, err
	}
	w.s.mu.Lock()
	if e := w.x.entries[c.ID]; e != nil && !e.live {
		w.x.drop(c.ID)
	}
	w.s.mu.Unlock()
	return true, w.syncDir()
}

// rescan reads again what changed in the directory since the index read
// it: files of other processes' sessions, new, grown or removed, and
// which of them another process holds. The sessions live here are the
// Store's own, and left alone. With sweep (at Open) it removes what a
// creation or compaction that did not finish left.
func (w *writer) rescan(sweep bool) error {
	des, err := os.ReadDir(w.x.dir)
	if err != nil {
		return fmt.Errorf("read history %s: %w", w.x.dir, err)
	}
	seen := make(map[string]bool, len(des))
	aside := make(map[string]asideFile)
	for _, de := range des {
		name := de.Name()
		if id, ok := asideOf(name); ok && de.Type().IsRegular() {
			if fi, err := de.Info(); err == nil {
				aside[id] = asideFile{size: fi.Size(), mod: fi.ModTime()}
			}
			continue
		}
		if sweep && isTemp(name) {
			// One that died (not one of another process's that runs
			// now): the file it was for is whole, or was never there.
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				os.Remove(filepath.Join(w.x.dir, name)) // Best effort: it is ignored anyway.
			}
			continue
		}
		id, ok := idOf(name)
		if !ok || !de.Type().IsRegular() {
			continue
		}
		seen[id] = true
		fi, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		w.rescanOne(id, fi.Size())
	}
	var past []string
	w.s.mu.Lock()
	for id := range w.x.aside {
		if _, ok := aside[id]; !ok {
			w.x.uncountAside(id)
		}
	}
	for id, f := range aside {
		w.x.countAside(id, f)
	}
	for id, e := range w.x.entries {
		switch {
		case e.live:
		case !seen[id]:
			w.x.drop(id)
			if f := w.files[id]; f != nil {
				f.unsynced = false
				w.closeFile(f)
				delete(w.files, id)
			}
		case w.x.locks[id] == nil:
			past = append(past, id)
		}
	}
	w.s.mu.Unlock()
	held := make(map[string]bool, len(past))
	for _, id := range past {
		held[id] = probeLocked(w.x.path(id))
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	for id, h := range held {
		if e := w.x.entries[id]; e != nil && !e.live {
			e.info.Elsewhere = h
		}
	}
	return nil
}

// rescanOne reads what List shows of session id's file again unless it
// is live here or its size is what the index knows.
func (w *writer) rescanOne(id string, size int64) {
	w.s.mu.Lock()
	e := w.x.entries[id]
	was, logged := w.x.skipped[id]
	skip := e != nil && (e.live || e.info.Size == size) || e == nil && logged && was == size
	w.s.mu.Unlock()
	if skip {
		return
	}
	info, err := readInfo(w.open, w.x.path(id), id, size)
	if err != nil {
		skipFile(w.s, id, size, err)
		return
	}
	if f := w.files[id]; f != nil { // read again when next written to
		f.unsynced = false
		w.closeFile(f)
		delete(w.files, id)
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.x.put(info)
}

// skipFile logs a file of s it cannot read, once for each size it has, and
// drops its session from the index unless it is live here. A corrupt
// one is set aside (moveAside), and so skipped once and for all: the
// index no longer reads it, here or in any process. The writer calls it
// for what it cannot index, Reopen and Load for a file they find corrupt
// (skipCorrupt); it changes only what s.mu guards. It returns where the
// file was set aside, or "".
func skipFile(s *Store, id string, size int64, err error) (aside string) {
	var moved asideFile
	if ce := (*CorruptError)(nil); errors.As(err, &ce) && !errors.Is(err, errNewer) {
		moved = moveAside(s, id, size)
	}
	s.mu.Lock()
	was, ok := s.idx.skipped[id]
	logged := ok && was == size
	s.idx.skipped[id] = size
	if e := s.idx.entries[id]; e != nil && !e.live {
		s.idx.drop(id)
	}
	if !moved.mod.IsZero() {
		delete(s.idx.skipped, id)
		s.idx.countAside(id, moved)
	}
	s.mu.Unlock()
	switch {
	case !moved.mod.IsZero():
		aside = s.idx.asidePath(id)
		s.log.Warn("history: skipping a corrupt session file for good: set aside as it is, "+SetAside+" appended to its name", "file", id+".jsonl", "err", err)
	case !logged:
		s.log.Warn("history: skipping a session file", "file", id+".jsonl", "err", err)
	}
	return aside
}

// moveAside renames session id's corrupt file, of size bytes as read, to
// its name with SetAside appended, unless another process holds it live
// or it changed since it was read; it returns what the index counts of
// it then, zero if it did not.
func moveAside(s *Store, id string, size int64) asideFile {
	path := s.idx.path(id)
	l, err := lockFile(path)
	if err != nil {
		return asideFile{}
	}
	defer l.Close() // Best effort: closing drops the lock, once the file is renamed.
	fi, err := l.Stat()
	if err != nil || fi.Size() != size {
		return asideFile{}
	}
	if err := os.Rename(path, path+SetAside); err != nil {
		return asideFile{}
	}
	syncDir(s.idx.dir) // Best effort: a rename lost to a crash is done again.
	return asideFile{size: fi.Size(), mod: fi.ModTime()}
}

// pruneAside removes the corrupt files set aside in s, the oldest
// first, while the history is over max: they go before any session.
// It runs on s's writer.
func pruneAside(s *Store, max int64) {
	x := &s.idx
	s.mu.Lock()
	ids := slices.Collect(maps.Keys(x.aside))
	slices.SortFunc(ids, func(a, b string) int { return x.aside[a].mod.Compare(x.aside[b].mod) })
	s.mu.Unlock()
	for _, id := range ids {
		s.mu.Lock()
		over := x.total > max
		s.mu.Unlock()
		if !over {
			return
		}
		if err := removeAside(s, id); err != nil {
			s.log.Warn("history: cannot prune a corrupt session file set aside", "session", id, "err", err)
			continue
		}
		s.log.Info("history: pruned a corrupt session file set aside", "file", filepath.Base(x.asidePath(id)), "max", max)
	}
}

// removeAside removes the corrupt file of session id set aside in s, if
// its index counts one. It runs on s's writer.
func removeAside(s *Store, id string) error {
	x := &s.idx
	s.mu.Lock()
	_, ok := x.aside[id]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if err := os.Remove(x.asidePath(id)); err != nil && !notExist(err) {
		return fmt.Errorf("remove history of session %s: %w", id, err)
	}
	s.mu.Lock()
	x.uncountAside(id)
	s.mu.Unlock()
	return syncDir(x.dir)
}
