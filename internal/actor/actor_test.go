package actor_test

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"shellagent/internal/actor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counter is the state the tests run on an actor.
type counter struct {
	n       int
	settled int // how many times settle ran
	log     []string
	closed  bool
}

// view is what Peek returns of a counter.
type view struct{ n, settled int }

// start makes a counter's actor, which the test's cleanup ends.
func start(t *testing.T) (*counter, *actor.Actor[*counter, view]) {
	t.Helper()
	c := &counter{}
	a := actor.New(c,
		func(c *counter) { c.settled++ },
		func(c *counter) bool { return c.closed },
		func(c *counter) view { return view{c.n, c.settled} })
	t.Cleanup(func() {
		a.Do(func(c *counter) { c.closed = true })
		<-a.Ended()
	})
	return c, a
}

// gate returns an entry that holds the actor until release is called,
// at the latest when the test ends (before the actor's end, so that a
// failed test does not hang).
func gate(t *testing.T) (hold func(*counter), release func()) {
	ch := make(chan struct{})
	release = sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	return func(*counter) { <-ch }, release
}

// goDo runs f on a goroutine of its own, and returns a channel closed
// when it has returned.
func goDo(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

// stillWaiting fails the test if done is closed within a short while.
func stillWaiting(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("%s returned; want it to wait", what)
	case <-time.After(50 * time.Millisecond):
	}
}

// returns fails the test if done is not closed soon.
func returns(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

// TestEntriesRunInOrderEachSettled: the entries of each goroutine run in
// the order it queued them, one at a time, each followed by settle.
func TestEntriesRunInOrderEachSettled(t *testing.T) {
	c, a := start(t)
	const senders, each = 4, 200
	type seen struct{ sender, i, settledBefore int }
	var log []seen
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				a.Do(func(c *counter) { log = append(log, seen{s, i, c.settled}) })
			}
		})
	}
	wg.Wait()
	a.DoWait(func(*counter) {})
	if len(log) != senders*each {
		t.Fatalf("%d entries ran, want %d", len(log), senders*each)
	}
	next := make([]int, senders)
	for k, e := range log {
		if e.i != next[e.sender] {
			t.Fatalf("entry %d of sender %d ran when %d was next", e.i, e.sender, next[e.sender])
		}
		next[e.sender]++
		if e.settledBefore != k {
			t.Fatalf("entry %d ran after %d settles, want %d", k, e.settledBefore, k)
		}
	}
	if c.settled != senders*each+1 {
		t.Errorf("settle ran %d times, want %d", c.settled, senders*each+1)
	}
}

