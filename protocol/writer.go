package protocol

import (
	"io"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"shellagent/acp"
)

// A writer is the only thing that writes to a connection. Control messages
// (responses, requests, session updates) go out in the order they were
// queued, superseded updates coalesced (see controlQueue); terminal output
// is read from each terminal's OutputSource when the writer gets to it, a
// chunk at a time, taking terminals in turn. So at low rates a byte goes
// out at once, at high rates chunks grow, and nothing queues per byte.
//
// Control first: the writer takes the control messages queued at every
// line boundary, before the next chunk of output, and chunks and batches
// are sized to what the client takes (see peer.sizes). So a message that
// is ready waits for the line being written, the batch it is in, and what
// the kernel's buffer holds, however many terminals are busy. A
// terminal's output that was written before a terminal update of it still
// goes out before that update (see Ordering).
//
// Flow control: the writer holds every terminal it streams (see
// OutputFollower), so a client that reads loses nothing, at any speed: a
// terminal whose unsent bytes fill its buffer stops its PTY until the
// writer has sent half of them. While the client is stalled (it took no
// byte for the stall timeout, see peer), the writer lets go of every
// terminal at once: their output then overwrites the oldest unsent bytes,
// and when the client reads again each such terminal gets a replacement
// that counts the dropped bytes and carries the oldest bytes still held,
// at most a chunk, the rest following as chunks, so that catching up
// costs a client no line longer than keeping up does. A terminal's
// backpressure never holds up the writer: control messages and other
// terminals go on.
//
// Bounded input: the replies that wait for the client are counted in
// replies (see replyBacklog), whose wait the connection's reader calls
// before it reads a message.
//
// Ordering: a terminal's output is streamed only after the first
// terminal update queued with its source, and all of it that was written
// before a later terminal update of the same terminal goes out before that
// update (see OutputMode).
//
// Concurrency: send, update, updateTerminal, release, setEncoding and
// close may be called from any goroutine; the run goroutine
// does all the writing; the sources call markDirty from their writing
// goroutines; the peer calls syncStall. Lock order: writer.mu, then the
// peer's, then a source's own lock.
type writer struct {
	log     *slog.Logger
	peer    *peer
	replies *replyBacklog

	mu      sync.Mutex   // guards the fields up to wake
	enc     encoding     // see setEncoding
	queue   controlQueue // queue.stalled: as the peer said, last time syncStall looked
	dirty   []*stream
	streams streamSet // every stream followed
	closing bool
	broken  bool // a write failed: nothing is written any more
	wake    wakeup
	done    chan struct{} // closed when run returns
	control atomic.Bool   // control messages are queued; set under mu

	// Owned by the run goroutine.
	runEnc  encoding // enc as of the batch being written
	buf     []byte
	scratch []byte // one chunk's raw bytes
	snap    []byte // a replacement's raw bytes, kept once a client attached
	inBuf   int    // replies in buf
	inBufN  int    // their bytes
}

// newWriter starts a writer on out. Call close to stop it.
func newWriter(out io.Writer, log *slog.Logger, stallTimeout time.Duration) *writer {
	w := &writer{
		log:     log,
		replies: newReplyBacklog(log),
		enc:     acpV2{},
		queue:   newControlQueue(),
		streams: make(streamSet),
		wake:    make(wakeup, 1),
		done:    make(chan struct{}),
		scratch: make([]byte, maxChunk),
	}
	w.peer = newPeer(out, stallTimeout, w.syncStall)
	go w.run()
	return w
}

// setEncoding makes the writer encode with enc what is queued from now
// on; a connection sets it at each successful initialize, before any
// session update (Conn.speak). The run goroutine takes enc with each
// batch.
func (w *writer) setEncoding(enc encoding) {
	w.mu.Lock()
	w.enc = enc
	w.mu.Unlock()
}

// send queues one complete JSON-RPC message (without newline): a reply,
// counted in w.replies until it is written.
func (w *writer) send(msg []byte) {
	w.mu.Lock()
	if !w.closing {
		w.replies.add(len(msg))
		w.queue.addLine(msg)
		w.control.Store(true)
	}
	w.mu.Unlock()
	w.wake.poke()
}

// notify queues a session/update notification whose update is already in
// the shape the wire wants: the v1 front's own v1 updates, which no
// encoding changes.
func (w *writer) notify(sessionID string, update any) {
	line, err := appendNotification(nil, sessionID, update)
	if err != nil {
		w.log.Error("encode session/update", "session", sessionID, "err", err)
		return
	}
	w.send(line[:len(line)-1])
}

