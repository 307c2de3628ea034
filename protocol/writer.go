package protocol

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"shellagent/acp"
)

// maxChunk is the most terminal output one terminal_output_chunk carries.
const maxChunk = 64 << 10

// flushAt is how much encoded output the writer gathers before it writes
// even though more is waiting.
const flushAt = 256 << 10

// minPiece is the smallest write to the peer; see writer.flush.
const minPiece = 4 << 10

// DefaultStallTimeout is how long a connection may accept no bytes before
// the writer stops holding the terminals back.
const DefaultStallTimeout = time.Second

// A writer is the only thing that writes to a connection. Control messages
// (responses, requests, session updates) go out in the order they were
// queued, superseded updates coalesced (see controlQueue); terminal output
// is read from each terminal's OutputSource when the writer gets to it, up
// to maxChunk at a time, taking terminals in turn. So at low rates a byte
// goes out at once, at high rates chunks grow, and nothing queues per byte.
//
// Flow control: the writer holds every terminal it streams (see
// OutputFollower), so a client that reads loses nothing, at any speed: a
// terminal whose unsent bytes fill its buffer stops its PTY until the
// writer has sent half of them. While a write to the peer has accepted
// nothing for the stall timeout, the client counts as stalled: the writer
// lets go of every terminal at once (their output then overwrites the
// oldest unsent bytes, and the client gets a replacement with the count of
// dropped bytes when it reads again), until the peer accepts bytes again.
// A terminal's backpressure never holds up the writer: control messages
// and other terminals go on.
//
// Ordering: a terminal's output is streamed only after the first
// terminal update queued with its source, and all of it that was written
// before a later terminal update of the same terminal goes out before that
// update (see OutputMode).
//
// Concurrency: send, update, updateTerminal, release, setEncoding and
// close may be called from any goroutine; the run goroutine does all the
// writing; the sources call
// markDirty from their writing goroutines; the stall timer runs
// checkStall. Lock order: writer.mu, then a source's own lock.
type writer struct {
	out          io.Writer
	log          *slog.Logger
	stallTimeout time.Duration

	mu           sync.Mutex   // guards the fields up to wake
	enc          encoding     // see setEncoding
	queue        controlQueue // queue.stalled: the peer accepted nothing for stallTimeout
	dirty        []*stream
	streams      map[streamKey]*stream // every stream followed
	closing      bool
	broken       bool      // a write failed: nothing is written any more
	writingSince time.Time // start of the write under way; zero if none
	timer        *time.Timer
	timerArmed   bool
	wake         chan struct{}

	done chan struct{} // closed when run returns

	// Owned by the run goroutine.
	runEnc  encoding // enc as of the batch being written
	buf     []byte
	scratch []byte // one chunk's raw bytes
	snap    []byte // a replacement's raw bytes, kept once a client fell behind
	piece   int    // bytes per write to the peer
}

type streamKey struct{ session, terminal string }

// stream is one terminal's output as this writer follows it.
type stream struct {
	key      streamKey
	source   OutputSource
	follower OutputFollower
	enc      outputEncoder
	queued   atomic.Bool // in writer.dirty, or about to be
	closed   atomic.Bool // no longer followed: nothing more is sent
	// announced is guarded by writer.mu: an update of the terminal was
	// taken for writing.
	announced bool

	// Owned by the run goroutine.
	started bool  // its first update was written
	sent    int64 // offset of the next byte to send
}

// newWriter starts a writer on out. Call close to stop it.
func newWriter(out io.Writer, log *slog.Logger, stallTimeout time.Duration) *writer {
	if stallTimeout <= 0 {
		stallTimeout = DefaultStallTimeout
	}
	w := &writer{
		out:          out,
		log:          log,
		enc:          acpV2{},
		stallTimeout: stallTimeout,
		queue:        newControlQueue(),
		streams:      make(map[streamKey]*stream),
		wake:         make(chan struct{}, 1),
		done:         make(chan struct{}),
		scratch:      make([]byte, maxChunk),
		piece:        64 << 10,
	}
	go w.run()
	return w
}

// setEncoding makes the writer encode with enc what is queued from now
// on; a connection sets it once, before any session update (the v1 front,
// at initialize). The run goroutine takes enc with each batch.
func (w *writer) setEncoding(enc encoding) {
	w.mu.Lock()
	w.enc = enc
	w.mu.Unlock()
}

