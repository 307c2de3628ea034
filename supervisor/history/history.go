// Package history keeps the list that a session's replay re-sends (the
// outbox's, in package supervisor): each message, tool call and terminal
// once, in the order it was first recorded. It is not a log of updates:
// the list holds the items themselves, and a replay sends each as it is
// now. What it keeps is bounded: beyond MaxMessages messages, the oldest
// are forgotten; work (a tool call, a terminal) stays until the session
// forgets it, when its registry retires it.
//
// One file: history.go, the List and its rules. The test checks them,
// table by table.
package history

import (
	"iter"
	"slices"
)

// MaxMessages bounds the messages a List keeps: recording one more first
// forgets the oldest tenth of them.
const MaxMessages = 5000

// An Item is what a List holds: a message or a piece of work. The zero
// Item is a forgotten one: a List holds it as a gap, where work was until
// it was forgotten.
type Item interface {
	comparable
	// Message reports whether the item is a message (MaxMessages bounds
	// those) rather than work (which stays until Forget).
	Message() bool
}

// A List holds items in the order they were recorded. Its zero value is
// empty and ready to use. It is not safe for concurrent use: it belongs
// to its session's state.
type List[T Item] struct {
	items     []T       // in order; the zero T is a forgotten item
	pos       map[T]int // where each piece of work is in items
	kept      int       // messages in items
	forgotten int       // zero items in items
}

// Record appends x. A message beyond MaxMessages first forgets the oldest
// tenth of the messages (and closes every gap). The zero T records a gap:
// a List thawed after an upgrade in place has them where the old one did.
func (l *List[T]) Record(x T) {
	var zero T
	switch {
	case x == zero:
		l.forgotten++
	case x.Message():
		if l.kept >= MaxMessages {
			l.trim()
		}
		l.kept++
	default:
		if l.pos == nil {
			l.pos = make(map[T]int)
		}
		l.pos[x] = len(l.items)
	}
	l.items = append(l.items, x)
}

// trim forgets the oldest tenth of MaxMessages messages, and the gaps.
func (l *List[T]) trim() {
	var zero T
	drop := MaxMessages / 10
	l.kept -= drop
	l.items = slices.DeleteFunc(l.items, func(x T) bool {
		if drop > 0 && x.Message() {
			drop--
			return true
		}
		return x == zero
	})
	l.reindex()
}

// Forget turns each piece of work of xs that the list holds into a gap,
// at once, so that the list keeps nothing of it; once the gaps are more
// than half the list (and 32), it closes them. Forgetting what the list
// does not hold does nothing.
func (l *List[T]) Forget(xs ...T) {
	var zero T
	for _, x := range xs {
		if i, ok := l.pos[x]; ok {
			l.items[i] = zero
			delete(l.pos, x)
			l.forgotten++
		}
	}
	if l.forgotten > max(len(l.items)/2, 32) {
		l.items = slices.Clip(slices.DeleteFunc(l.items, func(x T) bool { return x == zero }))
		l.reindex()
	}
}

// reindex records where each piece of work is after the items moved.
func (l *List[T]) reindex() {
	var zero T
	l.forgotten = 0
	for i, x := range l.items {
		if x != zero && !x.Message() {
			l.pos[x] = i
		}
	}
}

// All yields the items with their positions, in order, the gaps as the
// zero T: what a replay sends (but the gaps), and what an upgrade in
// place writes.
func (l *List[T]) All() iter.Seq2[int, T] { return slices.All(l.items) }

// Pos returns where the list holds x, a piece of work, or false if it
// does not. Positions move when the list trims or closes its gaps.
func (l *List[T]) Pos(x T) (int, bool) {
	i, ok := l.pos[x]
	return i, ok
}

// Len returns how many items the list holds, gaps included.
func (l *List[T]) Len() int { return len(l.items) }

// Messages returns how many messages the list holds.
func (l *List[T]) Messages() int { return l.kept }

// Gaps returns how many gaps the list holds: forgotten work not closed up
// yet.
func (l *List[T]) Gaps() int { return l.forgotten }