// attached queues the point of the stream where the client attaches to
// session again (see encoding.attached).
func (w *writer) attached(sessionID string) {
	w.mu.Lock()
	if !w.closing {
		w.queue.addAttach(sessionID)
	}
	w.mu.Unlock()
	w.wake.poke()
}

// update queues a session/update notification.
func (w *writer) update(sessionID string, update acp.Update) {
	w.mu.Lock()
	if !w.closing {
		w.queue.addUpdate(sessionID, update)
		w.control.Store(true)
		w.dropFinished()
	}
	w.mu.Unlock()
	w.wake.poke()
}

// updateTerminal queues a terminal_update ordered with the terminal's
// output from source, as mode says. The first update of a terminal starts
// following its source at once, so that it is held from now on, however
// long the update waits in the queue.
func (w *writer) updateTerminal(sessionID string, u *acp.TerminalUpdate, source OutputSource, mode OutputMode) {
	w.mu.Lock()
	if !w.closing {
		key := streamKey{sessionID, u.TerminalID}
		s := w.streams[key]
		if s == nil {
			s = &stream{key: key, source: source, enc: w.enc.output(sessionID, u.TerminalID)}
			s.follower = source.Follow(func() { w.markDirty(s) })
			s.follower.Hold(!w.queue.stalled && !w.broken)
			w.streams[key] = s
		}
		w.queue.addTerminal(sessionID, u, s, mode)
		w.control.Store(true)
		w.dropFinished()
	}
	w.mu.Unlock()
	w.wake.poke()
}

// dropFinished drops, while the peer is stalled, the finished work it
// never heard of beyond what the queue keeps; w.mu is held.
func (w *writer) dropFinished() {
	for _, s := range w.queue.dropFinished() {
		w.streams.stop(s)
	}
}

// release stops following the terminals of session: their output is no
// longer streamed, nor held back for this peer; the queue forgets it once
// what was queued for it has gone.
func (w *writer) release(session string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.streams.stopSession(session)
	w.queue.forget(session)
}

// markDirty schedules s for sending. It runs on the sources' writing
// goroutines and never blocks.
func (w *writer) markDirty(s *stream) {
	if !s.queued.CompareAndSwap(false, true) {
		return
	}
	w.mu.Lock()
	w.dirty = append(w.dirty, s)
	w.mu.Unlock()
	w.wake.poke()
}

// close writes everything queued, stops the writer and waits for it.
// Updates queued from then on are dropped. If cut is not zero, the output
// ends at cut: the line under way then is finished, and nothing is
// written after it (see peer.cutAt); the caller bounds the wait for that
// line.
func (w *writer) close(cut time.Time) {
	if !cut.IsZero() {
		w.peer.cutAt(cut)
	}
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.replies.close()
	w.wake.poke()
	<-w.done
}

func (w *writer) run() {
	defer close(w.done)
	defer w.stopAll()
	defer w.survive()
	var batch []*entry
	var turn []*stream // terminals with output to send, in turn
	var gather gatherer
	for {
		w.mu.Lock()
		batch = w.queue.take(batch[:0])
		w.control.Store(false)
		turn = append(turn, w.dirty...)
		clear(w.dirty)
		w.dirty = w.dirty[:0]
		closing := w.closing
		w.runEnc = w.enc
		w.mu.Unlock()

		for i, e := range batch {
			w.writeEntry(e)
			batch[i] = nil
		}
		if closing {
			w.finish()
			return
		}
		if len(batch) == 0 && len(turn) > 0 && gather.wait(w.wake) {
			continue // woken by a control message: take it first
		}
		// A chunk per terminal in turn, until control messages wait.
		n, full := 0, false
		for ; n < len(turn) && !w.control.Load(); n++ {
			full = w.writeChunk(turn[n]) || full
		}
		turn = slices.Delete(turn, 0, n)
		if n > 0 {
			gather.passed(full)
		}
		if len(batch) == 0 && n == 0 {
			w.flush()
			<-w.wake
		}
	}
}

// survive recovers from a panic of the run goroutine: the connection's
// output ends as if the client had gone (nothing more is written or
// queued, every terminal is let go, input may be read again), so that a
// fault in writing to one client costs that client only, never the
// process and the other connections of a daemon. It is deferred by run.
func (w *writer) survive() {
	r := recover()
	if r == nil {
		return
	}
	w.log.Error("the writer panicked; dropping this connection's output", "panic", r, "stack", string(debug.Stack()))
	w.mu.Lock()
	w.broken, w.closing = true, true
	w.streams.hold(false)
	w.mu.Unlock()
	w.replies.close()
}

