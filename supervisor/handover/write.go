package handover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"shellagent/internal/journal"
	"shellagent/outputbuf"
	"shellagent/ptyio"
)

// A Writer writes the State of one freeze, and collects the files that
// go with it: the first holds the terminals' output, then each live
// terminal's two. Its sessions are written one after the other (Hold),
// each on its own actor while the caller waits: no two of its methods
// run at once, but Thaw.
type Writer struct {
	state State
	blob  *os.File // the terminals' output
	files []*os.File
	thaws []func()
	// The processes frozen for the session being written, and what
	// Freeze returned for each, by terminal id.
	procs  []ptyio.Freezer
	handed map[string]ptyio.Handed
}

// NewWriter starts the State of a freeze, with the Supervisor's count of
// sessions created and its closed sessions, which it keeps; FrozenAt is
// now. The output file is an unlinked temporary file, which the new
// image reads and closes.
func NewWriter(created int, closed []string) (*Writer, error) {
	w := &Writer{state: State{FrozenAt: time.Now(), Created: created, Closed: closed}}
	blob, err := os.CreateTemp("", "shellagent-upgrade-*")
	if err != nil {
		return nil, err
	}
	os.Remove(blob.Name()) // Best effort: it goes with the last descriptor anyway.
	w.blob, w.files = blob, []*os.File{blob}
	return w, nil
}

// Terminal writes what ring, terminal t's, holds to the output file, and
// where in t; if Freeze froze the terminal's process, it is t.Live, its
// files handed over after those so far.
func (w *Writer) Terminal(t *Terminal, ring *outputbuf.Ring) error {
	data, end := ring.Snapshot()
	at, err := w.blob.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = w.blob.Write(data)
	}
	if err != nil {
		return fmt.Errorf("terminal %s: write its output: %w", t.ID, err)
	}
	t.Output, t.Len, t.End = at, len(data), end
	if h, ok := w.handed[t.ID]; ok {
		t.Live = &Process{Pid: h.Pid, Master: len(w.files), Shell: len(w.files) + 1, Group: h.Group, Tty: h.Tty}
		w.files = append(w.files, h.Master, h.Shell)
	}
	return nil
}

// Hold writes one session, id, and holds it: do runs a function on the
// session's actor, in an entry of its own; there freeze writes the
// session (nil if it has closed: it is not handed over), freezing the
// processes of its live terminals through Freeze. The actor stays in
// that entry, and the processes frozen, until Thaw; if freeze fails, they
// thaw at once and the session goes on. Hold returns once freeze has, or
// once ctx is done.
func Hold[S any](ctx context.Context, w *Writer, id string, do func(func(S)), freeze func(S) (*Session, error)) error {
	type frozen struct {
		s   *Session
		err error
	}
	got := make(chan frozen, 1)
	hold := make(chan struct{})
	thaw := sync.OnceFunc(func() { close(hold) })
	do(func(st S) {
		s, err := freeze(st)
		procs := w.procs
		w.procs, w.handed = nil, nil
		if err != nil {
			thawAll(procs)
		}
		got <- frozen{s, err}
		if err != nil || s == nil {
			return
		}
		<-hold // the session does nothing until thaw
		thawAll(procs)
	})
	select {
	case f := <-got:
		if f.err != nil {
			return f.err
		}
		w.thaws = append(w.thaws, thaw)
		if f.s != nil {
			w.state.Sessions = append(w.state.Sessions, *f.s)
		}
		return nil
	case <-ctx.Done():
		thaw()
		return fmt.Errorf("freeze session %s: %w", id, ctx.Err())
	}
}

// Freeze freezes p, the process of live terminal id, for the session
// that Hold writes, which thaws it; Terminal hands it over.
func (w *Writer) Freeze(ctx context.Context, id string, p ptyio.Freezer) error {
	h, err := p.Freeze(ctx)
	if errors.Is(err, ptyio.ErrEnding) {
		return fmt.Errorf("terminal %s ended during the upgrade; upgrade again: %w", id, err)
	} else if err != nil {
		return err
	}
	if w.handed == nil {
		w.handed = make(map[string]ptyio.Handed)
	}
	w.procs, w.handed[id] = append(w.procs, p), h
	return nil
}

func thawAll(procs []ptyio.Freezer) {
	for _, p := range procs {
		p.Thaw()
	}
}

// Encode marks every session written (Frozen), then the history on disk
// complete (Flushed), and returns the State as the new image reads it,
// with the files handed over, in order. With history on (store), the new
// image writes on each session's file: all of it must be written before
// the exec, and what the store's writer knows of each file goes with the
// session (Durable.File), so that the new image need not read it.
func (w *Writer) Encode(store *journal.Store) ([]byte, []*os.File, error) {
	w.state.Frozen = time.Now()
	if store != nil {
		handed, err := store.Handover()
		if err != nil {
			return nil, nil, fmt.Errorf("write their history: %w", err)
		}
		for i := range w.state.Sessions {
			if d := w.state.Sessions[i].Durable; d != nil {
				d.File = handed[w.state.Sessions[i].ID]
			}
		}
	}
	w.state.Flushed = time.Now()
	data, err := json.Marshal(w.state)
	if err != nil {
		return nil, nil, err
	}
	return data, w.files, nil
}

// Thaw lets every session written act again, as after an exec that
// failed, and closes the output file: the thaw of an upgrade that did
// not happen. Any goroutine may call it, and more than once.
func (w *Writer) Thaw() {
	for _, f := range w.thaws {
		f()
	}
	w.blob.Close() // Best effort: an unlinked file no one reads.
}
