package supervisor

import (
	"time"

	"shellagent/acp"
	"shellagent/internal/actor"
	"shellagent/supervisor/settings"
)

// newActor starts the goroutine that owns st (the package's Concurrency
// section): it settles after each entry, ends once the session has
// closed, and publishes a snapshot for peek.
func newActor(st *state) *actor.Actor[*state, *snapshot] {
	return actor.New(st, (*state).settle, func(st *state) bool { return st.life == sessionClosed }, newSnapshot)
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

func newSnapshot(st *state) *snapshot {
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

// do is the only way to change a session's state: f runs on the actor, in
// turn, then settle (actor.Actor.Do). Never call it from the actor: run
// there inline what it would queue.
func (s *Session) do(f func(st *state)) { s.actor.Do(f) }

// doWait runs f as do does, and returns once f has run and settled, after
// any slow work (actor.Actor.DoWait). Never call it from the actor.
func (s *Session) doWait(f func(st *state)) { s.actor.DoWait(f) }

// peek returns what the state is once the entries before it have run,
// never waiting for slow work (actor.Actor.Peek): for the reads that
// answer at once (session/list, the settings, the kill grace).
func (s *Session) peek() *snapshot { return s.actor.Peek() }

// slow publishes what the state is now, for peek, before the current
// entry's slow work (actor.Actor.Slow). On the actor.
func (s *Session) slow() { s.actor.Slow() }
