package replay

import (
	"errors"
	"io"
	"sync/atomic"
	"time"
)

// maxOwn is how many answers of the player's own (to messages the
// transcript does not have) may wait to be written; more are dropped, so
// that a client that floods and does not read grows nothing.
const maxOwn = 1024

// errNotReading is what close returns when the client took nothing for the
// flush timeout.
var errNotReading = errors.New("the client is not reading; exiting without sending everything")

// An outbox writes lines to the client from a goroutine of its own. Its
// queue holds every line of the transcript and maxOwn more, so send never
// blocks: the transcript's lines are each sent at most once, and sendOwn
// drops an answer when maxOwn lines are waiting.
type outbox struct {
	lines   chan []byte
	written atomic.Int64  // lines written, for close's progress check
	broken  chan struct{} // closed when a write has failed
	err     error         // the failed write's error; set before broken is closed
	done    chan struct{} // closed when run returns
}

func newOutbox(w io.Writer, transcriptLines int) *outbox {
	o := &outbox{lines: make(chan []byte, transcriptLines+maxOwn), broken: make(chan struct{}), done: make(chan struct{})}
	go o.run(w)
	return o
}

// run writes the lines until the queue is closed; after a failed write it
// drops them.
func (o *outbox) run(w io.Writer) {
	defer close(o.done)
	for line := range o.lines {
		if o.failed() {
			continue
		}
		if _, err := w.Write(line); err != nil {
			o.err = err
			close(o.broken)
			continue
		}
		o.written.Add(1)
	}
}

// send queues a line of the transcript.
func (o *outbox) send(msg []byte) {
	o.lines <- append(append(make([]byte, 0, len(msg)+1), msg...), '\n')
}

// sendOwn queues an answer of the player's own, unless maxOwn lines are
// waiting.
func (o *outbox) sendOwn(msg []byte) {
	if len(o.lines) < maxOwn {
		o.send(msg)
	}
}

// failed reports whether a write has failed.
func (o *outbox) failed() bool {
	select {
	case <-o.broken:
		return true
	default:
		return false
	}
}

// close waits for the lines queued to be written, as long as the client
// takes one every timeout, and returns the error of a failed write.
func (o *outbox) close(timeout time.Duration) error {
	close(o.lines)
	t := time.NewTicker(timeout)
	defer t.Stop()
	last := o.written.Load()
	for {
		select {
		case <-o.done:
			if o.failed() {
				return o.err
			}
			return nil
		case <-t.C:
			if n := o.written.Load(); n != last {
				last = n
				continue
			}
			if o.failed() {
				return o.err
			}
			return errNotReading
		}
	}
}
