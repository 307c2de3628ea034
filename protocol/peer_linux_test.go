package protocol

import (
	"bytes"
	"io"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/internal/testloop"
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

// newPipe returns a pipe that is closed when the test ends.
func newPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// pipeSize returns the size of the pipe f is an end of.
func pipeSize(t *testing.T, f *os.File) int {
	t.Helper()
	size, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	return size
}

// pipeUnread returns the bytes in the pipe f is an end of.
func pipeUnread(t *testing.T, f *os.File) int {
	t.Helper()
	n, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A pacedClient reads a pipe: all it can while its pause is 0, else 16
// KiB per pause, and nothing while its pause is negative.
type pacedClient struct {
	pause atomic.Int64 // a time.Duration
	read  atomic.Int64
}

func (c *pacedClient) run(r *os.File) {
	buf := make([]byte, 1<<20)
	for {
		pause := time.Duration(c.pause.Load())
		if pause < 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		want := len(buf)
		if pause > 0 {
			want = 16 << 10
		}
		n, err := r.Read(buf[:want])
		c.read.Add(int64(n))
		if err != nil {
			return
		}
		time.Sleep(pause)
	}
}

// The pipe to a client follows the client's rate (pipeBuffer.fit): left
// as it was for a slow client, which never has more unread than that;
// grown for a client that takes all it gets; and shrunk again once that
// client slows, after which it stays at a quarter of the most or less,
// and holds no more than that. On a loaded machine (.ci/run under three
// busy loops) the slowed client's figures swing by more than twice, and
// the pipe went between 128 KiB and 256 KiB: the rate meter divides what
// the client took by the time the writer spent in its writes, and what
// the client takes while the writer is off the CPU counts too. A quarter
// of the most, 256 KiB, is 0.16 s of this client.
func TestPipeFollowsTheClientsRate(t *testing.T) {
	t.Parallel()
	r, w := newPipe(t)
	base := pipeSize(t, r)
	p := newPeer(w, time.Minute, func() {})
	defer p.stop()
	c := &pacedClient{}
	c.pause.Store(int64(20 * time.Millisecond)) // 800 KB/s: 40 KB a lineTime
	go c.run(r)
	var wrote atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer w.Close()
		batch := make([]byte, maxBatch)
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := p.write(batch); err != nil {
				done <- err
				return
			}
			wrote.Add(maxBatch)
		}
	}()
	// watch samples the pipe until until is true or the time is up, and
	// returns the most bytes unread and the sizes seen.
	watch := func(d time.Duration, until func(size int) bool) (most int, sizes []int) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
			most = max(most, pipeUnread(t, r))
			size := pipeSize(t, r)
			if len(sizes) == 0 || sizes[len(sizes)-1] != size {
				sizes = append(sizes, size)
			}
			if until != nil && until(size) {
				break
			}
		}
		return most, sizes
	}

	most, sizes := watch(1500*time.Millisecond, nil)
	if len(sizes) != 1 || sizes[0] != base || most > base {
		t.Fatalf("a client that takes 800 KB/s saw the pipe's sizes %v and %d bytes unread, want %d and at most that", sizes, most, base)
	}
	c.pause.Store(0)
	if _, sizes = watch(testloop.Wait, func(size int) bool { return size == maxPipe }); sizes[len(sizes)-1] != maxPipe {
		t.Fatalf("a client that takes all it gets saw the pipe's sizes %v, want it grown to %d", sizes, maxPipe)
	}
	c.pause.Store(int64(10 * time.Millisecond)) // 1.6 MB/s: 80 KB a lineTime
	if _, sizes = watch(testloop.Wait, func(size int) bool { return size <= maxPipe/4 }); sizes[len(sizes)-1] > maxPipe/4 {
		t.Fatalf("a client that slowed to 1.6 MB/s saw the pipe's sizes %v, want it shrunk to %d or less", sizes, maxPipe/4)
	}
	shrunk := sizes[len(sizes)-1]
	most, sizes = watch(time.Second, nil)
	if slices.Max(sizes) > maxPipe/4 || most > maxPipe/4 {
		t.Errorf("once shrunk to %d, the pipe's sizes were %v, with %d bytes unread; want %d at most", shrunk, sizes, most, maxPipe/4)
	}
	c.pause.Store(0)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(testloop.Wait); c.read.Load() < wrote.Load() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if c.read.Load() != wrote.Load() {
		t.Errorf("the client read %d bytes of %d", c.read.Load(), wrote.Load())
	}
}

