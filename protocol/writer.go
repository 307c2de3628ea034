package protocol

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"shellagent/outputbuf"
)

// MaxChunk is the most terminal output one terminal_output_chunk carries.
const MaxChunk = 64 << 10

// flushAt is how much encoded output the writer gathers before it writes
// even though more is waiting.
const flushAt = 256 << 10

// A Writer is the only thing that writes to a connection. Control messages
// (responses, requests, session updates) go out in the order they were
// queued; terminal output is read from each terminal's ring when the writer
// gets to it, up to MaxChunk at a time, taking terminals in turn. So at low
// rates a byte goes out at once, at high rates chunks grow, and a slow peer
// costs nothing but the rings: nothing queues per byte.
//
// Ordering: a terminal's output is streamed only after the first
// TerminalUpdate that names its ring, and all of it that was written before a
// later TerminalUpdate of the same terminal goes out before that update.
type Writer struct {
	out io.Writer
	log *slog.Logger

	mu      sync.Mutex // guards the fields up to wake
	queue   []any      // []byte lines, or *sessionUpdate
	dirty   []*stream
	closing bool
	wake    chan struct{}

	done chan struct{} // closed when run returns

	// Owned by the run goroutine.
	streams map[streamKey]*stream
	buf     []byte
	scratch []byte // one chunk's raw bytes
	snap    []byte // a snapshot's raw bytes, kept once a client fell behind
	broken  bool
}

type sessionUpdate struct {
	session string
	update  any
}

type streamKey struct{ session, terminal string }

// stream is one terminal's output as this writer follows it.
type stream struct {
	ring   *outputbuf.Ring
	queued atomic.Bool // in Writer.dirty, or about to be

	// Owned by the run goroutine.
	key     streamKey
	head    []byte // a session/update notification up to the update kind
	tid     []byte // the terminal id, quoted
	prefix  []byte // the chunk notification up to the data
	sent    int64  // ring offset of the next byte to send
	unwatch func()
	closed  bool
}

// NewWriter starts a writer on out. Call Close to stop it.
func NewWriter(out io.Writer, log *slog.Logger) *Writer {
	w := &Writer{
		out:     out,
		log:     log,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		streams: make(map[streamKey]*stream),
		scratch: make([]byte, MaxChunk),
	}
	go w.run()
	return w
}

// Send queues one complete JSON-RPC message (without newline).
func (w *Writer) Send(msg []byte) { w.enqueue(msg) }

// Update queues a session/update notification. A *TerminalUpdate with a
// Source is ordered with that terminal's output; see Writer.
func (w *Writer) Update(sessionID string, update any) {
	w.enqueue(&sessionUpdate{session: sessionID, update: update})
}

func (w *Writer) enqueue(item any) {
	w.mu.Lock()
	w.queue = append(w.queue, item)
	w.mu.Unlock()
	w.poke()
}

func (w *Writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// markDirty schedules s for sending. It runs on PTY reader goroutines and
// never blocks.
func (w *Writer) markDirty(s *stream) {
	if !s.queued.CompareAndSwap(false, true) {
		return
	}
	w.mu.Lock()
	w.dirty = append(w.dirty, s)
	w.mu.Unlock()
	w.poke()
}

// Close writes everything queued, stops the writer and waits for it.
func (w *Writer) Close() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.poke()
	<-w.done
}

func (w *Writer) run() {
	defer close(w.done)
	defer w.unwatchAll()
	var queue []any
	var dirty []*stream
	for {
		w.mu.Lock()
		queue, w.queue = w.queue, queue[:0]
		dirty, w.dirty = w.dirty, dirty[:0]
		closing := w.closing
		w.mu.Unlock()

		for i, item := range queue {
			w.writeItem(item)
			queue[i] = nil
		}
		if closing {
			// The last pass: what was queued, and every terminal's output
			// up to now. A terminal that still writes cannot hold Close.
			for _, s := range w.streams {
				w.catchUp(s)
			}
			w.flush()
			return
		}
		for i, s := range dirty {
			w.writeChunk(s)
			dirty[i] = nil
		}
		if len(queue) == 0 && len(dirty) == 0 {
			w.flush()
			<-w.wake
		}
	}
}

func (w *Writer) writeItem(item any) {
	switch m := item.(type) {
	case []byte:
		w.line(m)
	case *sessionUpdate:
		if tu, ok := m.update.(*TerminalUpdate); ok && tu.Source != nil {
			w.writeTerminalUpdate(m.session, tu)
			return
		}
		w.notify(m.session, m.update)
	}
}