// TestDoWaitsForRoomOnlyWhenFull: while the actor is held, MaxQueued
// entries are queued at once, the next Do waits for room, and all of them
// run in order once the actor goes on.
func TestDoWaitsForRoomOnlyWhenFull(t *testing.T) {
	_, a := start(t)
	hold, release := gate(t)
	a.DoWait(func(*counter) {}) // the actor is idle, reading
	a.Do(hold)
	const entries = actor.MaxQueued + 10
	var queued atomic.Int64
	var ran []int
	sent := goDo(func() {
		for i := range entries {
			a.Do(func(*counter) { ran = append(ran, i) })
			queued.Add(1)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for queued.Load() < actor.MaxQueued && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	stillWaiting(t, sent, "a Do beyond MaxQueued")
	if n := queued.Load(); n != actor.MaxQueued {
		t.Fatalf("%d entries queued on a held actor, want %d", n, actor.MaxQueued)
	}
	release()
	returns(t, sent, "Do once there was room")
	a.DoWait(func(*counter) {})
	if !slices.Equal(ran, seq(entries)) {
		t.Errorf("entries ran out of order: %v", ran)
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestDoWaitReturnsOnceRunAndSettled: what f and settle did is there to
// read when DoWait returns, and Do returns before a held actor runs f.
func TestDoWaitReturnsOnceRunAndSettled(t *testing.T) {
	c, a := start(t)
	hold, release := gate(t)
	a.Do(hold)
	a.Do(func(c *counter) { c.n = 1 }) // returns though the actor is held
	waited := goDo(func() { a.DoWait(func(c *counter) { c.n++ }) })
	stillWaiting(t, waited, "DoWait on a held actor")
	release()
	returns(t, waited, "DoWait")
	if c.n != 2 || c.settled != 3 {
		t.Errorf("after DoWait n=%d settled=%d, want n=2 settled=3", c.n, c.settled)
	}
}

// TestPeekWaitsForTheEntriesBefore: Peek answers with the view once the
// entries queued before it have run.
func TestPeekWaitsForTheEntriesBefore(t *testing.T) {
	_, a := start(t)
	if v := a.Peek(); v != (view{n: 0, settled: 1}) {
		t.Errorf("first Peek = %+v, want n=0 settled=1 (its own entry settled)", v)
	}
	hold, release := gate(t)
	a.Do(hold)
	a.Do(func(c *counter) { c.n = 3 })
	var v view
	peeked := goDo(func() { v = a.Peek() })
	stillWaiting(t, peeked, "Peek behind a held entry (not slow)")
	release()
	returns(t, peeked, "Peek")
	if v.n != 3 {
		t.Errorf("Peek = %+v, want what the entry before it made (n=3)", v)
	}
}

// TestShownWaitsForNothing: Shown answers at once, even behind a held
// entry, with the view of the last entry that ended.
func TestShownWaitsForNothing(t *testing.T) {
	_, a := start(t)
	a.DoWait(func(c *counter) { c.n = 2 })
	hold, release := gate(t)
	a.Do(hold)
	a.Do(func(c *counter) { c.n = 3 })
	var v view
	returns(t, goDo(func() { v = a.Shown() }), "Shown behind a held entry")
	if v.n != 2 {
		t.Errorf("Shown = %+v, want the view of the last entry that ended (n=2)", v)
	}
	release()
	if v := a.Peek(); v.n != 3 {
		t.Errorf("Peek after the release = %+v, want n=3", v)
	}
}

// TestSlowWork: while an entry does slow work, Peek answers at once with
// the view published when it began (whether it was asked before or
// during it), DoWait waits, and once the entry has ended Peek waits for
// entries again.
func TestSlowWork(t *testing.T) {
	_, a := start(t)
	before, goOn := gate(t)
	a.Do(before)
	began := make(chan struct{})
	hold, finish := gate(t)
	a.Do(func(c *counter) {
		c.n = 5
		a.Slow()
		close(began)
		hold(c)
		c.n = 6
	})
	var early view
	peekedEarly := goDo(func() { early = a.Peek() }) // queued before the slow work began
	stillWaiting(t, peekedEarly, "Peek behind a held entry (not slow)")
	goOn()
	returns(t, began, "the slow entry")
	returns(t, peekedEarly, "Peek queued before slow work began")
	if early.n != 5 {
		t.Errorf("Peek queued before slow work = %+v, want the view Slow published (n=5)", early)
	}
	if v := a.Peek(); v.n != 5 {
		t.Errorf("Peek during slow work = %+v, want the view Slow published (n=5)", v)
	}
	var got int
	waited := goDo(func() { a.DoWait(func(c *counter) { got = c.n }) })
	stillWaiting(t, waited, "DoWait during slow work")
	finish()
	returns(t, waited, "DoWait once slow work ended")
	if got != 6 {
		t.Errorf("DoWait after slow work saw n=%d, want 6", got)
	}
	if v := a.Peek(); v.n != 6 {
		t.Errorf("Peek after slow work = %+v, want n=6", v)
	}
	hold, release := gate(t)
	a.Do(hold)
	peeked := goDo(func() { a.Peek() })
	stillWaiting(t, peeked, "Peek behind a held entry after slow work ended")
	release()
	returns(t, peeked, "Peek")
}

// TestAfterTheEnd: the goroutine ends after the entry that closes the
// state; the entries queued then run, in order, and every later one runs
// on the goroutine that brings it, before Do returns, each settled; Peek
// and DoWait still answer.
func TestAfterTheEnd(t *testing.T) {
	c, a := start(t)
	hold, release := gate(t)
	a.Do(hold)
	a.Do(func(c *counter) { c.closed = true })
	a.Do(func(c *counter) { c.log = append(c.log, "a") })
	a.Do(func(c *counter) { c.log = append(c.log, "b") })
	release()
	returns(t, a.Ended(), "the actor")
	a.Do(func(c *counter) { c.log = append(c.log, "c") })
	if want := []string{"a", "b", "c"}; !slices.Equal(c.log, want) {
		t.Errorf("after the end, entries ran %v by the time Do returned, want %v", c.log, want)
	}
	if c.settled != 5 {
		t.Errorf("settle ran %d times, want 5", c.settled)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				a.Do(func(c *counter) { c.n++ })
			}
		})
	}
	wg.Wait()
	a.DoWait(func(c *counter) { c.n++ })
	if c.n != 401 || c.settled != 406 {
		t.Errorf("after the end n=%d settled=%d, want n=401 settled=406", c.n, c.settled)
	}
	if v := a.Peek(); v.n != 401 {
		t.Errorf("Peek after the end = %+v, want n=401", v)
	}
}

// TestPeekSeesWhatDoWaitDid: a Peek that follows a DoWait on the same
// goroutine sees at least what that entry made, slow work or not, and
// what Peek sees never goes back.
func TestPeekSeesWhatDoWaitDid(t *testing.T) {
	_, a := start(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				var mine int
				a.DoWait(func(c *counter) {
					c.n++
					mine = c.n
					if c.n%3 == 0 {
						a.Slow()
						runtime.Gosched()
					}
				})
				if v := a.Peek(); v.n < mine {
					t.Errorf("Peek after DoWait saw n=%d, want at least %d", v.n, mine)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	watched := goDo(func() {
		last := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			v := a.Peek()
			if v.n < last {
				t.Errorf("Peek went back from n=%d to n=%d", last, v.n)
				return
			}
			last = v.n
		}
	})
	wg.Wait()
	close(stop)
	<-watched
}
