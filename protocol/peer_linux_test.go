package protocol

import (
	"bytes"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestProbeKernelBuffer(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	kb := probeKernelBuffer(w)
	if _, ok := kb.(*pipeBuffer); !ok {
		t.Fatalf("a pipe probed as %T", kb)
	}
	size, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := kb.room(0); got != size {
		t.Errorf("room of an empty pipe %d, want %d", got, size)
	}
	// What room promises is written at once, from any state.
	for _, pre := range []int{1, page - 1, page, 3*page + 10} {
		w.Write(make([]byte, pre))
		if _, err := io.ReadFull(r, make([]byte, min(pre, 7))); err != nil {
			t.Fatal(err)
		}
		unread, err := kb.unread()
		if err != nil || unread != pre-min(pre, 7) {
			t.Fatalf("unread %d, %v; want %d", unread, err, pre-min(pre, 7))
		}
		room := kb.room(unread)
		done := make(chan struct{})
		go func() { w.Write(make([]byte, room)); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("a write of the %d bytes of room after %d unread blocked", room, unread)
		}
		io.ReadFull(r, make([]byte, unread+room))
	}

	a, b, err := unixPair()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	kb = probeKernelBuffer(a)
	if _, ok := kb.(*socketBuffer); !ok {
		t.Fatalf("a socket probed as %T", kb)
	}
	a.Write(make([]byte, 1000))
	if n, err := kb.unread(); err != nil || n < 1000 {
		t.Errorf("socket unread %d, %v; want at least 1000", n, err)
	}

	for _, out := range []io.Writer{&bytes.Buffer{}, devNull(t)} {
		if kb := probeKernelBuffer(out); kb != nil {
			t.Errorf("%T probed as %T", out, kb)
		}
	}
}

func unixPair() (net.Conn, net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	conn := func(fd int) (net.Conn, error) {
		f := os.NewFile(uintptr(fd), "socket")
		defer f.Close()
		return net.FileConn(f)
	}
	a, err := conn(fds[0])
	if err != nil {
		return nil, nil, err
	}
	b, err := conn(fds[1])
	return a, b, err
}

func devNull(t *testing.T) *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A real pipe whose reader takes a byte now and then: while a write
// blocks on the full pipe, every byte taken is progress, and the client is
// stalled only once it takes nothing for the timeout.
func TestPeerSeesEachByteTheClientTakes(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var changes atomic.Int32
	p := newPeer(w, timeout, func() { changes.Add(1) })
	defer p.stop()
	size, _ := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	wrote := make(chan error, 1)
	go func() { wrote <- p.write(make([]byte, size+2*page)) }()

	// A byte every 100 ms for 2.5 s: never stalled.
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, err := r.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		if p.stalled() {
			t.Fatal("stalled while the client takes a byte every 100 ms")
		}
	}
	// Nothing for 3 s: stalled.
	deadline := time.Now().Add(3 * time.Second)
	for !p.stalled() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !p.stalled() {
		t.Fatal("not stalled after 3 s of a client that takes nothing")
	}
	// The client reads again: not stalled, and the write ends.
	go io.Copy(io.Discard, r)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if p.stalled() || changes.Load() < 2 {
		t.Errorf("stalled %v after the client read everything, %d changes reported", p.stalled(), changes.Load())
	}
	w.Close()
}

// A cut that passes while a line is under way ends the output after that
// line: the client gets it whole, and nothing of the next; and a write
// that starts after the cut writes nothing.
func TestPeerCutFinishesTheLineUnderWay(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	p := newPeer(w, time.Minute, func() {})
	defer p.stop()
	first := append(bytes.Repeat([]byte("a"), 200<<10), '\n') // more than the pipe holds
	second := append(bytes.Repeat([]byte("b"), 10), '\n')
	done := make(chan error, 1)
	go func() { done <- p.write(append(append([]byte{}, first...), second...)) }()
	for { // the writer waits in the first line, the pipe full
		unread, err := p.kernel.unread()
		if err != nil {
			t.Fatal(err)
		}
		if p.kernel.room(unread) <= 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	p.cutAt(time.Now())
	time.Sleep(10 * time.Millisecond)
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); got <- b }()
	if err := <-done; err != errCut {
		t.Errorf("write returned %v, want errCut", err)
	}
	if err := p.write(second); err != errCut {
		t.Errorf("a write after the cut returned %v, want errCut", err)
	}
	w.Close()
	if b := <-got; !bytes.Equal(b, first) {
		t.Errorf("the client got %d bytes ending %q, want the first line whole (%d bytes) and no more", len(b), b[max(0, len(b)-20):], len(first))
	}
}
