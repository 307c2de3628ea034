package worktest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/work"
)

// Advance calls the timers due, the earliest first, with the clock at
// each one's due time, and those armed meanwhile that are due too; a
// stopped timer is not called, nor is one called twice.
func TestClockAdvance(t *testing.T) {
	t.Parallel()
	h := NewHost()
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+h.Now().Sub(Start).String()) }
	}
	h.After(3*time.Second, at("c"))
	h.After(time.Second, func() {
		at("a")()
		h.After(time.Second, at("b")) // due at 2s
	})
	stopped := h.Clock.After(2*time.Second, at("stopped"))
	if !stopped.Stop() || stopped.Stop() {
		t.Error("Stop reports true once, then false")
	}
	h.After(10*time.Second, at("late"))
	h.Clock.Advance(5 * time.Second)
	if want := []string{"a@1s", "b@2s", "c@3s"}; !slices.Equal(got, want) {
		t.Errorf("Advance called %q, want %q", got, want)
	}
	if h.Now() != Start.Add(5*time.Second) {
		t.Errorf("the clock stands at %v after Advance", h.Now())
	}
	h.Clock.Timers[0].Fire() // called already
	stopped.Fire()
	if len(got) != 3 {
		t.Errorf("Fire called a timer fired or stopped: %q", got)
	}
}

// What any goroutine queues through Do runs on Drain, in order, and what
// it queues meanwhile too.
func TestDoDrain(t *testing.T) {
	t.Parallel()
	h := NewHost()
	var wg sync.WaitGroup
	n := 0
	for range 10 {
		wg.Go(func() { h.Do(func() { n++ }) })
	}
	wg.Wait()
	h.Do(func() { h.Do(func() { n *= 2 }) })
	h.Drain()
	if n != 20 {
		t.Errorf("Drain: n = %d, want 20", n)
	}
}

// The first live run holds the foreground; DropRuns drops only the runs
// of its origin that wait; FinishRun hands the foreground on.
func TestForegroundRuns(t *testing.T) {
	t.Parallel()
	h := NewHost()
	a, b := new(int), new(int)
	h.Run("one", a)
	h.Run("two", a)
	h.Run("three", b)
	if h.RunOf(a) != 1 || h.RunOf(b) != 3 {
		t.Fatalf("RunOf: %d, %d", h.RunOf(a), h.RunOf(b))
	}
	h.DropRuns(a)
	if h.Ran[0].Dropped || !h.Ran[1].Dropped || h.Drops != 1 {
		t.Errorf("DropRuns dropped %v, %v", h.Ran[0].Dropped, h.Ran[1].Dropped)
	}
	h.FinishRun()
	if h.RunOf(a) != work.NoRun || h.RunOf(b) != 3 {
		t.Errorf("after FinishRun: RunOf %d, %d", h.RunOf(a), h.RunOf(b))
	}
}

// watcher is a task that hears of exits.
type watcher struct {
	work.Task
	heard *[]string
	name  string
}

func (w watcher) RunExited(r work.Run, onItsOwn bool) {
	*w.heard = append(*w.heard, w.name+" run "+r.ID())
}

func (w watcher) TerminalExited(t work.Terminal) {
	*w.heard = append(*w.heard, w.name+" terminal "+t.ID())
}

// A call's status follows the session's rules; EndTurn ends the turn its
// call holds; an exit is heard by the run's task first, then by the
// tasks of the calls not final, oldest first.
func TestCallsTurnsAndExits(t *testing.T) {
	t.Parallel()
	h := NewHost()
	var heard []string
	first := h.NewCall(work.CallSpec{Scheduled: true}, nil).(*Call)
	first.Task = watcher{heard: &heard, name: "first"}
	second := h.NewCall(work.CallSpec{}, nil).(*Call)
	second.Task = watcher{heard: &heard, name: "second"}
	if first.ID() != "call_1" || first.Status() != acp.StatusPending || second.Status() != acp.StatusInProgress {
		t.Fatalf("made %s %s, %s %s", first.ID(), first.Status(), second.ID(), second.Status())
	}
	first.List()
	first.End(acp.StatusCompleted)
	first.End(acp.StatusFailed)
	first.List()
	if first.Status() != acp.StatusCompleted || first.Listed || first.Sent != 1 {
		t.Errorf("ended: %s, listed %v, sent %d", first.Status(), first.Listed, first.Sent)
	}

	turn := h.NewTurn()
	turn.Hold(second, nil)
	h.EndTurn(first, acp.StopCancelled)
	h.EndTurn(second, acp.StopEndTurn)
	if !turn.Ended || turn.Reason != acp.StopEndTurn || turn.Holds() {
		t.Errorf("turn: ended %v, %q", turn.Ended, turn.Reason)
	}

	r, _ := h.Launch(second, work.LaunchSpec{Line: "make", Note: func(id string) string { return "in " + id }})
	r.List()
	h.Exit(r.ID(), &acp.ExitStatus{}, true)
	if want := []string{"second run term_1", "second terminal term_1"}; !slices.Equal(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
	if run := r.(*Run); run.Listed || run.Running() || len(second.Content) != 2 || second.Sent != 1 {
		t.Errorf("run %+v, call content %v", run, second.Content)
	}
}

// asker is a task that waits for the client's answer.
type asker struct {
	work.Task
	heard *[]string
	name  string
}

func (a asker) Reask()               { *a.heard = append(*a.heard, a.name) }
func (a asker) Unanswered(err error) {}

// A call reported waiting is listed unless its work holds a turn; only
// the askers of calls not final are told, oldest first; an allowed call
// is a command's; a request's answer reaches the asker.
func TestPermissions(t *testing.T) {
	t.Parallel()
	h := NewHost()
	p := NewPermissions(h)
	var heard []string
	held := h.NewCall(work.CallSpec{Asking: true}, asker{heard: &heard, name: "held"}).(*Call)
	listed := h.NewCall(work.CallSpec{Asking: true}, asker{heard: &heard, name: "listed"}).(*Call)
	ended := h.NewCall(work.CallSpec{Asking: true}, asker{heard: &heard, name: "ended"}).(*Call)
	h.NewTurn().Hold(held, nil)
	p.Waiting(held)
	p.Waiting(listed)
	if held.Status() != acp.StatusPending || held.Listed || !listed.Listed || len(p.Waits) != 2 {
		t.Errorf("waiting: %s, listed %v and %v", held.Status(), held.Listed, listed.Listed)
	}
	ended.End(acp.StatusFailed)
	p.Allowed(listed, "make")
	p.Askers(work.Asker.Reask)
	if !slices.Equal(heard, []string{"held"}) || listed.Task != nil || !slices.Equal(p.Allows, []string{"make"}) {
		t.Errorf("told %q; allowed %q", heard, p.Allows)
	}
	var got *acp.PermissionResponse
	if !p.Ask(context.Background(), &acp.PermissionRequest{}, func(r *acp.PermissionResponse, _ error) { got = r }) {
		t.Fatal("Ask with a client attached reported false")
	}
	p.Requests[0].Answer("", nil)
	if got.Outcome.Outcome != "cancelled" {
		t.Errorf("answered %+v", got.Outcome)
	}
	p.NoClient = true
	if p.Ask(context.Background(), &acp.PermissionRequest{}, nil) || len(p.Requests) != 1 {
		t.Error("Ask with no client sent a request")
	}
}
