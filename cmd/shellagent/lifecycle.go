package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"shellagent/contain"
	"shellagent/protocol"
	"shellagent/supervisor"
)

// stopSignals end the agent as stdin EOF does: the client's terminal
// closing (SIGHUP), Ctrl-C (SIGINT), Ctrl-\ (SIGQUIT), a service manager
// (SIGTERM).
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// lastWords bounds, together, the wait for the final updates of sessions
// whose processes had to be killed with the containment and the flush of
// every last message to a client that does not keep up (but for the line
// under way at its end, which has until the exit's own deadline).
const lastWords = 250 * time.Millisecond

// exitReserve is the part of the promised "longest kill grace plus one
// second" that no wait may take: the kills with the containment, its
// close and the exit (70 to 150 ms each under -race on a loaded machine).
const exitReserve = 200 * time.Millisecond

// modeFlag is the --containment flag.
type modeFlag contain.Mode

func (m *modeFlag) String() string { return string(*m) }

func (m *modeFlag) Set(v string) error {
	mode, err := contain.ParseMode(v)
	if err != nil {
		return err
	}
	*m = modeFlag(mode)
	return nil
}

// openContainment opens containment in mode, after marking every inherited
// descriptor close-on-exec so that commands get only their PTY, and starts
// sweeping what dead agents left behind; swept is closed when that is done.
func openContainment(log *slog.Logger, mode contain.Mode) (c *contain.Containment, swept <-chan struct{}, err error) {
	if err := closeOnExec(); err != nil {
		return nil, nil, fmt.Errorf("inherited descriptors: %w", err)
	}
	c, err = contain.Open(mode)
	if err != nil {
		return nil, nil, fmt.Errorf("--containment %s: %w", mode, err)
	}
	if why := c.CgroupError(); why != nil {
		log.Info("containment: subreaper (cgroups are not available)", "why", why)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cgroups, procs, err := c.Sweep()
		if cgroups > 0 || procs > 0 {
			log.Info("swept what dead agents left", "cgroups", cgroups, "processes", procs)
		}
		if err != nil {
			log.Warn("sweep", "err", err)
		}
	}()
	return c, done, nil
}

// output is the agent's stdout. Gone is closed once the client has closed
// it: a write failed (EPIPE), or epoll reports the reading end gone while
// nothing is written.
type output struct {
	f    *os.File
	gone chan struct{}
	once sync.Once
	stop func() // stops watching
}

func newOutput(log *slog.Logger, f *os.File) *output {
	o := &output{f: f, gone: make(chan struct{}), stop: func() {}}
	stop, err := watchHangup(descriptor(f), o.hangup)
	if err != nil {
		// A regular file or /dev/null: nobody can close it under us.
		log.Debug("stdout is not watched", "err", err)
		return o
	}
	o.stop = stop
	return o
}

// descriptor returns f's descriptor without taking f out of the runtime
// poller, as f.Fd would.
func descriptor(f *os.File) int {
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(d uintptr) { fd = int(d) }) // Best effort: -1 fails the watch, which says so.
	}
	return fd
}

func (o *output) Write(p []byte) (int, error) {
	n, err := o.f.Write(p)
	if err != nil {
		o.hangup()
	}
	return n, err
}

// SyscallConn gives the connection's writer stdout's descriptor, so that
// it can see how much of what it wrote the client has read (a pipe's or a
// socket's unread bytes): that is how it tells a slow client from a
// stalled one.
func (o *output) SyscallConn() (syscall.RawConn, error) { return o.f.SyscallConn() }

func (o *output) hangup() { o.once.Do(func() { close(o.gone) }) }

// endOfInput is what waitForEnd returns for stdin EOF.
const endOfInput = "stdin closed"

// waitForEnd waits for the end of the agent: stdin EOF, a stop signal on
// sigs, or a client that closed stdout. It returns what it was.
func waitForEnd(conn *protocol.Conn, out *output, sigs <-chan os.Signal) string {
	select {
	case <-conn.Done():
		return endOfInput
	case sig := <-sigs:
		return sig.String()
	case <-out.gone:
		return "stdout closed"
	}
}

