package supervisor

import (
	"sync"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/settings"
)

// An actor is the goroutine that owns a session's state (see the package's
// Concurrency section). It ends once the session has closed; an entry that
// comes after that runs on the goroutine that brings it, under late.
type actor struct {
	st    *state
	inbox chan mail     // the entries to run, in order
	ended chan struct{} // closed once the actor has stopped reading inbox
	late  sync.Mutex    // owns st once ended is closed

	shown  sync.Mutex    // guards view, aside and slowed: the actor's hand-off to peek
	view   *snapshot     // what the state was when the actor last published it
	aside  bool          // the current entry is doing slow work: view is what it was when that began
	slowed chan struct{} // closed when the current entry starts slow work
}

// maxQueued is how many entries may wait for a session's actor before the
// next one waits for room.
const maxQueued = 1024

// mail is an entry: f (nil for a read), then done closed, if any.
type mail struct {
	f    func(st *state)
	done chan struct{}
}

// snapshot is what peek reads: never changed once published.
type snapshot struct {
	title     string
	updatedAt time.Time
	settings  settings.Settings
	idle      bool     // no turn holds or waits for the foreground, and the session said idle
	attached  bool     // a connection is attached
	terminals []string // the ids of the terminals that run, never nil
}

func newActor(st *state) *actor {
	a := &actor{st: st, inbox: make(chan mail, maxQueued), ended: make(chan struct{}), slowed: make(chan struct{})}
	a.view = a.snapshot()
	go a.run()
	return a
}

// run is the actor's goroutine.
func (a *actor) run() {
	for e := range a.inbox {
		a.step(e)
		if a.st.life == sessionClosed {
			break
		}
	}
	close(a.ended)
	a.runLate()
}

// step runs e, settles, and publishes what the state now is.
func (a *actor) step(e mail) {
	if e.f != nil {
		e.f(a.st)
	}
	a.st.settle()
	a.publish(false)
	if e.done != nil {
		close(e.done)
	}
}

// do is the only way to change a session's state: f runs on the actor, in
// turn, then settle. do returns once f is queued, and waits only while
// maxQueued entries wait already. Never call it from the actor: run there
// inline what it would queue.
func (a *actor) do(f func(st *state)) { a.send(mail{f: f}) }

// doWait runs f as do does and returns once f has run and settled: for
// the ways in whose caller wants what f found (an answer that goes out at
// once). It waits for slow work the session is doing. Never call it from
// the actor.
func (a *actor) doWait(f func(st *state)) {
	done := make(chan struct{})
	a.send(mail{f: f, done: done})
	<-done
}

func (a *actor) send(e mail) {
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
func (a *actor) runLate() {
	a.late.Lock()
	defer a.late.Unlock()
	a.drain()
}

// drain runs the entries queued, in order. Under late.
func (a *actor) drain() {
	for {
		select {
		case e := <-a.inbox:
			a.step(e)
		default:
			return
		}
	}
}

// peek returns what the state is once the entries that came before have
// run, without waiting for slow work: while the session does some, it
// returns what the state was when that began. It serves the reads that
// answer at once (session/list, the settings, the kill grace).
func (a *actor) peek() *snapshot {
	a.shown.Lock()
	v, aside, slowed := a.view, a.aside, a.slowed
	a.shown.Unlock()
	if aside {
		return v
	}
	done := make(chan struct{})
	select {
	case a.inbox <- mail{done: done}:
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
	return a.view
}

// slow announces that the current entry is about to do slow work: what
// the state is now is published, and the reads that wait (peek) are
// answered with it. On the actor.
func (a *actor) slow() { a.publish(true) }

// publish makes what the state is now the view, and closes slowed if the
// current entry goes aside to slow work. On the actor (or under late).
func (a *actor) publish(aside bool) {
	v := a.snapshot()
	a.shown.Lock()
	defer a.shown.Unlock()
	a.view = v
	switch {
	case aside && !a.aside:
		a.aside = true
		close(a.slowed)
	case !aside && a.aside:
		a.aside = false
		a.slowed = make(chan struct{})
	}
}

func (a *actor) snapshot() *snapshot {
	st := a.st
	live := []string{}
	for _, t := range st.work.liveTerminals() {
		live = append(live, t.id)
	}
	return &snapshot{
		title: st.title, updatedAt: st.out.updatedAt, settings: st.settings,
		idle:     !st.turns.busy() && !st.turns.waiting() && st.fgState == acp.StateIdle,
		attached: st.out.client != nil, terminals: live,
	}
}

// The ways a Session's methods reach its actor: a Session holds its actor
// by name, so that only these four of the actor's methods are the
// Session's.

// do queues f for the session's actor (actor.do).
func (s *Session) do(f func(st *state)) { s.actor.do(f) }

// doWait runs f on the session's actor and waits for it (actor.doWait).
func (s *Session) doWait(f func(st *state)) { s.actor.doWait(f) }

// peek returns what the session's state is (actor.peek).
func (s *Session) peek() *snapshot { return s.actor.peek() }

// slow announces slow work of the current entry (actor.slow). On the
// actor.
func (s *Session) slow() { s.actor.slow() }