// send queues one complete JSON-RPC message (without newline).
func (w *writer) send(msg []byte) {
	w.mu.Lock()
	if !w.closing {
		w.queue.addLine(msg)
	}
	w.mu.Unlock()
	w.poke()
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

// update queues a session/update notification.
func (w *writer) update(sessionID string, update acp.Update) {
	w.mu.Lock()
	if !w.closing {
		w.queue.addUpdate(sessionID, update)
		w.dropFinished()
	}
	w.mu.Unlock()
	w.poke()
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
			s.follower.Hold(w.holding())
			w.streams[key] = s
		}
		w.queue.addTerminal(sessionID, u, s, mode)
		w.dropFinished()
	}
	w.mu.Unlock()
	w.poke()
}

// holding reports whether the writer holds its sources; w.mu is held.
// (Closing does not let go: no stream starts once it is set, and the last
// pass sends what the held ones have.)
func (w *writer) holding() bool { return !w.queue.stalled && !w.broken }

// holdAll makes every source follow holding(); w.mu is held.
func (w *writer) holdAll() {
	on := w.holding()
	for _, s := range w.streams {
		s.follower.Hold(on)
	}
}

// dropFinished drops, while the peer is stalled, the finished work it
// never heard of beyond what the queue keeps; w.mu is held.
func (w *writer) dropFinished() {
	for _, s := range w.queue.dropFinished() {
		w.unfollow(s)
	}
}

// unfollow stops following s: nothing more of it is sent, nor held back;
// w.mu is held.
func (w *writer) unfollow(s *stream) {
	s.closed.Store(true)
	s.follower.Stop()
	if w.streams[s.key] == s {
		delete(w.streams, s.key)
	}
}

// release stops following the terminals of session: their output is no
// longer streamed, nor held back for this peer.
func (w *writer) release(session string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, s := range w.streams {
		if key.session == session {
			w.unfollow(s)
		}
	}
}

func (w *writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
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
	w.poke()
}

// close writes everything queued, stops the writer and waits for it.
// Updates queued from then on are dropped.
func (w *writer) close() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.poke()
	<-w.done
}

func (w *writer) run() {
	defer close(w.done)
	defer w.stopAll()
	var batch []*entry
	var dirty []*stream
	for {
		w.mu.Lock()
		batch = w.queue.take(batch[:0])
		dirty, w.dirty = w.dirty, dirty[:0]
		closing := w.closing
		w.runEnc = w.enc
		w.mu.Unlock()

		for i, e := range batch {
			w.writeEntry(e)
			batch[i] = nil
		}
		if closing {
			// The last pass: what was queued, and every terminal's output
			// up to now. A terminal that still writes cannot hold close.
			for _, s := range w.followed() {
				if s.started && !s.closed.Load() {
					w.catchUp(s)
				}
			}
			w.flush()
			return
		}
		for i, s := range dirty {
			w.writeChunk(s)
			dirty[i] = nil
		}
		if len(batch) == 0 && len(dirty) == 0 {
			w.flush()
			<-w.wake
		}
	}
}

func (w *writer) followed() []*stream {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*stream, 0, len(w.streams))
	for _, s := range w.streams {
		out = append(out, s)
	}
	return out
}

