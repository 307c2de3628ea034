package supervisor

import (
	"time"

	"shellagent/ptyio"
	"shellagent/supervisor/work"
)

// SessionStatus is a session as a server that outlives its connections
// shows it (shellagent daemon status): a copy, taken under the session's
// lock (its terminals' pids just after), that nothing changes afterwards.
type SessionStatus struct {
	ID    string
	Cwd   string
	Title string // the first prompt, "" before any
	// Attached reports whether a connection is attached; Since is when
	// that last changed (attached, detached, or the session created).
	Attached bool
	Since    time.Time
	// Terminals are the terminals that run (or are being stopped), oldest
	// first.
	Terminals []TerminalStatus
	// Scheduled counts the jobs (/after, /every) waiting to fire.
	Scheduled int
}

// TerminalStatus is one live terminal of a SessionStatus.
type TerminalStatus struct {
	ID         string
	Command    string
	Started    time.Time
	Foreground bool // the session's foreground command; else background work
	Stopping   bool // a stop is under way
	Pids       []int
}

// Sessions returns the status of every open session, oldest first. It
// waits for each session's entries, slow work included (a launch), so
// that the status shows what they did. The terminals' processes are read
// (a scan of every process) on the calling goroutine, not the actor.
func (sv *Supervisor) Sessions() []SessionStatus {
	list := sv.live.list()
	out := make([]SessionStatus, 0, len(list))
	for _, s := range list {
		var (
			ss    SessionStatus
			procs []ptyio.Process // one per terminal of ss
			open  bool
		)
		s.doWait(func(st *state) {
			if st.life != sessionOpen {
				return // closing: its end is near, and no longer anyone's to resume
			}
			ss = SessionStatus{ID: s.id, Cwd: s.cwd, Title: st.title, Attached: st.out.client != nil, Since: st.out.since}
			var fg *terminal
			if st.turns.fg != nil {
				fg = st.turns.fg.term
			}
			ss.Terminals, procs, ss.Scheduled = st.work.status(fg)
			open = true
		})
		if !open {
			continue
		}
		for i, p := range procs {
			ss.Terminals[i].Pids = pids(p)
		}
		out = append(out, ss)
	}
	return out
}

// status returns the live terminals' status without their pids (fg is
// the foreground command's), the processes to read them from, one per
// terminal, and how many jobs wait to fire.
func (r *registry) status(fg *terminal) (terms []TerminalStatus, procs []ptyio.Process, scheduled int) {
	for _, t := range r.liveTerminals() {
		terms = append(terms, TerminalStatus{
			ID: t.id, Command: t.line, Started: t.started, Foreground: t == fg, Stopping: t.state == termStopping,
		})
		procs = append(procs, t.proc)
	}
	for _, c := range r.unfinished() {
		if c.state == callScheduled {
			scheduled++
		}
	}
	return terms, procs, scheduled
}

// pids lists a terminal's live processes; none when they cannot be read
// (a status without pids says as much). It reads /proc: call it off the
// session's actor.
func pids(p ptyio.Process) []int {
	ms, err := p.Members()
	if err != nil {
		return nil
	}
	out := make([]int, len(ms))
	for i, m := range ms {
		out[i] = m.Pid
	}
	return out
}

// detachedExpiry is an armed Config.DetachedTTL timer, due at. A firing
// acts only if its detachedExpiry is still the session's: one disarmed
// meanwhile may fire late, and then does nothing.
type detachedExpiry struct {
	at    time.Time
	timer work.Timer
}

// idle reports whether the session is open, detached and without live
// work: what DetachedTTL counts.
func (st *state) idle() bool {
	return st.life == sessionOpen && st.out.client == nil &&
		!st.turns.busy() && !st.turns.waiting() && len(st.list.items) == 0 && !st.work.live()
}

// watchExpiry arms the DetachedTTL timer when the session has become idle
// and detached, and disarms it once it is not. It runs in settle, after
// every change.
func (st *state) watchExpiry() {
	ttl := st.s.sv.cfg.DetachedTTL
	idle := ttl > 0 && st.s.sv.cfg.Detached == KeepDetached && st.idle()
	switch {
	case idle && st.expiry == nil:
		st.armExpiry(st.s.sv.cfg.clock.Now().Add(ttl))
	case !idle && st.expiry != nil:
		st.expiry.timer.Stop()
		st.expiry = nil
	}
}

// armExpiry arms the session's expiry for at (at once if past): in
// watchExpiry, or as the old image of an upgrade had armed it.
func (st *state) armExpiry(at time.Time) {
	e, s, clk := &detachedExpiry{at: at}, st.s, st.s.sv.cfg.clock
	e.timer = clk.AfterFunc(at.Sub(clk.Now()), func() { s.expire(e) })
	st.expiry = e
}

// expire closes the session when e, its current expiry, fires.
func (s *Session) expire(e *detachedExpiry) {
	s.do(func(st *state) {
		if st.expiry != e || !st.idle() {
			return
		}
		st.expiry = nil
		s.sv.cfg.Log.Info("closing a session detached with no work for the detached TTL", "session", s.id, "ttl", s.sv.cfg.DetachedTTL)
		st.close(func() {})
	})
}

// Len returns how many sessions the Supervisor holds, closing ones
// included: cheaper than Sessions for a server that asks often whether
// it holds any.
func (sv *Supervisor) Len() int { return sv.live.len() }
