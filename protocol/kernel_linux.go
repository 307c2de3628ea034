package protocol

import (
	"io"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// probeKernelBuffer returns the buffer behind out if out is a pipe or a
// socket (an *os.File, a net.Conn, or anything else with a SyscallConn),
// and nil otherwise.
func probeKernelBuffer(out io.Writer) kernelBuffer {
	sc, ok := out.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var kb kernelBuffer
	// Best effort: a failed Control leaves kb nil, as for an output
	// whose buffer cannot be seen.
	_ = rc.Control(func(fd uintptr) {
		if size, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0); err == nil {
			kb = &pipeBuffer{rc: rc, count: newIoctlCount(rc, unix.TIOCINQ), base: size, size: size, want: size, limit: max(size, maxPipe)}
			return
		}
		if size, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil {
			kb = &socketBuffer{count: newIoctlCount(rc, unix.SIOCOUTQ), size: size}
		}
	})
	return kb
}

// maxPipe is the most a pipe to the client is grown to: Linux's default
// limit for a process without privileges (/proc/sys/fs/pipe-max-size).
const maxPipe = 1 << 20

// pipeBuffer is a pipe's buffer: a ring of page-sized slots
// (F_GETPIPE_SZ), whose unread bytes FIONREAD counts from either end.
//
// It is grown for a fast client (fit): with 64 KiB, the writer and a
// client that reads 100 MB/s wake each other some 1,500 times a second,
// and on a small VM a context switch is the largest cost there is (with
// 1 MiB, the client's CPU on zeros fell by a fifth: bench/HISTORY.md,
// rounds 1 and 10). It is never smaller than the
// pipe was when probed, which is what a slow client gets, and it shrinks
// again when the client slows: the kernel then takes a write into the
// larger buffer at once, so until the client has read down to the size
// asked for, the writer waits itself (holding, peer.hold).
type pipeBuffer struct {
	rc    syscall.RawConn
	count *ioctlCount // FIONREAD
	base  int         // the size at the probe: never shrunk below
	limit int         // the most it may grow to: maxPipe, or less once a grow is refused
	size  int         // the size now, in bytes
	want  int         // the size fit asked for; less than size while a shrink waits
}

func (b *pipeBuffer) unread() (int, error) { return b.count.get() }

// room counts the slots that unread bytes may take, within the size asked
// for: one more than they fill, since the oldest may be partly read and
// the newest partly written.
func (b *pipeBuffer) room(unread int) int {
	used := 0
	if unread > 0 {
		used = (unread+page-1)/page + 1
	}
	return (min(b.size, b.want)/page - used) * page
}

// fit asks for a buffer that the client takes in about lineTime at bps,
// in powers of two (as the kernel sizes pipes), within base and limit. It
// grows at once; it shrinks only to a quarter or less of the size (so
// that a rate that wavers does not resize the pipe at every figure),
// once the client has read down to the new size (until then, holding).
func (b *pipeBuffer) fit(bps float64) {
	want := b.base
	for float64(want) < bps*lineTime.Seconds() && want < b.limit {
		want *= 2
	}
	want = min(want, b.limit)
	if want > b.size || want*4 <= b.size || b.want < b.size {
		b.want = want
	}
	b.resize()
}

// resize tries to make the pipe's size what fit asked for. A grow that is
// refused (the user's limit on pipe memory) lowers the limit; a shrink is
// refused while the pipe holds more than the new size, and is tried again
// at the next fit or holding.
func (b *pipeBuffer) resize() {
	if b.want == b.size {
		return
	}
	var size int
	var err error
	if cerr := b.rc.Control(func(fd uintptr) { size, err = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, b.want) }); cerr != nil {
		err = cerr
	}
	switch {
	case err == nil:
		b.size = size
	case b.want > b.size:
		b.limit, b.want = b.size, b.size
	}
}

// holding tries a shrink that waits again, and reports whether the pipe
// is still larger than asked for and would take a write at once: not if
// it is full (the write then waits in the kernel), nor once the client
// can no longer read (the write then fails).
func (b *pipeBuffer) holding() bool {
	b.resize()
	if b.size <= b.want {
		return false
	}
	writable := false
	// Best effort: a failed Control (a closed descriptor) leaves
	// writable false, and the write finds out.
	_ = b.rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			writable = fds[0].Revents == unix.POLLOUT
		}
	})
	return writable
}

// socketBuffer is a socket's send buffer (SO_SNDBUF), whose bytes not yet
// read by the peer SIOCOUTQ counts, with the kernel's overhead.
type socketBuffer struct {
	count *ioctlCount // SIOCOUTQ
	size  int
}

func (b *socketBuffer) unread() (int, error) { return b.count.get() }

// room leaves half the buffer for the kernel's overhead per packet.
func (b *socketBuffer) room(unread int) int { return b.size/2 - unread }

// fit leaves a socket's buffer as it is: a socket's size is the peer's and
// the kernel's to choose.
func (b *socketBuffer) fit(float64) {}

// holding is false: fit never changes a socket's buffer.
func (b *socketBuffer) holding() bool { return false }

// An ioctlCount reads a count with one ioctl on a descriptor, through
// its RawConn (so that a closed descriptor is an error, never another
// file's count) and without allocating: it is asked before every write.
// Its get may be called from any goroutine.
type ioctlCount struct {
	rc  syscall.RawConn
	req uint

	mu  sync.Mutex // guards n, err: the results of read
	n   int
	err error
	f   func(fd uintptr) // read, made once
}

func newIoctlCount(rc syscall.RawConn, req uint) *ioctlCount {
	c := &ioctlCount{rc: rc, req: req}
	c.f = c.read
	return c
}

func (c *ioctlCount) read(fd uintptr) { c.n, c.err = unix.IoctlGetInt(int(fd), c.req) }

func (c *ioctlCount) get() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.rc.Control(c.f); err != nil {
		return 0, err
	}
	return c.n, c.err
}
