package signals

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// killRepeat is how often SIGKILL is sent again while processes remain, to
// catch children forked between a scan and the signal.
const killRepeat = 100 * time.Millisecond

// Name returns the conventional name of sig, such as "SIGTERM".
func Name(sig unix.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return "SIG" + sig.String()
}

// SignalSession sends each of sigs, in order, to every live process of
// session sid: first to process group sid (the leader's group) with one
// kill(2), then to each process found in /proc through a pidfd, after
// checking that the pidfd names the process the scan saw, so that a reused
// pid is never signalled. It returns how many live processes it found; 0
// means the session is empty and nothing was sent.
func SignalSession(sid int, sigs ...unix.Signal) (int, error) {
	procs, err := SessionMembers(sid)
	if err != nil || len(procs) == 0 {
		return 0, err
	}
	for _, sig := range sigs {
		// The group may be gone (only its zombie leader left): ESRCH is fine.
		_ = unix.Kill(-sid, sig)
	}
	var errs []error
	for _, p := range procs {
		errs = append(errs, signalProc(p, sigs))
	}
	return len(procs), errors.Join(errs...)
}

func signalProc(p Proc, sigs []unix.Signal) error {
	fd, err := unix.PidfdOpen(p.Pid, 0)
	if err != nil {
		return nil // exited since the scan
	}
	defer unix.Close(fd)
	if now, ok := Stat(p.Pid); !ok || now.Start != p.Start || now.Sid != p.Sid {
		return nil // exited, or the pid now names another process
	}
	for _, sig := range sigs {
		if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

// An Escalation stops a process session: SIGTERM, SIGCONT and SIGHUP at
// once, then SIGKILL after the grace period (or at once after Hurry), repeated
// until Finish is called. The caller watches the session and calls Finish
// when it is empty.
type Escalation struct {
	sid      int
	hurry    chan struct{}
	hurried  sync.Once
	finish   chan struct{}
	finished sync.Once
	exited   chan struct{}
	last     atomic.Int32
}

// Escalate sends SIGTERM, SIGCONT and SIGHUP to process group sid before
// it returns, and starts the rest of the escalation in a goroutine that ends
// when Finish is called: the same signals to every other process of the
// session (found by a /proc scan, which costs more than the caller should
// wait for), then SIGKILL after the grace.
func Escalate(sid int, grace time.Duration) *Escalation {
	e := &Escalation{
		sid:    sid,
		hurry:  make(chan struct{}),
		finish: make(chan struct{}),
		exited: make(chan struct{}),
	}
	if unix.Kill(-sid, unix.SIGTERM) == nil {
		e.last.Store(int32(unix.SIGTERM))
		unix.Kill(-sid, unix.SIGCONT)
		unix.Kill(-sid, unix.SIGHUP)
	}
	go e.run(grace)
	return e
}

func (e *Escalation) send(sigs ...unix.Signal) {
	if n, _ := SignalSession(e.sid, sigs...); n > 0 {
		e.last.Store(int32(sigs[0]))
	}
}

func (e *Escalation) run(grace time.Duration) {
	defer close(e.exited)
	e.send(unix.SIGTERM, unix.SIGCONT, unix.SIGHUP)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-e.finish:
		return
	case <-t.C:
	case <-e.hurry:
	}
	tick := time.NewTicker(killRepeat)
	defer tick.Stop()
	for {
		e.send(unix.SIGKILL)
		select {
		case <-e.finish:
			return
		case <-tick.C:
		}
	}
}

// Hurry skips the rest of the grace period: SIGKILL goes out now.
func (e *Escalation) Hurry() {
	e.hurried.Do(func() { close(e.hurry) })
}

// Finish ends the escalation; call it once the session is empty. It waits
// for the escalation's goroutine to return.
func (e *Escalation) Finish() {
	e.finished.Do(func() { close(e.finish) })
	<-e.exited
}

// Last returns the last signal the escalation had to send (SIGTERM, or
// SIGKILL after escalating), or 0 if the session was already empty.
func (e *Escalation) Last() unix.Signal {
	return unix.Signal(e.last.Load())
}