// While a shrink waits for a client that slowed (pipeBuffer.holding), the
// writer writes nothing into the larger pipe, the stall rule holds as in a
// blocked write, and the write ends when the client has read down to the
// new size, or fails when the client goes away.
func TestPeerHoldsWhileThePipeShrinks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		end   func(r *os.File) // what the client does last
		wrote bool             // the write ends with the bytes written
	}{
		{"read down", func(r *os.File) { go io.Copy(io.Discard, r) }, true},
		{"gone", func(r *os.File) { r.Close() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, w := newPipe(t)
			const timeout = 300 * time.Millisecond
			p := newPeer(w, timeout, func() {})
			defer p.stop()
			p.kernel.fit(1e12)
			if size := pipeSize(t, r); size != maxPipe {
				t.Fatalf("fit for a fast client made the pipe %d bytes, want %d", size, maxPipe)
			}
			held := maxPipe / 2
			if _, err := w.Write(make([]byte, held)); err != nil {
				t.Fatal(err)
			}
			p.kernel.fit(1) // a shrink to base, refused while the pipe holds more
			if size := pipeSize(t, r); size != maxPipe {
				t.Fatalf("the pipe shrank to %d bytes while it held %d", size, held)
			}
			done := make(chan error, 1)
			go func() { done <- p.write(make([]byte, 3*page)) }()

			// stalledBy waits until stalled is want.
			stalledBy := func(want bool) {
				for deadline := time.Now().Add(testloop.Wait); p.stalled() != want; time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("stalled stayed %v", !want)
					}
				}
			}
			stalledBy(true)
			if n := pipeUnread(t, r); n != held {
				t.Fatalf("%d bytes unread while the writer holds, want %d: it wrote into the larger pipe", n, held)
			}
			if _, err := io.ReadFull(r, make([]byte, page)); err != nil {
				t.Fatal(err)
			}
			stalledBy(false)
			select {
			case err := <-done:
				t.Fatalf("the write ended (%v) while the pipe held more than the size asked for", err)
			default:
			}
			tc.end(r)
			if err := <-done; (err == nil) != tc.wrote {
				t.Fatalf("the write returned %v", err)
			}
			if tc.wrote {
				// The rate the client read down at is its last figure.
				if size := pipeSize(t, w); size >= maxPipe {
					t.Errorf("the pipe is still %d bytes once read down", size)
				}
			}
		})
	}
}

// A grow the kernel refuses (here, of a pipe whose descriptor is closed;
// for a user over Linux's limit on pipe memory, EPERM) leaves the pipe as
// it was and lowers the limit to its size, so that the writer stops asking.
func TestPipeGrowRefused(t *testing.T) {
	_, w := newPipe(t)
	kb, ok := probeKernelBuffer(w).(*pipeBuffer)
	if !ok {
		t.Fatal("a pipe probed as no pipe")
	}
	w.Close()
	kb.fit(1e12)
	if kb.size != kb.base || kb.want != kb.base || kb.limit != kb.base || kb.holding() {
		t.Errorf("after a refused grow: size %d, want %d, limit %d, holding %v; want all %d, not holding", kb.size, kb.want, kb.limit, kb.holding(), kb.base)
	}
}

// idle tells a client that takes nothing of a write under way from one
// that takes it slowly, whatever the stall timeout.
func TestPeerIdle(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := newPeer(w, time.Minute, func() {}) // its timer looks every 15 s: idle looks itself
	defer p.stop()
	written := make(chan error, 1)
	go func() { written <- p.write(bytes.Repeat([]byte("x"), 1<<20)) }()
	const d = 500 * time.Millisecond
	waitUntil(t, "a client that reads nothing is idle", func() bool { return p.idle(d) })
	stop := make(chan struct{})
	reading := make(chan struct{})
	go func() { // 64 bytes every 20 ms: a page in 1.28 s, when the write under way goes on
		defer close(reading)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			io.ReadFull(r, make([]byte, 64))
		}
	}()
	waitUntil(t, "a client that reads slowly is not idle", func() bool { return !p.idle(d) })
	for range 150 { // 1.5 s
		time.Sleep(10 * time.Millisecond)
		if p.idle(d) {
			t.Fatal("a client that reads 64 bytes every 20 ms was idle")
		}
	}
	close(stop)
	<-reading
	drained := make(chan struct{})
	go func() { io.Copy(io.Discard, r); close(drained) }()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	w.Close()
	<-drained
	if p.idle(0) {
		t.Error("idle with no write under way")
	}
}
