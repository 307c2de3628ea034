package protocol

import "sync/atomic"

type streamKey struct{ session, terminal string }

// stream is one terminal's output as a writer follows it.
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

	// Owned by the writer's run goroutine.
	started bool  // its first update was written
	sent    int64 // offset of the next byte to send
}

// A streamSet is the terminals a writer follows, by key: which of them
// hold their PTYs back for it, and letting them go. Its methods are
// called with writer.mu held.
type streamSet map[streamKey]*stream

// hold makes every source wait for the writer (on) or not.
func (m streamSet) hold(on bool) {
	for _, s := range m {
		s.follower.Hold(on)
	}
}

// stop stops following s: nothing more of it is sent, nor held back.
func (m streamSet) stop(s *stream) {
	s.closed.Store(true)
	s.follower.Stop()
	if m[s.key] == s {
		delete(m, s.key)
	}
}

// stopSession stops following the terminals of session.
func (m streamSet) stopSession(session string) {
	for key, s := range m {
		if key.session == session {
			m.stop(s)
		}
	}
}

// stopAll stops following every terminal.
func (m streamSet) stopAll() {
	for _, s := range m {
		m.stop(s)
	}
}

// list returns the streams followed, for use without writer.mu.
func (m streamSet) list() []*stream {
	streams := make([]*stream, 0, len(m))
	for _, s := range m {
		streams = append(streams, s)
	}
	return streams
}

// A wakeup wakes the writer's run goroutine: one pending wake-up at most,
// and poking never blocks.
type wakeup chan struct{}

func (c wakeup) poke() {
	select {
	case c <- struct{}{}:
	default:
	}
}
