package ptyio

import (
	"cmp"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"shellagent/procexit"
)

var _ Adopter = Local{}

// Adopt implements Adopter.
func (l Local) Adopt(h Handed, out io.Writer, ev Events) (Process, error) {
	if l.Containment == nil {
		return nil, fmt.Errorf("adopt the terminal of %d: ptyio.Local has no Containment", h.Pid)
	}
	var tty uint64
	var st unix.Stat_t
	if unix.Stat(h.Tty, &st) == nil {
		tty = st.Rdev
	}
	g, err := l.Containment.Adopt(h.Group, h.Pid, tty)
	if err != nil {
		return nil, fmt.Errorf("adopt the terminal of %d: %w", h.Pid, err)
	}
	p := &local{pid: h.Pid, master: h.Master, tty: h.Tty, shell: procexit.Adopt(h.Pid, h.Shell), group: g, out: out, ev: ev, readDone: make(chan struct{}), giveUp: cmp.Or(l.GiveUp, GiveUp), ending: l.Ending, killSent: make(chan struct{})}
	go p.read()
	go p.run()
	return p, nil
}
