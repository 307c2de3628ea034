package supervisor

import (
	"slices"
	"testing"
	"time"
)

func TestTurnQueue(t *testing.T) {
	t.Parallel()
	var q turnQueue
	j := kindOrigin{&struct{}{}} // a job's, say
	a, b, firing := &turn{}, &turn{}, &turn{origin: j}
	unwatched := 0
	b.unwatch = func() bool { unwatched++; return true }

	if q.busy() || q.waiting() || q.next() != nil {
		t.Fatalf("a new queue is busy or waiting")
	}
	q.take(a, turnRunning)
	q.hold(b)
	q.hold(firing)
	if !q.busy() || !q.waiting() || a.state != turnRunning || b.state != turnHeld {
		t.Errorf("after take and hold: busy %v waiting %v, states %d %d", q.busy(), q.waiting(), a.state, b.state)
	}
	if q.next() != nil {
		t.Errorf("next while the foreground is held")
	}
	if q.runOf(j.owns) != firing {
		t.Errorf("the held firing is not the job's run")
	}
	a.timer = time.AfterFunc(time.Hour, func() { t.Error("the foreground timeout fired") })
	q.release(b) // not the foreground: nothing changes
	if q.fg != a {
		t.Fatalf("releasing a held turn released the foreground")
	}
	q.release(a)
	if q.busy() || a.state != turnOver || a.timer.Stop() {
		t.Errorf("after release: busy %v, state %d, timer still armed", q.busy(), a.state)
	}
	if got := q.next(); got != b || unwatched != 1 {
		t.Errorf("next = %p (unwatched %d), want the first held turn, no longer watched", got, unwatched)
	}
	q.take(b, turnAsking)
	if q.runOf(j.owns) != firing {
		t.Errorf("the held firing is not the job's run")
	}
	if !q.remove(firing) || q.remove(firing) || firing.state != turnOver || q.runOf(j.owns) != nil {
		t.Errorf("remove: state %d, run %v", firing.state, q.runOf(j.owns))
	}
	c, d := &turn{}, &turn{origin: j}
	q.hold(c)
	q.hold(d)
	if got := q.drop(func(t *turn) bool { return t.origin == j }); !slices.Equal(got, []*turn{d}) || len(q.held) != 1 {
		t.Errorf("drop returned %v, %d left", got, len(q.held))
	}
	if q.foreground(nil) {
		t.Errorf("no terminal is the foreground command while it asks for permission")
	}
	term := &terminal{}
	b.term = term
	if !q.foreground(term) || q.foreground(&terminal{}) {
		t.Errorf("foreground: wrong terminal")
	}
}
