package supervisor

import (
	"sync"
	"sync/atomic"
	"time"
)

// When the watch of a terminal looks whether its program waits for input.
const (
	// quietBefore is how long a terminal's output must have been quiet
	// before a look: a program that printed a prompt and waits has
	// printed nothing since.
	quietBefore = 300 * time.Millisecond
	// maxLookGap bounds the back-off of looks at a terminal where nothing
	// happens, for a program that starts to read without printing first.
	maxLookGap = 5 * time.Second
)

// An inputWatch decides when to look whether a terminal's program waits
// for input, without looking at every terminal all the time: a look comes
// quietBefore after the terminal's output (or input typed into it) went
// quiet, and, while nothing happens, again after intervals that double up
// to maxLookGap. Activity brings the next look back to quietBefore after
// it. Looks run on the timer's goroutine with no lock held, one at a time.
//
// Cost: a terminal with output costs one timer event per quietBefore (it
// sees the activity and waits again) and an atomic swap per output write;
// a quiet live terminal costs one look (about 90 µs, see ptyio's
// BenchmarkInputWait) per maxLookGap once it has backed off, so 200 quiet
// terminals cost about 4 ms of CPU a second.
type inputWatch struct {
	look   func(*inputWatch)
	active atomic.Bool // output or input since the timer was last armed

	mu      sync.Mutex // guards the rest
	timer   *time.Timer
	gap     time.Duration // the delay the timer was last armed with
	looking bool
	stopped bool
}

func newInputWatch(look func(*inputWatch)) *inputWatch {
	return &inputWatch{look: look, gap: quietBefore}
}

// start arms the first look.
func (w *inputWatch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.timer = time.AfterFunc(w.gap, w.fire)
	}
}

// activity records output or input. It is called after every write of
// the terminal's output: it costs an atomic swap but the first time in a
// timer period.
func (w *inputWatch) activity() {
	if w.active.Swap(true) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped && !w.looking && w.timer != nil && w.gap > quietBefore {
		w.gap = quietBefore
		w.timer.Reset(w.gap)
	}
}

func (w *inputWatch) fire() {
	w.mu.Lock()
	if w.stopped || w.looking {
		w.mu.Unlock()
		return
	}
	if w.active.Swap(false) { // not quiet yet
		w.gap = quietBefore
		w.timer.Reset(w.gap)
		w.mu.Unlock()
		return
	}
	w.looking = true
	w.mu.Unlock()

	w.look(w)

	w.mu.Lock()
	defer w.mu.Unlock()
	w.looking = false
	if w.stopped {
		return
	}
	w.gap = min(2*w.gap, maxLookGap)
	if w.active.Load() {
		w.gap = quietBefore
	}
	w.timer.Reset(w.gap)
}

// stop ends the watch: no look starts after it returns.
func (w *inputWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}