func (w *Writer) writeTerminalUpdate(session string, u *TerminalUpdate) {
	key := streamKey{session, u.TerminalID}
	s := w.streams[key]
	switch {
	case s == nil:
		s = w.open(key, u.Source)
	case !u.Snapshot: // a snapshot replaces what was not sent yet
		w.catchUp(s)
	}
	if u.Snapshot {
		data, end := u.Source.Snapshot()
		u.Output = &TerminalOutput{Data: base64.StdEncoding.EncodeToString(data)}
		s.sent = end
	}
	w.notify(session, u)
	if u.ExitStatus != nil {
		w.closeStream(s)
	}
}

func (w *Writer) open(key streamKey, ring *outputbuf.Ring) *stream {
	s := &stream{ring: ring, key: key}
	sid, _ := json.Marshal(key.session)
	s.tid, _ = json.Marshal(key.terminal)
	s.head = append(s.head, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`...)
	s.head = append(s.head, sid...)
	s.head = append(s.head, `,"update":{"sessionUpdate":`...)
	s.prefix = append(s.prefix, s.head...)
	s.prefix = append(s.prefix, `"terminal_output_chunk","terminalId":`...)
	s.prefix = append(s.prefix, s.tid...)
	s.prefix = append(s.prefix, `,"data":"`...)
	w.streams[key] = s
	s.unwatch = ring.Watch(func() { w.markDirty(s) })
	if ring.Total() > 0 {
		w.markDirty(s)
	}
	return s
}

// catchUp sends everything s's ring holds beyond what was sent.
func (w *Writer) catchUp(s *stream) {
	target := s.ring.Total()
	for s.sent < target {
		if !w.send(s) {
			return
		}
	}
}

func (w *Writer) closeStream(s *stream) {
	s.unwatch()
	s.closed = true
	delete(w.streams, s.key)
}

func (w *Writer) unwatchAll() {
	for _, s := range w.streams {
		s.unwatch()
	}
}

// writeChunk sends the next piece of s and reschedules it if more is
// waiting, after the other dirty terminals.
func (w *Writer) writeChunk(s *stream) {
	s.queued.Store(false) // before reading: a write from now on marks it again
	if s.closed {
		return
	}
	w.send(s)
	if s.ring.Total() > s.sent {
		w.markDirty(s)
	}
}

// send writes one chunk of s, or a replacement snapshot if bytes were
// overwritten before they could be sent. It reports whether it made
// progress.
func (w *Writer) send(s *stream) bool {
	n, start := s.ring.ReadAt(w.scratch, s.sent)
	if start > s.sent {
		w.snapshot(s)
		return true
	}
	if n == 0 {
		return false
	}
	w.buf = append(w.buf, s.prefix...)
	w.buf = base64.StdEncoding.AppendEncode(w.buf, w.scratch[:n])
	w.buf = append(w.buf, "\"}}}\n"...)
	s.sent = start + int64(n)
	w.maybeFlush()
	return true
}

// snapshot replaces the client's copy of s with what the ring holds, after
// bytes were overwritten before a peer that fell behind could get them. The
// line is appended in place, as chunks are: catching up must not cost more
// than keeping up. The ring is copied in one go (into a buffer kept for the
// next time) so that the snapshot is consistent while the PTY writes on.
func (w *Writer) snapshot(s *stream) {
	var end int64
	w.snap, end = s.ring.AppendSnapshot(w.snap[:0])
	dropped := end - int64(len(w.snap)) - s.sent
	w.buf = append(w.buf, s.head...)
	w.buf = append(w.buf, `"terminal_update","terminalId":`...)
	w.buf = append(w.buf, s.tid...)
	w.buf = append(w.buf, `,"output":{"data":"`...)
	w.buf = base64.StdEncoding.AppendEncode(w.buf, w.snap)
	w.buf = append(w.buf, `","_meta":{"shellagent":{"droppedBytes":`...)
	w.buf = strconv.AppendInt(w.buf, dropped, 10)
	w.buf = append(w.buf, "}}}}}}\n"...)
	s.sent = end
	w.maybeFlush()
}

type notification struct {
	JSONRPC string              `json:"jsonrpc"`
	Method  string              `json:"method"`
	Params  SessionNotification `json:"params"`
}

func (w *Writer) notify(session string, update any) {
	b, err := json.Marshal(notification{"2.0", "session/update", SessionNotification{session, update}})
	if err != nil {
		w.log.Error("marshal session/update", "err", err)
		return
	}
	w.line(b)
}

func (w *Writer) line(b []byte) {
	w.buf = append(w.buf, b...)
	w.buf = append(w.buf, '\n')
	w.maybeFlush()
}

func (w *Writer) maybeFlush() {
	if len(w.buf) >= flushAt {
		w.flush()
	}
}

func (w *Writer) flush() {
	if len(w.buf) == 0 {
		return
	}
	if !w.broken {
		if _, err := w.out.Write(w.buf); err != nil {
			w.broken = true
			w.log.Warn("client output closed; dropping further messages", "err", err)
		}
	}
	w.buf = w.buf[:0]
}