// gatherWithin and gatherFor make the writer gather output as Nagle's
// algorithm does: while passes over the terminals follow one another
// within gatherWithin (output arrives faster than the writer sends it
// chunk by chunk), it waits gatherFor before the next pass, so that the
// chunk it then sends carries what arrived meanwhile; but not after a
// pass that left a terminal with a whole chunk or more to send, since
// waiting cannot make its next chunk bigger. Output that comes now and
// then (an echo, a prompt) goes out at once; a flood goes out in chunks
// of up to a millisecond of output, with a goroutine hand-off, a write
// and a client wake-up each, instead of one per PTY read (≈ 4 KiB): on
// a machine whose cores are busy, each wake-up on either side is CPU
// taken from the child and the kernel's PTY work.
const (
	gatherWithin = 200 * time.Microsecond
	gatherFor    = time.Millisecond
)

// A gatherer times the writer's passes over the terminals (see
// gatherWithin). It belongs to the run goroutine.
type gatherer struct {
	last  time.Time // the end of the last pass
	full  bool      // the last pass left a whole chunk to send
	woken bool      // the last wait was cut short: the next does not wait
	timer *time.Timer
	now   func() time.Time // time.Now if nil; a test's clock
}

// wait waits gatherFor before a pass over the terminals if the last one
// ended within gatherWithin and left no whole chunk, unless something
// arrives on wake first; it reports whether wake cut it short.
func (g *gatherer) wait(wake <-chan struct{}) (woken bool) {
	if !g.waits() {
		return false
	}
	if g.timer == nil {
		g.timer = time.NewTimer(gatherFor)
	} else {
		g.timer.Reset(gatherFor)
	}
	select {
	case <-wake:
		g.timer.Stop()
		g.woken = true
		return true
	case <-g.timer.C:
		return false
	}
}

// waits decides whether the coming pass waits: not after a wait that was
// cut short, nor when the last pass left a whole chunk to send or ended
// more than gatherWithin ago.
func (g *gatherer) waits() bool {
	if g.woken || g.full || g.clock().Sub(g.last) > gatherWithin {
		g.woken = false
		return false
	}
	return true
}

// passed notes the end of a pass, and whether it left a whole chunk to
// send.
func (g *gatherer) passed(full bool) { g.last, g.full = g.clock(), full }

func (g *gatherer) clock() time.Time {
	if g.now != nil {
		return g.now()
	}
	return time.Now()
}

// finish is the last pass: what was queued, and every terminal's output
// up to now. A terminal that still writes cannot hold close.
func (w *writer) finish() {
	w.mu.Lock()
	streams := w.streams.list()
	w.mu.Unlock()
	for _, s := range streams {
		if s.started && !s.closed.Load() {
			w.catchUp(s)
		}
	}
	w.flush()
}

// stopAll lets go of every source: a connection that is gone holds
// nothing back.
func (w *writer) stopAll() {
	w.peer.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.streams.stopAll()
}

func (w *writer) writeEntry(e *entry) {
	switch {
	case e.line != nil:
		w.buf = append(w.buf, e.line...)
		w.buf = append(w.buf, '\n')
		w.inBuf++
		w.inBufN += len(e.line)
		w.maybeFlush(maxBatch)
	case e.stream != nil:
		w.writeTerminalUpdate(e)
	case e.attach:
		w.runEnc.attached(e.session)
	default:
		w.writeUpdate(e.session, e.update)
	}
}

func (w *writer) writeTerminalUpdate(e *entry) {
	s, u := e.stream, e.update.(*acp.TerminalUpdate)
	switch {
	case e.mode == ReplaceOutput || !s.started && u.ExitStatus != nil:
		// A first update that is also the last carries the output with it.
		w.replace(s, u)
	case !s.started:
		w.writeUpdate(e.session, u)
		if s.source.Total() > s.sent {
			w.markDirty(s)
		}
	default:
		w.catchUp(s)
		w.writeUpdate(e.session, u)
	}
	s.started = true
	if u.ExitStatus != nil {
		w.mu.Lock()
		w.streams.stop(s)
		w.mu.Unlock()
	}
}

// catchUp sends everything s's source holds beyond what was sent.
func (w *writer) catchUp(s *stream) {
	target := s.source.Total()
	for s.sent < target {
		if !w.sendChunk(s) {
			return
		}
	}
}

// writeChunk sends the next piece of s and reschedules it if more is
// waiting, after the other dirty terminals. It reports whether a whole
// chunk or more is waiting.
func (w *writer) writeChunk(s *stream) (full bool) {
	s.queued.Store(false) // before reading: a write from now on marks it again
	if s.closed.Load() || !s.started {
		return false // a stream starts with its first update, which marks it
	}
	w.sendChunk(s)
	left := s.source.Total() - s.sent
	if left > 0 {
		w.markDirty(s)
	}
	chunk, _ := w.peer.sizes()
	return left >= int64(chunk)
}

