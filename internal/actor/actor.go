// Package actor runs a piece of state on a goroutine of its own (an
// actor): the state's owner runs the work brought to it one entry at a
// time, in the order it came, and publishes a view of the state that reads
// which must answer at once use while the owner is busy with slow work.
// Package supervisor runs each session's state on one.
//
// The rules, which the methods' docs repeat where they apply:
//
//   - Entries run one at a time, in the order their Do (or DoWait) calls
//     queued them; each is followed by settle, then a new view is
//     published.
//   - The inbox holds MaxQueued entries; a Do that finds it full waits for
//     room, and for nothing else.
//   - The goroutine ends after the first entry once which closed reports
//     the state closed (Ended). The entries still queued then, and every
//     one that comes later, run on the goroutine that brings them, under
//     the actor's late mutex, in order, each followed by settle; from then
//     on that mutex owns the state.
//   - Peek answers once the entries that came before it have run, but
//     never waits for slow work: while an entry does some (Slow), it
//     answers with the view published when that began. DoWait waits
//     through slow work.
//
// Locks, in the order they may be taken: late (once the actor has ended),
// then shown, a leaf that guards the published view.
//
// All of it is in actor.go; example_test.go shows it at work.
package actor

import "sync"

// MaxQueued is how many entries may wait for an actor before the next Do
// waits for room.
const MaxQueued = 1024

// An Actor owns a state of type S and publishes views of it of type V.
// Its zero value is not usable: make one with New.
type Actor[S, V any] struct {
	st     S
	settle func(S)
	closed func(S) bool
	view   func(S) V

	inbox chan mail[S]
	ended chan struct{} // closed once the goroutine has stopped reading inbox
	late  sync.Mutex    // owns st once ended is closed

	shown     sync.Mutex    // guards published, aside and slowed: the hand-off to Peek
	published V             // what the state was when it was last published
	aside     bool          // the current entry does slow work: published is what it was when that began
	slowed    chan struct{} // closed when the current entry starts slow work
}

// mail is an entry: f (nil for Peek's), then done closed, if any.
type mail[S any] struct {
	f    func(S)
	done chan struct{}
}

// New makes the actor of st and starts its goroutine. settle runs after
// every entry, on the goroutine that runs the entry; closed is asked after
// each entry the goroutine runs, and ends it once it reports true; view
// makes what Peek returns, and must not keep a reference to what the state
// will change. view runs once here, on the calling goroutine, for the
// first view.
func New[S, V any](st S, settle func(S), closed func(S) bool, view func(S) V) *Actor[S, V] {
	a := &Actor[S, V]{
		st: st, settle: settle, closed: closed, view: view,
		inbox: make(chan mail[S], MaxQueued), ended: make(chan struct{}), slowed: make(chan struct{}),
	}
	a.published = view(st)
	go a.run()
	return a
}

// run is the actor's goroutine.
func (a *Actor[S, V]) run() {
	for e := range a.inbox {
		a.step(e)
		if a.closed(a.st) {
			break
		}
	}
	close(a.ended)
	a.runLate()
}

// step runs e, settles, and publishes what the state now is.
func (a *Actor[S, V]) step(e mail[S]) {
	if e.f != nil {
		e.f(a.st)
	}
	a.settle(a.st)
	a.publish(false)
	if e.done != nil {
		close(e.done)
	}
}

// Do queues f: f runs on the actor after every entry queued before it,
// then settle. Do returns once f is queued, and waits only while MaxQueued
// entries wait already. Once the actor has ended (Ended), f runs on the
// calling goroutine, under the late mutex, after the entries still queued,
// before Do returns. Never call it from an entry: run there inline what it
// would queue.
func (a *Actor[S, V]) Do(f func(S)) { a.send(mail[S]{f: f}) }

// DoWait runs f as Do does and returns once f has run and settled, so the
// caller may use what f found. It waits for slow work the actor is doing
// (Slow). Never call it from an entry.
func (a *Actor[S, V]) DoWait(f func(S)) {
	done := make(chan struct{})
	a.send(mail[S]{f: f, done: done})
	<-done
}

func (a *Actor[S, V]) send(e mail[S]) {
	select {
	case a.inbox <- e:
		select {
		case <-a.ended: // it may have come after the actor's last look
			a.runLate()
		default:
		}
	case <-a.ended:
		a.late.Lock()
		defer a.late.Unlock()
		a.drain()
		a.step(e)
	}
}

// runLate runs the entries that came once the actor had ended, in order.
func (a *Actor[S, V]) runLate() {
	a.late.Lock()
	defer a.late.Unlock()
	a.drain()
}

// drain runs the entries queued, in order. Under late.
func (a *Actor[S, V]) drain() {
	for {
		select {
		case e := <-a.inbox:
			a.step(e)
		default:
			return
		}
	}
}

// Peek returns the view of the state once the entries queued before it
// have run, without waiting for slow work: while an entry does some
// (Slow), it returns the view published when that began, at once. What
// it waits for is an entry of its own, which runs nothing but is settled
// like the others; it may wait for room in the inbox, as Do does. Never
// call it from an entry.
func (a *Actor[S, V]) Peek() V {
	a.shown.Lock()
	v, aside, slowed := a.published, a.aside, a.slowed
	a.shown.Unlock()
	if aside {
		return v
	}
	done := make(chan struct{})
	select {
	case a.inbox <- mail[S]{done: done}:
		select {
		case <-done:
		case <-slowed:
		case <-a.ended:
			a.runLate() // ours, if the actor had not run it
		}
	case <-slowed:
	case <-a.ended:
		a.runLate()
	}
	a.shown.Lock()
	defer a.shown.Unlock()
	return a.published
}

// Shown returns the view last published, at once: what the state was
// after the last entry that ended, or when the current one began slow
// work. It waits for nothing, so that a report of what the actor holds
// (a shutdown that ran out of time) comes even from an actor stuck in an
// entry. Anything Peek would wait for may have changed it since.
func (a *Actor[S, V]) Shown() V {
	a.shown.Lock()
	defer a.shown.Unlock()
	return a.published
}

// Slow announces that the current entry is about to do slow work: the view
// of the state as it is now is published, and Peek answers with it, at
// once, until the entry has ended (then settle runs and a new view is
// published). Call it only from an entry.
func (a *Actor[S, V]) Slow() { a.publish(true) }

// Ended returns a channel closed once the actor's goroutine has stopped
// reading its inbox: after the entry once which closed reported true.
func (a *Actor[S, V]) Ended() <-chan struct{} { return a.ended }

// publish makes what the state is now the published view, and closes
// slowed if the current entry goes aside to slow work. On the actor (or
// under late).
func (a *Actor[S, V]) publish(aside bool) {
	v := a.view(a.st)
	a.shown.Lock()
	defer a.shown.Unlock()
	a.published = v
	switch {
	case aside && !a.aside:
		a.aside = true
		close(a.slowed)
	case !aside && a.aside:
		a.aside = false
		a.slowed = make(chan struct{})
	}
}
