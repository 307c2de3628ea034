package protocol

import (
	"log/slog"
	"sync"
)

// Bounded input: while the replies (responses, the agent's own requests,
// and the v1 front's own notifications: every line queued whole) that
// wait for the client pass either bound, the connection stops reading its
// input until they are down to half of it.
const (
	maxWaitingReplies    = 1000
	maxWaitingReplyBytes = 8 << 20
)

// A replyBacklog counts the replies that wait for the client, from when
// they are queued until they are written, and holds the connection's
// reader in wait while they pass a bound. The kernel then holds a client
// that sends requests and does not read, as a full PTY holds a child:
// nothing is dropped, and every request is answered once the client
// reads. Session updates from the Agent are not counted: a writer
// coalesces them instead (see controlQueue), so they need no bound, and a
// flood of terminal output never keeps a reading client's requests from
// being read.
//
// Its methods may be called from any goroutine.
type replyBacklog struct {
	log *slog.Logger

	mu     sync.Mutex
	room   *sync.Cond // signalled when wait may return
	n      int        // replies waiting
	bytes  int
	held   bool // wait waits
	closed bool // nothing will be written any more: wait never waits
}

func newReplyBacklog(log *slog.Logger) *replyBacklog {
	b := &replyBacklog{log: log}
	b.room = sync.NewCond(&b.mu)
	return b
}

// add counts a reply of size bytes, queued.
func (b *replyBacklog) add(size int) {
	b.mu.Lock()
	b.n++
	b.bytes += size
	b.mu.Unlock()
}

// remove counts n replies of size bytes in all out: written (or dropped
// with a client that is gone).
func (b *replyBacklog) remove(n, size int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n -= n
	b.bytes -= size
	if b.held && b.drained() {
		b.room.Broadcast()
	}
}

// wait returns once the replies waiting are within the bounds, waiting,
// once they passed one, until they are down to half of it; it returns at
// once after close.
func (b *replyBacklog) wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n < maxWaitingReplies && b.bytes < maxWaitingReplyBytes || b.closed {
		return
	}
	b.log.Info("replies wait for the client; input is no longer read until they drain", "replies", b.n, "bytes", b.bytes)
	b.held = true
	for !b.drained() && !b.closed {
		b.room.Wait()
	}
	b.held = false
}

// drained reports whether the replies waiting are down to where input is
// read again; b.mu is held.
func (b *replyBacklog) drained() bool {
	return b.n <= maxWaitingReplies/2 && b.bytes <= maxWaitingReplyBytes/2
}

// close lets wait return for good: the writer closes, or the client is
// gone.
func (b *replyBacklog) close() {
	b.mu.Lock()
	b.closed = true
	b.room.Broadcast()
	b.mu.Unlock()
}