// sendChunk writes the next chunk of s, and reports whether there was
// one. If bytes were overwritten before they could be sent (the client
// stalled), the chunk goes as a replacement of the client's copy that
// counts them as dropped: what the client holds, then, is what the
// terminal holds from its oldest byte up to the chunk's end, and chunks
// go on from there.
func (w *writer) sendChunk(s *stream) bool {
	chunk, batch := w.peer.sizes() // the rate changes only in a write (flush)
	n, start := s.source.ReadAt(w.scratch[:chunk], s.sent)
	switch {
	case start > s.sent:
		buf, err := s.enc.appendReplacement(w.buf, nil, w.scratch[:n], start-s.sent)
		if err != nil {
			w.log.Error("encode terminal output", "terminal", s.key.terminal, "err", err)
		} else {
			w.buf = buf
		}
	case n == 0:
		return false
	default:
		w.buf = s.enc.appendChunk(w.buf, w.scratch[:n])
	}
	s.sent = start + int64(n)
	s.follower.Taken(s.sent)
	w.maybeFlush(batch)
	return true
}

// replace replaces the client's copy of s with everything the source
// holds, in the line of u: for a client that attaches (resume, replay),
// or a terminal whose first update is also its last. The line is appended
// in place, as chunks are. The source is copied in one go (into a buffer
// kept for the next time) so that the replacement is consistent while the
// PTY writes on.
func (w *writer) replace(s *stream, u *acp.TerminalUpdate) {
	var end int64
	w.snap, end = s.source.AppendSnapshot(w.snap[:0])
	dropped := end - int64(len(w.snap)) // an attaching client has nothing
	buf, err := s.enc.appendReplacement(w.buf, u, w.snap, dropped)
	if err != nil {
		w.log.Error("encode terminal output", "terminal", s.key.terminal, "err", err)
		return
	}
	w.buf = buf
	s.sent = end
	s.follower.Taken(end)
	w.maybeFlush(maxBatch)
}

func (w *writer) writeUpdate(session string, update acp.Update) {
	buf, err := w.runEnc.appendUpdate(w.buf, session, update)
	if err != nil {
		w.log.Error("encode session/update", "session", session, "err", err)
		return
	}
	w.buf = buf
	w.maybeFlush(maxBatch)
}

// maybeFlush writes the buffer once it holds more than batch bytes:
// after a chunk, the batch the client's rate allows (see peer.sizes), so
// that a control message waits for little output; after a control
// message, maxBatch, since only more control messages can be behind it.
func (w *writer) maybeFlush(batch int) {
	if len(w.buf) > batch {
		w.flush()
	}
}

// flush writes the buffer through the peer; a write that fails marks the
// client gone, and nothing more is written. The replies it wrote no
// longer wait: input may be read again (see replyBacklog).
func (w *writer) flush() {
	if len(w.buf) == 0 {
		return
	}
	defer func() {
		w.replies.remove(w.inBuf, w.inBufN)
		w.inBuf, w.inBufN = 0, 0
	}()
	w.mu.Lock()
	broken := w.broken
	w.mu.Unlock()
	if !broken {
		if err := w.peer.write(w.buf); err != nil {
			w.mu.Lock()
			w.broken = true
			if err == errCut {
				w.log.Warn("the output ended at the exit deadline, after a whole line; dropping further messages")
			} else {
				w.log.Warn("client output closed; dropping further messages", "err", err)
			}
			w.streams.hold(false)
			w.mu.Unlock()
			w.replies.close()
		}
	}
	if cap(w.buf) > 4*maxBatch {
		w.buf = nil // one big replacement does not pin its memory
	}
	w.buf = w.buf[:0]
}

// syncStall applies what the peer says of the client: stalled, every
// terminal is let go and finished work it never heard of beyond the
// queue's limit is dropped; reading again, every terminal is held.
func (w *writer) syncStall() {
	w.mu.Lock()
	defer w.mu.Unlock()
	stalled := w.peer.stalled()
	if stalled == w.queue.stalled || w.broken {
		return
	}
	w.queue.stalled = stalled
	if stalled {
		w.log.Info("client accepted nothing for the stall timeout; terminal output is no longer held back for it", "timeout", w.peer.m.timeout)
	} else {
		w.log.Info("client reads again; holding terminal output back for it")
	}
	w.streams.hold(!stalled) // not broken: see above
	w.dropFinished()
}
