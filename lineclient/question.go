package lineclient

// questionKind is what terminal mode's open question asks.
type questionKind int

const (
	askNothing questionKind = iota
	// askClose: close the session, which stops its background work? y/N
	askClose
	// askLeave (Ctrl-D with a daemon): detach, the default, or close? D/c
	askLeave
)

// question is terminal mode's open question: the next key answers it,
// and keys typed before it was asked never do. It belongs to the client's
// event loop.
type question struct {
	c    *client
	kind questionKind
}

// open reports whether a question waits for its answer.
func (q *question) open() bool { return q.kind != askNothing }

// ask asks kind, after warning (what closing the session would stop; ""
// for nothing).
func (q *question) ask(kind questionKind, warning string) {
	if warning != "" {
		q.c.p.note(warning)
	}
	switch kind {
	case askClose:
		q.c.p.note("close the session and stop it? y/N")
	case askLeave:
		q.c.p.note("detach (the session runs on in the daemon) or close the session? D/c")
	}
	q.kind = kind
}

// answer takes the first key as the answer and drops the keys after it.
// To askClose, y closes the session and anything else (Ctrl-C too) keeps
// it. To askLeave, c closes it, Ctrl-C keeps the client attached, and
// anything else (Enter, d, Ctrl-D) detaches.
func (q *question) answer(b []byte) []byte {
	keys, _ := editKeys(b)
	if len(keys) == 0 {
		return nil
	}
	kind, k := q.kind, keys[0]
	q.kind = askNothing
	switch {
	case kind == askClose && (k == 'y' || k == 'Y'):
		q.c.closeSession()
	case kind == askLeave && (k == 'c' || k == 'C'):
		q.c.closeSession()
	case kind == askLeave && k != keyCtrlC:
		q.c.detach()
	default:
		q.declined()
	}
	return nil
}

// declined keeps the session open after a no to the question.
func (q *question) declined() {
	q.kind = askNothing
	c := q.c
	c.interrupts = 0
	s := c.sess
	if s.Reported && len(s.Background) > 0 {
		c.p.note("nothing was stopped; stop an item with /stop " + s.Background[0].ID())
		return
	}
	c.p.note("nothing was stopped")
}
