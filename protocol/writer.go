package protocol

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
)

// maxChunk is the most terminal output one terminal_output_chunk carries.
const maxChunk = 64 << 10

// flushAt is how much encoded output the writer gathers before it writes
// even though more is waiting.
const flushAt = 256 << 10

// A writer is the only thing that writes to a connection. Control messages
// (responses, requests, session updates) go out in the order they were
// queued; terminal output is read from each terminal's OutputSource when the
// writer gets to it, up to maxChunk at a time, taking terminals in turn. So
// at low rates a byte goes out at once, at high rates chunks grow, and a
// slow peer costs nothing but the sources: nothing queues per byte.
//
// Ordering: a terminal's output is streamed only after the first
// terminal update queued with its source, and all of it that was written
// before a later terminal update of the same terminal goes out before that
// update (see OutputMode).
type writer struct {
	out io.Writer
	log *slog.Logger

	mu      sync.Mutex // guards the fields up to wake
	queue   []any      // []byte lines, *sessionUpdate or *terminalUpdate
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

// terminalUpdate is a terminal_update queued with the terminal's output.
type terminalUpdate struct {
	session string
	update  *TerminalUpdate
	source  OutputSource
	mode    OutputMode
}

type streamKey struct{ session, terminal string }

// stream is one terminal's output as this writer follows it.
type stream struct {
	source OutputSource
	queued atomic.Bool // in writer.dirty, or about to be

	// Owned by the run goroutine.
	key     streamKey
	head    []byte // a session/update notification up to the update kind
	tid     []byte // the terminal id, quoted
	prefix  []byte // the chunk notification up to the data
	sent    int64  // ring offset of the next byte to send
	unwatch func()
	closed  bool
}

// newWriter starts a writer on out. Call close to stop it.
func newWriter(out io.Writer, log *slog.Logger) *writer {
	w := &writer{
		out:     out,
		log:     log,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		streams: make(map[streamKey]*stream),
		scratch: make([]byte, maxChunk),
	}
	go w.run()
	return w
}

// send queues one complete JSON-RPC message (without newline).
func (w *writer) send(msg []byte) { w.enqueue(msg) }

// update queues a session/update notification.
func (w *writer) update(sessionID string, update any) {
	w.enqueue(&sessionUpdate{session: sessionID, update: update})
}

// updateTerminal queues a terminal_update ordered with the terminal's
// output from source, as mode says.
func (w *writer) updateTerminal(sessionID string, u *TerminalUpdate, source OutputSource, mode OutputMode) {
	w.enqueue(&terminalUpdate{session: sessionID, update: u, source: source, mode: mode})
}

func (w *writer) enqueue(item any) {
	w.mu.Lock()
	w.queue = append(w.queue, item)
	w.mu.Unlock()
	w.poke()
}

func (w *writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// markDirty schedules s for sending. It runs on PTY reader goroutines and
// never blocks.
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
func (w *writer) close() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.poke()
	<-w.done
}

func (w *writer) run() {
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

func (w *writer) writeItem(item any) {
	switch m := item.(type) {
	case []byte:
		w.line(m)
	case *sessionUpdate:
		w.notify(m.session, m.update)
	case *terminalUpdate:
		w.writeTerminalUpdate(m)
	}
}

func (w *writer) writeTerminalUpdate(m *terminalUpdate) {
	key := streamKey{m.session, m.update.TerminalID}
	s := w.streams[key]
	switch {
	case s == nil:
		s = w.open(key, m.source)
	case m.mode == StreamOutput: // a replacement supersedes what was not sent yet
		w.catchUp(s)
	}
	var update any = m.update
	if m.mode == ReplaceOutput {
		var end int64
		w.snap, end = m.source.AppendSnapshot(w.snap[:0])
		update = withOutput{m.update, &terminalOutput{Data: base64.StdEncoding.EncodeToString(w.snap)}}
		s.sent = end
	}
	w.notify(m.session, update)
	if m.update.ExitStatus != nil {
		w.closeStream(s)
	}
}

// withOutput is a terminal_update with a replacement of the output.
type withOutput struct {
	*TerminalUpdate
	Output *terminalOutput `json:"output,omitempty"`
}

func (w *writer) open(key streamKey, source OutputSource) *stream {
	s := &stream{source: source, key: key}
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
	s.unwatch = source.Watch(func() { w.markDirty(s) })
	if source.Total() > 0 {
		w.markDirty(s)
	}
	return s
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

func (w *writer) closeStream(s *stream) {
	s.unwatch()
	s.closed = true
	delete(w.streams, s.key)
}

func (w *writer) unwatchAll() {
	for _, s := range w.streams {
		s.unwatch()
	}
}

// writeChunk sends the next piece of s and reschedules it if more is
// waiting, after the other dirty terminals.
func (w *writer) writeChunk(s *stream) {
	s.queued.Store(false) // before reading: a write from now on marks it again
	if s.closed {
		return
	}
	w.sendChunk(s)
	if s.source.Total() > s.sent {
		w.markDirty(s)
	}
}

// sendChunk writes one chunk of s, or a replacement snapshot if bytes were
// overwritten before they could be sent. It reports whether it made
// progress.
func (w *writer) sendChunk(s *stream) bool {
	n, start := s.source.ReadAt(w.scratch, s.sent)
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
// than keeping up. The source is copied in one go (into a buffer kept for
// the next time) so that the snapshot is consistent while the PTY writes on.
func (w *writer) snapshot(s *stream) {
	var end int64
	w.snap, end = s.source.AppendSnapshot(w.snap[:0])
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
	Params  sessionNotification `json:"params"`
}

func (w *writer) notify(session string, update any) {
	b, err := json.Marshal(notification{"2.0", "session/update", sessionNotification{session, update}})
	if err != nil {
		w.log.Error("marshal session/update", "err", err)
		return
	}
	w.line(b)
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

func (w *writer) flush() {
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
