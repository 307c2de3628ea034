package history

import (
	"fmt"
	"slices"
	"testing"
)

// item is a test's Item: a message or a piece of work, numbered.
type item struct {
	msg bool
	n   int
}

func (x item) Message() bool { return x.msg }

func msg(n int) item  { return item{msg: true, n: n} }
func work(n int) item { return item{n: n} }

// record records msgs messages numbered from first.
func record(l *List[item], first, msgs int) {
	for n := range msgs {
		l.Record(msg(first + n))
	}
}

// works records work numbered from first to last.
func works(l *List[item], first, last int) {
	for n := first; n <= last; n++ {
		l.Record(work(n))
	}
}

// forget forgets work numbered from first to last, in one call.
func forget(l *List[item], first, last int) {
	var xs []item
	for n := first; n <= last; n++ {
		xs = append(xs, work(n))
	}
	l.Forget(xs...)
}

// TestList checks the list's rules, each case from an empty list: the
// order kept, the bound on messages, forgetting work and closing the
// gaps, and the positions of work after each.
func TestList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		do    func(*List[item])
		head  []item // the first items, in order
		len   int
		msgs  int
		gaps  int
		where map[item]int // positions of work; -1: not held
	}{{
		name: "each item once, in the order recorded",
		do: func(l *List[item]) {
			l.Record(msg(1))
			l.Record(work(1))
			l.Record(work(2))
			l.Record(msg(2))
		},
		head: []item{msg(1), work(1), work(2), msg(2)}, len: 4, msgs: 2,
		where: map[item]int{work(1): 1, work(2): 2, work(3): -1},
	}, {
		name: "forgotten work leaves a gap at once",
		do: func(l *List[item]) {
			l.Record(msg(1))
			works(l, 1, 3)
			l.Forget(work(2))
		},
		head: []item{msg(1), work(1), {}, work(3)}, len: 4, msgs: 1, gaps: 1,
		where: map[item]int{work(1): 1, work(2): -1, work(3): 3},
	}, {
		name: "forgetting what is not held, or a message, does nothing",
		do: func(l *List[item]) {
			l.Record(msg(1))
			works(l, 1, 2)
			l.Forget(work(7), msg(1))
			l.Forget(work(1))
			l.Forget(work(1))
		},
		head: []item{msg(1), {}, work(2)}, len: 3, msgs: 1, gaps: 1,
		where: map[item]int{work(1): -1, work(2): 2},
	}, {
		name: "gaps stay while they are at most 32",
		do: func(l *List[item]) {
			works(l, 1, 40)
			forget(l, 1, 32)
		},
		head: []item{{}, {}}, len: 40, gaps: 32,
		where: map[item]int{work(33): 32, work(40): 39},
	}, {
		name: "gaps close once more than half the list, positions follow",
		do: func(l *List[item]) {
			works(l, 1, 100)
			forget(l, 1, 60)
		},
		head: []item{work(61), work(62)}, len: 40,
		where: map[item]int{work(61): 0, work(100): 39, work(1): -1},
	}, {
		name: "gaps close after the whole batch, not during it",
		do: func(l *List[item]) {
			works(l, 1, 100)
			forget(l, 1, 49)
			l.Record(msg(1))
			l.Forget(work(50), work(51), work(52))
		},
		head: []item{work(53), work(54)}, len: 49, msgs: 1,
		where: map[item]int{work(53): 0, work(100): 47},
	}, {
		name: "messages up to the bound are kept",
		do: func(l *List[item]) {
			l.Record(work(1))
			record(l, 1, MaxMessages)
		},
		head: []item{work(1), msg(1)}, len: MaxMessages + 1, msgs: MaxMessages,
		where: map[item]int{work(1): 0},
	}, {
		name: "one more forgets the oldest tenth of the messages and the gaps, not work",
		do: func(l *List[item]) {
			works(l, 1, 3)
			record(l, 1, MaxMessages)
			l.Forget(work(2))
			l.Record(work(4))
			l.Record(msg(MaxMessages + 1))
		},
		head: []item{work(1), work(3), msg(MaxMessages/10 + 1)}, len: MaxMessages - MaxMessages/10 + 1 + 3, msgs: MaxMessages - MaxMessages/10 + 1,
		where: map[item]int{work(1): 0, work(3): 1, work(4): MaxMessages - MaxMessages/10 + 2, work(2): -1},
	}, {
		name: "a gap recorded, as a thawed list has them",
		do: func(l *List[item]) {
			l.Record(work(1))
			l.Record(item{})
			l.Record(msg(1))
		},
		head: []item{work(1), {}, msg(1)}, len: 3, msgs: 1, gaps: 1,
		where: map[item]int{work(1): 0},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var l List[item]
			tt.do(&l)
			var got []item
			for _, x := range l.All() {
				got = append(got, x)
			}
			if n := min(len(tt.head), len(got)); !slices.Equal(got[:n], tt.head) {
				t.Errorf("the list starts %v, want %v", got[:n], tt.head)
			}
			if l.Len() != tt.len || l.Messages() != tt.msgs || l.Gaps() != tt.gaps {
				t.Errorf("%d items, %d messages, %d gaps; want %d, %d, %d", l.Len(), l.Messages(), l.Gaps(), tt.len, tt.msgs, tt.gaps)
			}
			for x, want := range tt.where {
				i, ok := l.Pos(x)
				if !ok {
					i = -1
				}
				if i != want {
					t.Errorf("%v at %d, want %d", x, i, want)
				}
			}
			if err := consistent(&l); err != nil {
				t.Error(err)
			}
		})
	}
}

// consistent checks what l counts against what it holds: its messages,
// its gaps, and that each piece of work is where Pos says.
func consistent(l *List[item]) error {
	msgs, gaps := 0, 0
	for i, x := range l.All() {
		switch {
		case x == item{}:
			gaps++
		case x.msg:
			msgs++
		default:
			if j, ok := l.Pos(x); !ok || j != i {
				return fmt.Errorf("%v is at %d, Pos says %d (%v)", x, i, j, ok)
			}
		}
	}
	if msgs != l.Messages() || gaps != l.Gaps() {
		return fmt.Errorf("%d messages and %d gaps held, counted %d and %d", msgs, gaps, l.Messages(), l.Gaps())
	}
	return nil
}
