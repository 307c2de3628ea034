package supervisor

import (
	"slices"
	"time"

	"shellagent/acp"
	"shellagent/protocol"
)

// turnState is where a turn is in its life.
type turnState int

const (
	// turnHeld: waiting in the queue while another turn holds the
	// foreground; a prompt is not inserted yet. Out when it starts (to
	// turnAsking or turnRunning for a command, to turnOver for anything
	// else), or to turnOver when it is dropped (session/cancel, close,
	// $/cancel_request, its job cancelled).
	turnHeld turnState = iota
	// turnAsking: it holds the foreground; its command waits for
	// permission (the session is requires_action). Out to turnRunning once
	// allowed, to turnOver when refused, withdrawn or cancelled.
	turnAsking
	// turnRunning: it holds the foreground; its command runs. Out to
	// turnCancelling (session/cancel or close), or to turnOver when the
	// command exits or leaves the foreground.
	turnRunning
	// turnCancelling: session/cancel or close is stopping its command; its
	// tool call will end cancelled and the turn with stop reason
	// cancelled. Out to turnOver when the command exits.
	turnCancelling
	// turnOver: done, or never run. Final.
	turnOver
)

// A turn is one piece of foreground work: a prompt, or the firing of a
// scheduled job (agent-initiated: no prompt, no user message).
type turn struct {
	blocks  []acp.ContentBlock
	in      input
	reply   protocol.Reply  // answers the prompt once inserted; nil for a firing
	from    protocol.Client // the connection the prompt came from
	job     *job            // the job whose firing this is
	unwatch func() bool     // stops watching for the client withdrawing the held prompt
	state   turnState

	// Once it holds the foreground with a command:
	call  *toolCall
	term  *terminal   // once the command runs
	timer *time.Timer // the foreground timeout
}

// turnQueue is the session's foreground: the turn that holds it, and the
// turns waiting for it, in order. A turn holds the foreground from the
// moment its command is announced until the command exits or leaves the
// foreground; immediate work (/bg, /ps, /stop, scheduling) never holds it.
type turnQueue struct {
	fg   *turn
	held []*turn
}

// busy reports whether a turn holds the foreground.
func (q *turnQueue) busy() bool { return q.fg != nil }

// waiting reports whether turns wait for the foreground.
func (q *turnQueue) waiting() bool { return len(q.held) > 0 }

// take gives t the foreground.
func (q *turnQueue) take(t *turn, state turnState) {
	q.fg, t.state = t, state
}

// release ends t's hold on the foreground, if it has it.
func (q *turnQueue) release(t *turn) {
	if q.fg != t {
		return
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	q.fg, t.state = nil, turnOver
}

// foreground reports whether t is the foreground command.
func (q *turnQueue) foreground(t *terminal) bool {
	return t != nil && q.fg != nil && q.fg.term == t
}

// hold queues t behind the foreground.
func (q *turnQueue) hold(t *turn) {
	t.state = turnHeld
	q.held = append(q.held, t)
}

// next takes the first waiting turn off the queue, if the foreground is
// free.
func (q *turnQueue) next() *turn {
	if q.fg != nil || len(q.held) == 0 {
		return nil
	}
	t := q.held[0]
	q.held = slices.Delete(q.held, 0, 1)
	t.stopWatching()
	return t
}

// remove takes a held turn off the queue and reports whether it was there.
func (q *turnQueue) remove(t *turn) bool {
	i := slices.Index(q.held, t)
	if i < 0 {
		return false
	}
	q.held = slices.Delete(q.held, i, i+1)
	t.state = turnOver
	return true
}

// drop takes every held turn that matches off the queue, and returns them.
func (q *turnQueue) drop(match func(*turn) bool) []*turn {
	var out []*turn
	q.held = slices.DeleteFunc(q.held, func(t *turn) bool {
		if !match(t) {
			return false
		}
		t.stopWatching()
		t.state = turnOver
		out = append(out, t)
		return true
	})
	return out
}

// runOf returns the turn of j's that holds or waits for the foreground,
// or nil.
func (q *turnQueue) runOf(j *job) *turn {
	if q.fg != nil && q.fg.job == j {
		return q.fg
	}
	for _, t := range q.held {
		if t.job == j {
			return t
		}
	}
	return nil
}

func (t *turn) stopWatching() {
	if t.unwatch != nil {
		t.unwatch()
	}
}
