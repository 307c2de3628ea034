package actor_test

import (
	"fmt"

	"shellagent/internal/actor"
)

// A tally owned by an actor: entries add to it in order, settle keeps the
// total, and Peek reads the total as it is published.
func Example() {
	type tally struct {
		items  []int
		total  int
		closed bool
	}
	a := actor.New(&tally{},
		func(t *tally) { // settle, after each entry
			t.total = 0
			for _, n := range t.items {
				t.total += n
			}
		},
		func(t *tally) bool { return t.closed },
		func(t *tally) int { return t.total })
	for n := range 4 {
		a.Do(func(t *tally) { t.items = append(t.items, n) })
	}
	fmt.Println("total:", a.Peek())
	a.DoWait(func(t *tally) { t.closed = true })
	<-a.Ended()
	a.Do(func(t *tally) { t.items = append(t.items, 10) }) // runs here, now
	fmt.Println("after the end:", a.Peek())
	// Output:
	// total: 6
	// after the end: 16
}
