// Package signals stops a set of processes: SIGTERM, SIGCONT and SIGHUP
// first, SIGKILL after a grace period. This file is the whole rule.
//
// SIGCONT wakes stopped processes so that they can act on SIGTERM; SIGHUP
// reaches interactive shells, which ignore SIGTERM. What the set is (a
// cgroup, or the processes attributed to a terminal) is the Target's
// business.
package signals

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// killRepeat is how often SIGKILL is sent again while processes remain
// (where the kernel cannot kill a whole set at once, a process forked
// between listing and signalling would be missed).
const killRepeat = 100 * time.Millisecond

// A Target is a set of processes stopped together.
type Target interface {
	// Signal sends sigs, in order, to every process of the set, and
	// reports whether they reached a live one.
	Signal(sigs ...unix.Signal) (reached bool, err error)
	// Kill sends SIGKILL to every process of the set, and reports whether
	// one of them was live and not already ended by an earlier signal.
	Kill() (reached bool, err error)
}

// Name returns the conventional name of sig, such as "SIGTERM". A
// real-time signal is named as bash's kill -l names it, from the C
// library's SIGRTMIN and SIGRTMAX ("SIGRTMIN+3", "SIGRTMAX-1"); a signal
// with no name at all is "SIG" and its number ("SIG32": glibc keeps 32
// and 33 for itself, below its SIGRTMIN), never Go's "signal 37".
func Name(sig unix.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	switch min, max := rtRange(); {
	case min == 0 || sig < min || sig > max:
	case sig == min:
		return "SIGRTMIN"
	case sig == max:
		return "SIGRTMAX"
	case sig-min <= (max-min)/2:
		return "SIGRTMIN+" + strconv.Itoa(int(sig-min))
	default:
		return "SIGRTMAX-" + strconv.Itoa(int(max-sig))
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// rtRange is the C library's SIGRTMIN and SIGRTMAX, or 0, 0 where there
// are no real-time signals (macOS). On Linux glibc's, which keeps the
// kernel's first two (32 and 33) for its threads: bash and procps name 34
// SIGRTMIN there.
func rtRange() (min, max unix.Signal) {
	switch runtime.GOOS {
	case "linux":
		return 34, 64
	case "freebsd":
		return 65, 126
	}
	return 0, 0
}

// An Escalation stops a Target: SIGTERM, SIGCONT and SIGHUP at once, then
// SIGKILL once the grace period has passed since Escalate, however long
// the first round took (or at once after Hurry), repeated until Finish is
// called. The caller watches the target and calls Finish once it is empty.
type Escalation struct {
	target   Target
	hurry    chan struct{}
	hurried  sync.Once
	finish   chan struct{}
	finished sync.Once
	exited   chan struct{}
	last     atomic.Int32

	mu  sync.Mutex // guards err
	err error      // the first error met
}

// Escalate starts stopping t in its own goroutine, so that it never
// blocks its caller.
func Escalate(t Target, grace time.Duration) *Escalation {
	e := &Escalation{
		target: t,
		hurry:  make(chan struct{}),
		finish: make(chan struct{}),
		exited: make(chan struct{}),
	}
	// The grace runs from now, not from the end of the first round:
	// signalling a large set (a /proc scan per round in subreaper mode)
	// can take a good part of it on a loaded machine.
	go e.run(time.NewTimer(grace))
	return e
}

func (e *Escalation) run(t *time.Timer) {
	defer close(e.exited)
	defer t.Stop()
	e.record(unix.SIGTERM)(e.target.Signal(unix.SIGTERM, unix.SIGCONT, unix.SIGHUP))
	select {
	case <-e.finish:
		return
	case <-t.C:
	case <-e.hurry:
	}
	tick := time.NewTicker(killRepeat)
	defer tick.Stop()
	for {
		e.record(unix.SIGKILL)(e.target.Kill())
		select {
		case <-e.finish:
			return
		case <-tick.C:
		}
	}
}

// record returns what notes the outcome of sending sig.
func (e *Escalation) record(sig unix.Signal) func(reached bool, err error) {
	return func(reached bool, err error) {
		if reached {
			e.last.Store(int32(sig))
		}
		if err != nil {
			e.mu.Lock()
			if e.err == nil {
				e.err = err
			}
			e.mu.Unlock()
		}
	}
}

// Hurry skips the rest of the grace period: SIGKILL goes out now.
func (e *Escalation) Hurry() {
	e.hurried.Do(func() { close(e.hurry) })
}

// Finish ends the escalation; call it once the target is empty. It waits
// for the escalation's goroutine to return.
func (e *Escalation) Finish() {
	e.finished.Do(func() { close(e.finish) })
	<-e.exited
}

// Last returns the last signal that reached a live process: SIGTERM, or
// SIGKILL after escalating; 0 if none did (the target had already ended).
func (e *Escalation) Last() unix.Signal {
	return unix.Signal(e.last.Load())
}

// Err returns the first error met while signalling, or nil.
func (e *Escalation) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
