package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// unreadIoctl counts a pipe's unread bytes (waitPipeFull).
const unreadIoctl = unix.TIOCINQ

// A pipeSizes reader reads a pipe and notes each size the pipe had after a
// read, in order.
type pipeSizes struct {
	f *os.File

	mu    sync.Mutex
	sizes []int
}

func (p *pipeSizes) Read(b []byte) (int, error) {
	n, err := p.f.Read(b)
	size, serr := unix.FcntlInt(p.f.Fd(), unix.F_GETPIPE_SZ, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	if serr == nil && (len(p.sizes) == 0 || p.sizes[len(p.sizes)-1] != size) {
		p.sizes = append(p.sizes, size)
	}
	return n, err
}

// seen returns the sizes noted so far.
func (p *pipeSizes) seen() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.sizes...)
}

// The agent grows its stdout pipe for a client that takes all it gets (to
// the 1 MiB that Linux allows a process without privileges, on a quiet
// machine), and shrinks it back once the client slows to 800 KB/s: to the
// size it had, or twice that (protocol's pipeBuffer.fit shrinks by four
// or more). Either client gets every byte: the stall timeout is
// readingStall's, since the strict client's reader was seen to pause for
// over a second under -race on a loaded machine.
func TestStdoutPipeFollowsTheClient(t *testing.T) {
	t.Parallel()
	sizes := &pipeSizes{}
	a := startFlowAgentWith(t, flowOptions{bin: plainBinary, chunks: true, args: []string{"--stall-timeout", readingStall}, read: func(r io.Reader) io.Reader {
		sizes.f = r.(*os.File)
		return sizes
	}})
	first := sizes.seen()
	if len(first) != 1 {
		t.Fatalf("the pipe's sizes %v before any output, want one", first)
	}
	base := first[0]
	for i, step := range []struct {
		rate  int                   // the client's, 0: all it gets
		bytes int                   // the command's output
		want  func(seen []int) bool // of the sizes the step saw
		says  string
	}{
		{0, 20 << 20, func(seen []int) bool { return slices.Max(seen) > base }, "grown"},
		{800_000, 2 << 20, func(seen []int) bool { return seen[len(seen)-1] <= 2*base }, "shrunk to at most twice its first size"},
	} {
		a.out.setRate(step.rate)
		from := len(sizes.seen()) - 1
		a.prompt(fmt.Sprintf("head -c %d /dev/zero", step.bytes))
		tid := fmt.Sprintf("term_%d", i+1)
		a.waitExit(tid)
		if out := a.c.Output(a.sid, tid); !bytes.Equal(out, make([]byte, step.bytes)) {
			t.Fatalf("%s at %d B/s: the client got %d bytes, want %d zeros", tid, step.rate, len(out), step.bytes)
		}
		seen := sizes.seen()[from:]
		t.Logf("at %d B/s, the pipe's sizes: %v", step.rate, seen)
		if !step.want(seen) {
			t.Errorf("at %d B/s, the pipe's sizes were %v from %d bytes, want it %s", step.rate, seen, base, step.says)
		}
	}
}