// shutdown stops every command, each session with its own kill grace,
// sends the last messages, and leaves nothing behind: what a stop could not
// end is killed with the containment. It takes at most the longest kill
// grace in use plus one second, but for processes that SIGKILL does not
// end (see stopSessions).
// An agent started only to sweep (shellagent </dev/null) waits for the
// sweep to finish. A stop signal on sigs while the commands stop (a second
// Ctrl-C, a service manager that insists) skips the rest of their kill
// grace: everything left is killed at once.
func shutdown(log *slog.Logger, sup *supervisor.Supervisor, conn *protocol.Conn, out *output, c *contain.Containment, end *ending, swept <-chan struct{}, sigs <-chan os.Signal) int {
	stopped := hurryOnSignal(log, c, sigs)
	last, by, _ := stopSessions(log, sup, c, end, waitsEnd(sup)) // logged; the exit is the same
	// The last messages go until last; the line under way then is
	// finished, until by at the latest, so that a client that reads
	// holds whole lines only (see protocol.Conn.CloseBy).
	flushed := make(chan struct{})
	go func() { conn.CloseBy(last); close(flushed) }()
	wait := time.NewTimer(time.Until(by))
	defer wait.Stop()
	select {
	case <-flushed:
	case <-wait.C:
		log.Warn("client is not reading; exiting in the middle of a line")
	}
	out.stop()
	stopped()
	closeContainment(log, c, swept)
	return 0
}

// hurryOnSignal kills every command with the containment at once if a
// stop signal arrives on sigs before stopped is called; stopped returns
// once the watch has ended.
func hurryOnSignal(log *slog.Logger, c *contain.Containment, sigs <-chan os.Signal) (stopped func()) {
	done, hurried := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(hurried)
		select {
		case sig := <-sigs:
			log.Info("stopping every command now", "because", sig.String())
			if err := c.KillAll(); err != nil {
				log.Error("containment", "err", err)
			}
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-hurried
	}
}

// waitsEnd returns when the waits of an end that begins now must be over:
// the longest kill grace in use plus one second, less exitReserve.
func waitsEnd(sup *supervisor.Supervisor) time.Time {
	return time.Now().Add(sup.LongestGrace() + time.Second - exitReserve)
}

// stopSessions closes every session as session/close does, each with its
// own kill grace, and waits for them; what a stop could not end in time
// is killed with the containment, and err says so. The sessions' final
// updates are then waited for until last: lastWords after the stops
// ended, by at the latest. The flush of the last messages shares that
// wait, and the line under way then has until cut.
//
// A process that outlives its SIGKILL (uninterruptible sleep) holds the
// containment's kill for contain.CloseTimeout twice; its terminal is
// given up on meanwhile (end, ptyio.Local.Ending), and its final update
// is waited for after the kill, for lastWords, and cut is moved as far
// past by, so that it is sent before the agent exits.
func stopSessions(log *slog.Logger, sup *supervisor.Supervisor, c *contain.Containment, end *ending, by time.Time) (last, cut time.Time, err error) {
	err = sup.Shutdown(context.Background())
	if last = time.Now().Add(lastWords); last.After(by) {
		last = by
	}
	if err == nil {
		return last, by, nil
	}
	log.Error("processes did not stop in time; killing them", "err", err)
	end.now()
	if err := c.KillAll(); err != nil {
		log.Error("containment", "err", err)
	}
	if after := time.Now().Add(lastWords); after.After(by) {
		// The kill waited for processes that do not die: their
		// terminals were given up on meanwhile.
		last, by = after, after.Add(lastWords)
	}
	ctx, cancel := context.WithDeadline(context.Background(), last)
	defer cancel()
	if err := sup.Shutdown(ctx); err != nil {
		log.Warn("final updates not all sent", "err", err)
	}
	return last, by, err
}

// ending is the end of the agent as its launcher sees it
// (ptyio.Local.Ending): closed once the end's wait for the stops has run
// out, so that a terminal whose processes outlive their SIGKILL is
// reported ended before the agent exits.
type ending struct {
	c    chan struct{}
	once sync.Once
}

func newEnding() *ending { return &ending{c: make(chan struct{})} }

// now closes the ending; later calls do nothing.
func (e *ending) now() { e.once.Do(func() { close(e.c) }) }

// closeContainment waits for the sweep of dead agents' leftovers, for at
// most contain.SweepTimeout, and closes the containment.
func closeContainment(log *slog.Logger, c *contain.Containment, swept <-chan struct{}) {
	select {
	case <-swept:
	case <-time.After(contain.SweepTimeout):
		log.Warn("exiting before the sweep of dead agents' leftovers is done")
	}
	if err := c.Close(); err != nil {
		log.Error("containment", "err", err)
	}
}
