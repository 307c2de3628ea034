package supervisor

// Retention: what a session keeps of finished work. A long-lived session
// (an /every job firing all day) must not grow without bound, so the
// history keeps the most recent updates and only the most recent exited
// terminals keep their output; older ones are forgotten entirely (their
// ids then answer -32602 as unknown, as an exited one would).
const (
	maxHistory      = 10000 // updates kept for replay
	maxExitedOutput = 100   // exited terminals whose output is kept
)

// record appends an update to the session's history, dropping the oldest
// tenth once it is full.
func (s *Session) record(u any) {
	if len(s.history) >= maxHistory {
		s.history = append([]any(nil), s.history[maxHistory/10:]...)
	}
	s.history = append(s.history, u)
}

// retire keeps an exited terminal's output for display and replay, and
// forgets the oldest exited terminal (and its tool call) beyond the limit.
func (s *Session) retire(t *terminal) {
	t.ring.Compact()
	s.retired = append(s.retired, t)
	if len(s.retired) <= maxExitedOutput {
		return
	}
	old := s.retired[0]
	s.retired = s.retired[1:]
	delete(s.terminals, old.id)
	delete(s.calls, old.call.id)
}
