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
			kb = &pipeBuffer{count: newIoctlCount(rc, unix.TIOCINQ), slots: size / page}
			return
		}
		if size, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil {
			kb = &socketBuffer{count: newIoctlCount(rc, unix.SIOCOUTQ), size: size}
		}
	})
	return kb
}

// pipeBuffer is a pipe's buffer: a ring of page-sized slots
// (F_GETPIPE_SZ), whose unread bytes FIONREAD counts from either end.
type pipeBuffer struct {
	count *ioctlCount // FIONREAD
	slots int
}

func (b *pipeBuffer) unread() (int, error) { return b.count.get() }

// room counts the slots that unread bytes may take: one more than they
// fill, since the oldest may be partly read and the newest partly written.
func (b *pipeBuffer) room(unread int) int {
	used := 0
	if unread > 0 {
		used = (unread+page-1)/page + 1
	}
	return (b.slots - used) * page
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
