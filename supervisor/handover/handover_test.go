package handover

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"shellagent/outputbuf"
	"shellagent/ptyio"
)

// fakeProc is a live terminal's process that can be frozen: it hands
// over the files it holds and counts its thaws.
type fakeProc struct {
	Gone
	h      ptyio.Handed
	err    error
	thawed int
}

func (p *fakeProc) Freeze(context.Context) (ptyio.Handed, error) { return p.h, p.err }
func (p *fakeProc) Thaw()                                        { p.thawed++ }

// fakeLauncher adopts every process it is given, and remembers it.
type fakeLauncher struct {
	ptyio.Launcher
	got ptyio.Handed
}

func (l *fakeLauncher) Adopt(h ptyio.Handed, _ io.Writer, _ ptyio.Events) (ptyio.Process, error) {
	l.got = h
	return Gone{}, nil
}

// actor runs each function it is given on a goroutine of its own, as a
// session's actor runs an entry.
func actor(f func(*struct{})) { go f(&struct{}{}) }

func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// What the old image writes, the new one reads: a terminal's ring comes
// back as it was, a live terminal's files are numbered after the output
// file and adopted from there, and the files not taken are closed. The
// session's actor is held until Thaw, and its processes stay frozen
// until then; Thaw closes the output file.
func TestWriteThenRead(t *testing.T) {
	w, err := NewWriter(3, []string{"sess_1"})
	if err != nil {
		t.Fatal(err)
	}
	master, shell := tempFile(t), tempFile(t)
	p := &fakeProc{h: ptyio.Handed{Pid: 42, Master: master, Shell: shell, Group: 7, Tty: "/dev/pts/9"}}
	ring := outputbuf.New(16)
	ring.Write([]byte("hello, handed-over world"))
	released := make(chan struct{})
	freeze := func(*struct{}) (*Session, error) {
		if err := w.Freeze(context.Background(), "term_1", p); err != nil {
			return nil, err
		}
		s := &Session{ID: "sess_2", Terminals: []Terminal{{ID: "term_0", Cap: 16}, {ID: "term_1", Cap: 16}}}
		for i := range s.Terminals {
			if err := w.Terminal(&s.Terminals[i], ring); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	do := func(f func(*struct{})) { go func() { f(&struct{}{}); close(released) }() }
	if err := Hold(context.Background(), w, "sess_2", do, freeze); err != nil {
		t.Fatal(err)
	}
	data, files, err := w.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files[1] != master || files[2] != shell {
		t.Fatalf("Encode handed over %v; want the output file, then the terminal's two", files)
	}
	select {
	case <-released:
		t.Fatal("the session's actor went on before Thaw")
	case <-time.After(50 * time.Millisecond):
	}
	if p.thawed != 0 {
		t.Fatal("the process thawed before Thaw")
	}

	r, err := Open(data, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.State.Created != 3 || len(r.State.Sessions) != 1 || r.State.FrozenAt.IsZero() || r.State.Flushed.Before(r.State.Frozen) {
		t.Errorf("read back %+v", r.State)
	}
	ts := r.State.Sessions[0].Terminals
	for _, ft := range ts {
		got, err := r.Ring(&ft)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := got.Total(), ring.Total(); a != b {
			t.Errorf("terminal %s's ring holds %d bytes in all, want %d", ft.ID, a, b)
		}
		want, _ := ring.Snapshot()
		if have, _ := got.Snapshot(); !bytes.Equal(have, want) {
			t.Errorf("terminal %s's ring holds %q, want %q", ft.ID, have, want)
		}
	}
	if ts[0].Live != nil || ts[1].Live == nil || ts[1].Live.Master != 1 || ts[1].Live.Shell != 2 {
		t.Fatalf("terminals read back as %+v, %+v; want term_1 live, its files 1 and 2", ts[0], ts[1])
	}
	l := &fakeLauncher{}
	if _, err := r.Adopt(l, ts[1].Live, func() io.Writer { return io.Discard }, nil); err != nil {
		t.Fatal(err)
	}
	if l.got != p.h {
		t.Errorf("adopted %+v, want %+v", l.got, p.h)
	}
	r.Close()
	if _, err := master.Stat(); err != nil {
		t.Errorf("a file taken was closed: %v", err)
	}

	w.Thaw()
	<-released
	if p.thawed != 1 {
		t.Errorf("the process thawed %d times, want 1", p.thawed)
	}
	if _, err := files[0].Stat(); err == nil {
		t.Error("Thaw left the output file open")
	}
}

// A freeze that fails thaws what it froze at once, and lets the actor go;
// a process that is ending is named.
func TestHoldFails(t *testing.T) {
	w, err := NewWriter(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Thaw()
	frozen, ending := &fakeProc{}, &fakeProc{err: ptyio.ErrEnding}
	err = Hold(context.Background(), w, "sess_1", actor, func(*struct{}) (*Session, error) {
		if err := w.Freeze(context.Background(), "term_1", frozen); err != nil {
			return nil, err
		}
		return nil, w.Freeze(context.Background(), "term_2", ending)
	})
	if !errors.Is(err, ptyio.ErrEnding) || !strings.Contains(err.Error(), "term_2") {
		t.Errorf("Hold = %v; want term_2's ErrEnding", err)
	}
	if frozen.thawed != 1 || ending.thawed != 0 {
		t.Errorf("thawed %d and %d times; want the frozen one once, the ending one never", frozen.thawed, ending.thawed)
	}
}

// What the new image cannot read is refused, and its files closed; so is
// a process whose descriptors are missing, or that is gone.
func TestReadRefuses(t *testing.T) {
	for _, tt := range []struct{ name, state string }{
		{"not JSON", "{"},
		{"no output file", `{"Output":1}`},
	} {
		f := tempFile(t)
		if _, err := Open([]byte(tt.state), []*os.File{f}, nil); err == nil {
			t.Errorf("%s: Open succeeded", tt.name)
		}
		if _, err := f.Stat(); err == nil {
			t.Errorf("%s: Open left the file open", tt.name)
		}
	}
	files := []*os.File{tempFile(t), tempFile(t), tempFile(t)}
	r, err := Open([]byte(`{"Output":0}`), files, []int{2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tt := range []struct {
		p    *Process
		want string
	}{
		{nil, "not handed over"},
		{&Process{Master: 1, Shell: 3}, "not handed over"},
		{&Process{Pid: 9, Master: 1, Shell: 2}, "process 9 is gone"},
	} {
		if _, err := r.Adopt(&fakeLauncher{}, tt.p, nil, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Adopt(%+v) = %v; want %q", tt.p, err, tt.want)
		}
	}
}

// Await refuses at once for work that stays, waits for work that ends by
// itself, and names the session and its work.
func TestAwait(t *testing.T) {
	stays := &Blocked{Session: "sess_1", Cwd: "/p", Refuse: []string{"a scenario plays"}, Wait: []string{"it is closing"}}
	err := Await(func() (*Blocked, time.Duration) { return stays, time.Hour })
	if err == nil || !strings.Contains(err.Error(), "session sess_1 (/p)") || !strings.Contains(err.Error(), "a scenario plays, it is closing") {
		t.Errorf("Await = %v; want a refusal naming sess_1 and its work", err)
	}
	looks := 0
	err = Await(func() (*Blocked, time.Duration) {
		if looks++; looks < 3 {
			return &Blocked{Session: "sess_1", Wait: []string{"it is closing"}}, time.Hour
		}
		return nil, 0
	})
	if err != nil || looks != 3 {
		t.Errorf("Await = %v after %d looks; want nil after 3", err, looks)
	}
}
