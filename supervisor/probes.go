package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// probes are the Supervisor's kinds' checks without a terminal (a
// service's exec: ready condition: work.Config's Probe), each try run by
// the Launcher's Probe in a containment group of its own that it kills
// and releases before it returns. An upgrade in place hands no try over:
// Freeze ends those in flight first (hold), and waits until each has
// returned, so that nothing a try started runs on into the new image,
// whose goroutines would not know it; a try asked for while they are
// held waits. After an exec that failed (release), each try that the
// hold ended runs again, from its start, and those that waited run: the
// caller sees one try that took longer. In the new image what waited is
// gone with the old one, and the kind's thaw tries afresh.
//
// Any goroutine may use it: its mutex guards what follows.
type probes struct {
	run func(ctx context.Context, line, dir string, env []string) error // the Launcher's, through Config.probe

	mu     sync.Mutex
	held   chan struct{}                   // closed by release; nil while not held
	cancel map[int]context.CancelCauseFunc // the tries in flight, by number
	tries  int                             // the tries started so far
	done   chan struct{}                   // closed when the last try in flight returns, while held
}

// errHeld is the cause of a try that hold ended.
var errHeld = errors.New("ended for the daemon's upgrade in place")

// probe runs one try of line (work.Config's Probe): with run, unless ctx
// has ended; again from its start if an upgrade's hold ended it and
// released it; after the hold, if one holds them, or not at all if ctx
// ends first.
func (p *probes) probe(ctx context.Context, line, dir string, env []string) error {
	for {
		key, try, err := p.begin(ctx)
		if err != nil {
			return err
		}
		err = p.run(try, line, dir, env)
		p.end(key)
		if err == nil || !errors.Is(context.Cause(try), errHeld) || ctx.Err() != nil {
			return err
		}
	}
}

// begin waits while the tries are held, then registers a try: its number
// and its context, which hold cancels. It fails if ctx ends first.
func (p *probes) begin(ctx context.Context) (key int, try context.Context, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.held != nil {
		held := p.held
		p.mu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
		}
		p.mu.Lock()
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	if p.cancel == nil {
		p.cancel = make(map[int]context.CancelCauseFunc)
	}
	p.tries++
	try, cancel := context.WithCancelCause(ctx)
	p.cancel[p.tries] = cancel
	return p.tries, try, nil
}

// end forgets the try key, which has returned, and frees its context.
func (p *probes) end(key int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cancel[key](nil) // a cause set by hold stays
	delete(p.cancel, key)
	if len(p.cancel) == 0 && p.done != nil {
		close(p.done)
		p.done = nil
	}
}

// hold ends every try in flight and returns once each has returned (its
// group killed and released), or with an error, the tries still held, if
// ctx ends first; no try starts until release.
func (p *probes) hold(ctx context.Context) error {
	p.mu.Lock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
	var done chan struct{}
	if len(p.cancel) > 0 {
		if p.done == nil {
			p.done = make(chan struct{})
		}
		done = p.done
		for _, cancel := range p.cancel {
			cancel(errHeld)
		}
	}
	n := len(p.cancel)
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("end the %d ready probe tries in flight: %w", n, ctx.Err())
	}
}

// release lets the tries run again: those that hold ended, from their
// start, and those that waited for it.
func (p *probes) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}