// stopAll lets go of every source: a connection that is gone holds
// nothing back.
func (w *writer) stopAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.streams {
		w.unfollow(s)
	}
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (w *writer) writeEntry(e *entry) {
	switch {
	case e.line != nil:
		w.line(e.line)
	case e.stream != nil:
		w.writeTerminalUpdate(e)
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
		w.unfollow(s)
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
// waiting, after the other dirty terminals.
func (w *writer) writeChunk(s *stream) {
	s.queued.Store(false) // before reading: a write from now on marks it again
	if s.closed.Load() || !s.started {
		return // a stream starts with its first update, which marks it
	}
	w.sendChunk(s)
	if s.source.Total() > s.sent {
		w.markDirty(s)
	}
}

// sendChunk writes one chunk of s, or a replacement if bytes were
// overwritten before they could be sent. It reports whether it made
// progress.
func (w *writer) sendChunk(s *stream) bool {
	n, start := s.source.ReadAt(w.scratch, s.sent)
	if start > s.sent {
		w.replace(s, nil)
		return true
	}
	if n == 0 {
		return false
	}
	w.buf = s.enc.appendChunk(w.buf, w.scratch[:n])
	s.sent = start + int64(n)
	s.follower.Taken(s.sent)
	w.maybeFlush()
	return true
}

// replace replaces the client's copy of s with what the source holds: for
// u (a client that attaches), or alone after bytes were overwritten before
// a client that fell behind could get them. The line is appended in place,
// as chunks are: catching up must not cost more than keeping up. The
// source is copied in one go (into a buffer kept for the next time) so
// that the replacement is consistent while the PTY writes on.
func (w *writer) replace(s *stream, u *acp.TerminalUpdate) {
	var end int64
	w.snap, end = s.source.AppendSnapshot(w.snap[:0])
	base := s.sent // what the client has
	if u != nil {
		base = 0 // an attaching client has nothing
	}
	dropped := end - int64(len(w.snap)) - base
	buf, err := s.enc.appendReplacement(w.buf, u, w.snap, dropped)
	if err != nil {
		w.log.Error("encode terminal output", "terminal", s.key.terminal, "err", err)
		return
	}
	w.buf = buf
	s.sent = end
	s.follower.Taken(end)
	w.maybeFlush()
}

func (w *writer) writeUpdate(session string, update acp.Update) {
	buf, err := w.runEnc.appendUpdate(w.buf, session, update)
	if err != nil {
		w.log.Error("encode session/update", "session", session, "err", err)
		return
	}
	w.buf = buf
	w.maybeFlush()
}

func (w *writer) line(b []byte) {
	w.buf = append(w.buf, b...)
	w.buf = append(w.buf, '\n')
	w.maybeFlush()
}

func (w *writer) maybeFlush() {
	if len(w.buf) >= flushAt {
		w.flush()
	}
}

// flush writes the buffer in pieces and watches each: a write that
// accepts nothing for the stall timeout marks the peer stalled. A piece
// is small enough for a slow reader to take within a fraction of the
// timeout (it halves when a write takes an eighth of it, and doubles up to
// flushAt when writes are quick), so a client that reads slowly is not
// mistaken for a stalled one.
func (w *writer) flush() {
	for b := w.buf; len(b) > 0 && !w.broken; {
		k := min(len(b), w.piece)
		start := w.writing()
		_, err := w.out.Write(b[:k])
		took := time.Since(start)
		w.wrote(err)
		b = b[k:]
		switch {
		case took > w.stallTimeout/8:
			w.piece = max(w.piece/2, minPiece)
		case took < w.stallTimeout/64:
			w.piece = min(w.piece*2, flushAt)
		}
	}
	w.buf = w.buf[:0]
}

// writing notes that a write to the peer starts now.
func (w *writer) writing() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	w.writingSince = now
	if !w.timerArmed && !w.queue.stalled {
		w.armTimer(w.stallTimeout)
	}
	return now
}

// wrote notes that a write to the peer returned: it made progress, or the
// peer is gone.
func (w *writer) wrote(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writingSince = time.Time{}
	switch {
	case err != nil:
		w.broken = true
		w.log.Warn("client output closed; dropping further messages", "err", err)
		w.holdAll()
	case w.queue.stalled:
		w.queue.stalled = false
		w.log.Info("client reads again; holding terminal output back for it")
		w.holdAll()
	}
}

// armTimer makes checkStall run after d; w.mu is held.
func (w *writer) armTimer(d time.Duration) {
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.checkStall)
	} else {
		w.timer.Reset(d)
	}
	w.timerArmed = true
}

// checkStall runs on the stall timer: a write under way for the stall
// timeout marks the peer stalled.
func (w *writer) checkStall() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timerArmed = false
	if w.writingSince.IsZero() || w.queue.stalled || w.broken {
		return
	}
	if left := w.stallTimeout - time.Since(w.writingSince); left > 0 {
		w.armTimer(left)
		return
	}
	w.queue.stalled = true
	w.log.Info("client accepted nothing for the stall timeout; terminal output is no longer held back for it", "timeout", w.stallTimeout)
	w.holdAll()
	w.dropFinished()
}
