package terminput

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"shellagent/outputbuf"
	"shellagent/ptyio"
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

// An Input is what a terminal knows of its input: the watch that looks
// for its program waiting for input, and the waits noticed. Its methods
// but Stop belong to the session's actor (Typed, Noticed); the watch has
// a lock of its own. A nil *Input is a terminal that is not watched.
type Input struct {
	looker *looker
	follow *outputbuf.Follower // tells the watch about output
	// noticed is the last wait a notice went out for; typedSince says
	// that input was typed after it.
	noticed    *ptyio.InputWait
	typedSince bool
}

// Watch starts watching the terminal of proc, whose output is ring, for
// its program waiting for input. found is called with each wait seen, on
// a timer's goroutine with no lock held, one call at a time: it must
// enter the session's actor to act on it (Noticed). Looks stop for good
// where the system cannot tell (errors.ErrUnsupported).
func Watch(ring *outputbuf.Ring, proc ptyio.Process, found func(ptyio.InputWait)) *Input {
	w := &looker{gap: quietBefore}
	w.look = func() {
		wait, err := proc.InputWait()
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			w.stop() // never supported here: stop looking
		case err != nil, wait.Pid == 0:
			// the terminal ended meanwhile, or nobody waits
		default:
			found(wait)
		}
	}
	in := &Input{looker: w, follow: ring.Follow(w.activity)}
	w.start()
	return in
}

// Stop ends the watch of a terminal that exited and lets go of it: no
// look starts after it returns. Any goroutine may call it.
func (in *Input) Stop() {
	in.looker.stop()
	in.follow.Stop()
}

// Typed records, on the actor, that input was typed into the terminal:
// the program may read it and wait again, which is a new wait. It does
// nothing on a nil Input.
func (in *Input) Typed() {
	if in != nil {
		in.typedSince = true
		in.looker.activity()
	}
}

// Noticed reports, on the actor, whether wait is to be noticed, and
// records it if so. A wait is noticed when none was before, or when input
// was typed since and the wait is another (the program read, then waits
// again): a program that waits again without being given input (a read
// with a timeout, in a loop) is not noticed again.
func (in *Input) Noticed(wait ptyio.InputWait) bool {
	if in.noticed != nil && (!in.typedSince || *in.noticed == wait) {
		return false
	}
	in.noticed, in.typedSince = &wait, false
	return true
}

// A looker decides when to look whether a terminal's program waits
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
type looker struct {
	look   func()
	active atomic.Bool // output or input since the timer was last armed

	mu      sync.Mutex // guards the rest
	timer   *time.Timer
	gap     time.Duration // the delay the timer was last armed with
	looking bool
	stopped bool
}

// start arms the first look.
func (w *looker) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.timer = time.AfterFunc(w.gap, w.fire)
	}
}

// activity records output or input. It is called after every write of
// the terminal's output: it costs an atomic swap but the first time in a
// timer period.
func (w *looker) activity() {
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

func (w *looker) fire() {
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

	w.look()

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
func (w *looker) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}
