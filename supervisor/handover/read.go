package handover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"shellagent/outputbuf"
	"shellagent/ptyio"
)

// A Reader is one restore's reading of what the old image handed over:
// the State, and the files, of which it closes those not taken (Close).
// It is used by one goroutine at a time.
type Reader struct {
	State State
	files []*os.File
	gone  map[int]bool // the indexes of the process handles whose process is gone
	kept  []bool       // by index: the files taken
	begun time.Time
}

// Open reads state, as the old image's Writer encoded it, with files, the
// files it handed over as new descriptors in the same order; ended holds
// the indexes of the process handles whose process is gone. Empty state
// hands nothing over. The Reader holds the files until Close; on an
// error, Open closes them.
func Open(state []byte, files []*os.File, ended []int) (*Reader, error) {
	r := &Reader{files: files, gone: make(map[int]bool), kept: make([]bool, len(files)), begun: time.Now()}
	for _, i := range ended {
		r.gone[i] = true
	}
	if err := r.decode(state); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Reader) decode(state []byte) error {
	if len(state) == 0 {
		return nil
	}
	if err := json.Unmarshal(state, &r.State); err != nil {
		return err
	}
	if r.State.Output < 0 || r.State.Output >= len(r.files) {
		return fmt.Errorf("no file %d with their output", r.State.Output)
	}
	return nil
}

// Ring is terminal t's ring, as it was.
func (r *Reader) Ring(t *Terminal) (*outputbuf.Ring, error) {
	data := make([]byte, t.Len)
	if _, err := r.files[r.State.Output].ReadAt(data, t.Output); err != nil {
		return nil, fmt.Errorf("terminal %s: read its output: %w", t.ID, err)
	}
	ring, err := outputbuf.Restore(t.Cap, data, t.End)
	if err != nil {
		return nil, fmt.Errorf("terminal %s: %w", t.ID, err)
	}
	return ring, nil
}

// Adopt has launcher l take over process p of a live terminal
// (ptyio.Adopter): its output goes to out(), its events to ev. The files
// of p are then the process's, which Close leaves open.
func (r *Reader) Adopt(l ptyio.Launcher, p *Process, out func() io.Writer, ev ptyio.Events) (ptyio.Process, error) {
	switch {
	case p == nil || p.Master < 0 || p.Shell < 0 || p.Master >= len(r.files) || p.Shell >= len(r.files):
		return nil, errors.New("its descriptors were not handed over")
	case r.gone[p.Shell]:
		return nil, fmt.Errorf("its process %d is gone", p.Pid)
	}
	a, ok := l.(ptyio.Adopter)
	if !ok {
		return nil, errors.New("this launcher cannot adopt a command")
	}
	h := ptyio.Handed{Pid: p.Pid, Master: r.files[p.Master], Shell: r.files[p.Shell], Group: p.Group, Tty: p.Tty}
	proc, err := a.Adopt(h, out(), ev)
	if err != nil {
		return nil, err
	}
	r.kept[p.Master], r.kept[p.Shell] = true, true
	return proc, nil
}

// Close closes the files not taken.
func (r *Reader) Close() {
	for i, f := range r.files {
		if !r.kept[i] {
			f.Close() // Best effort: not used.
		}
	}
}

// Log logs that the sessions are restored, and where the hold went:
// held, how long no PTY was read, from the freeze to the readers started
// again (bench's BenchmarkUpgrade reads it); before the new image's
// start (logged by the daemon), freezing the sessions and completing
// their history on disk; then restoring them.
func (r *Reader) Log(log *slog.Logger) {
	fz, terminals := &r.State, 0
	for _, s := range fz.Sessions {
		for _, t := range s.Terminals {
			if t.Live != nil {
				terminals++
			}
		}
	}
	log.Info("restored the sessions of the upgrade", "sessions", len(fz.Sessions), "terminals", terminals, "held", time.Since(fz.FrozenAt),
		"freeze", fz.Frozen.Sub(fz.FrozenAt), "flush", fz.Flushed.Sub(fz.Frozen), "restore", time.Since(r.begun))
}

// Gone is the process of a terminal that did not outlive an upgrade,
// until its exit is reported: it has no pid and no members, a stop does
// nothing, and it cannot be written to.
type Gone struct{}

var _ ptyio.Process = Gone{}

func (Gone) Pid() int                            { return 0 }
func (Gone) Members() ([]ptyio.Member, error)    { return nil, nil }
func (Gone) Stop(time.Duration)                  {}
func (Gone) Resize(ptyio.Size) error             { return nil }
func (Gone) InputWait() (ptyio.InputWait, error) { return ptyio.InputWait{}, nil }
func (Gone) Write([]byte) (int, error) {
	return 0, errors.New("the terminal's process is gone")
}
