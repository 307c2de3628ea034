package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"shellagent/procexit"
)

// StateVersion is the version of the state that an upgrade hands from the
// old image to the new one (the manifest and the Host's state in it). The
// new image's probe names the versions it reads (Probe.Accepts); the old
// image execs it only if its own is among them.
const StateVersion = 2

// ProbeTimeout bounds the whole check of the new binary: it must start
// and answer its probe within it, or the upgrade is rolled back.
const ProbeTimeout = 10 * time.Second

// upgradeTimeout bounds how long the requester waits for the answer:
// the probe, the closing of the connections, the exec and the new image's
// start; AskUpgrade adds the daemon's longest kill grace (Hello.Grace),
// for which the daemon may wait for closing sessions first.
const upgradeTimeout = ProbeTimeout + 20*time.Second

// connsGone bounds how long an upgrade waits for the ACP connections it
// closed to detach their sessions: more than a close takes at most
// (flushTimeout+lineMost).
const connsGone = 4 * time.Second

// ErrCannotFreeze is what a Host's Freeze returns, wrapped with the
// reason, when it holds work it cannot hand over; the upgrade is refused
// and nothing changes.
var ErrCannotFreeze = errors.New("cannot be upgraded in place")

// A Host holds the daemon's work (its sessions, their PTYs, process
// handles, containment groups and rings) across an upgrade in place.
//
// Freeze is called in the old image once every ACP connection has been
// closed (their sessions detached) and no new one is served: it stops
// all work from changing (no reads from PTYs, no new processes, no
// timers that act) and returns the serialized state and the files to
// keep (PTY masters, pidfds, cgroup directory descriptors), in the order
// the state refers to them. The files stay the Host's: the upgrade
// duplicates the ones it passes. If the exec then fails, thaw is called
// and the Host carries on as before; if it succeeds, nothing of the old
// image runs again. An error refuses the upgrade; ErrCannotFreeze (wrapped)
// says the Host cannot hand over what it holds.
//
// In the new image, Resume gives back the state and the files (each a
// new descriptor, close-on-exec, in the same order), with the indexes of
// the process handles whose process is gone or is not the one frozen any
// more (Resumed.Ended); the Host is rebuilt from them before the daemon
// serves again.
type Host interface {
	Freeze(ctx context.Context) (state []byte, files []*os.File, thaw func(), err error)
}

// A Prechecker is a Host that can tell, before anything is stopped,
// that Freeze would refuse: the upgrade is then refused with its error
// while every connection is still served.
type Prechecker interface {
	Precheck() error
}

// Upgrade is what a Server needs to upgrade in place (WantUpgrade).
type Upgrade struct {
	// Args are the daemon's flags, given again to the new image after
	// "daemon --upgrade-state=FD".
	Args []string
	// Lock is the socket's lock, handed to the new image.
	Lock *Lock
	// Host holds the work to hand over.
	Host Host
}

// Probe is what "NEWBIN daemon --upgrade-probe FLAGS..." prints, as one
// JSON line, for the old image to check that it can take over: once it
// has checked the daemon's FLAGS as it would start with them.
type Probe struct {
	Build   string `json:"build"`
	Accepts []int  `json:"accepts"` // the state versions it reads
}

// WriteProbe writes this binary's Probe line, for --upgrade-probe.
func WriteProbe(w io.Writer, build string) error {
	return writeLine(w, Probe{Build: build, Accepts: []int{StateVersion}})
}

// Upgraded is the answer to WantUpgrade: written by the new image once
// it serves, or by the old one, with Error, when the upgrade was refused
// or rolled back and the old image serves on.
type Upgraded struct {
	Pid   int
	Build string // the build that serves now
	Error string `json:",omitempty"`
}

// AskUpgrade asks the daemon at socket to upgrade in place to the binary
// exe (an absolute path), and returns its answer and its hello (the
// build it had). An answer with Error means the old daemon serves on.
func AskUpgrade(socket string, hello Hello, exe string) (Upgraded, Hello, error) {
	var up Upgraded
	hello.Want, hello.Exe = WantUpgrade, exe
	c, err := DialLive(socket, hello)
	if err != nil {
		return up, Hello{}, err
	}
	defer c.Close()
	// The daemon waits for closing sessions, at most its longest kill
	// grace and a few seconds, before the probe.
	c.Conn.SetReadDeadline(time.Now().Add(upgradeTimeout + time.Duration(c.Daemon.Grace)*time.Millisecond)) // Best effort: as in Dial.
	if err := readLine(c.R, &up); err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			return up, c.Daemon, fmt.Errorf("upgrade the daemon at %s: %w", socket, err)
		}
		if WaitExit(c.Daemon.Pid, exitWait) {
			// The new image, which holds this connection from the
			// exec on, ended before it answered.
			return up, c.Daemon, fmt.Errorf("the daemon at %s (pid %d) exited without an answer: the new binary %s, which had passed its probe, took its place and ended before it served, "+
				"or the daemon was stopped or killed meanwhile; see its log for why. Its sessions are gone, as after a crash: the next daemon to start sweeps what their commands left", socket, c.Daemon.Pid, exe)
		}
		return up, c.Daemon, fmt.Errorf("the daemon at %s (build %s) closed the connection without an answer: it cannot upgrade in place (a build from before 'daemon upgrade'), or it is stopping; see its log", socket, c.Daemon.Build)
	}
	return up, c.Daemon, nil
}

// exitWait bounds how long AskUpgrade, once the daemon closed the
// connection without an answer, waits for it to be gone: a process's
// descriptors close as it exits, a moment before it is a zombie.
const exitWait = 2 * time.Second

// WaitExit waits up to d for process pid to exit (to be gone, or a
// zombie) and reports whether it did.
func WaitExit(pid int, d time.Duration) bool {
	w, err := procexit.Watch(pid)
	if errors.Is(err, procexit.ErrGone) {
		return true
	}
	if err != nil {
		return false
	}
	// Best effort, both: closing ends the wait.
	defer w.Close()
	t := time.AfterFunc(d, func() { w.Close() })
	defer t.Stop()
	return w.Wait() == nil
}

// upgrade serves WantUpgrade: it hands everything to exe by exec, in
// place, and returns only when it did not; then it answers why, and the
// daemon serves on.
func (s *Server) upgrade(log *slog.Logger, nc *net.UnixConn, exe string) {
	log.Info("upgrade in place requested", "to", exe)
	err := s.tryUpgrade(log, nc, exe)
	log.Warn("upgrade in place refused or rolled back; serving on", "to", exe, "err", err)
	s.answer(log, nc, Upgraded{Pid: os.Getpid(), Build: s.Build, Error: err.Error()})
}

// tryUpgrade checks exe, freezes the Host and execs exe; it returns only
// on failure, with everything as it was (but the ACP connections, which
// may have been closed).
func (s *Server) tryUpgrade(log *slog.Logger, nc *net.UnixConn, exe string) error {
	if s.Upgrade == nil || s.Upgrade.Host == nil {
		return errors.New("this daemon was not started to be upgraded in place")
	}
	if !filepath.IsAbs(exe) {
		return fmt.Errorf("the new binary %q is not an absolute path", exe)
	}
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return errors.New("the daemon is stopping")
	case s.upgrading:
		s.mu.Unlock()
		return errors.New("another upgrade is under way")
	}
	s.upgrading = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.frozen {
			close(s.thawed)
		}
		s.upgrading, s.frozen = false, false
		s.mu.Unlock()
	}()
	host := s.Upgrade.Host
	if p, ok := host.(Prechecker); ok {
		if err := p.Precheck(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
	defer cancel()
	probe, err := runProbe(ctx, log, exe, s.Upgrade.Args)
	if err != nil {
		return err
	}
	log.Info("the new binary answered its probe", "build", probe.Build)
	s.closeConns(log)
	state, files, thaw, err := host.Freeze(ctx)
	if err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	if err := s.execNew(nc, exe, state, files); err != nil {
		thaw()
		return err
	}
	panic("unreachable: exec returned no error")
}

// runProbe runs "exe daemon --upgrade-probe args..." and checks its
// answer: the new binary checks the daemon's flags, args, as it would
// start with them, before it answers. The probe runs in a session of its
// own, and once it has exited, or ctx has ended, every process of that
// session and every descendant of the probe is killed (endProbe), so
// that nothing it started outlives it, whatever the outcome: a probe that
// hangs in a script's child, or leaves one running.
func runProbe(ctx context.Context, log *slog.Logger, exe string, args []string) (Probe, error) {
	var p Probe
	cmd := exec.Command(exe, append([]string{"daemon", "--upgrade-probe"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limited{&stdout, 64 << 10}, &limited{&stderr, 4 << 10}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.ENOEXEC) || errors.Is(err, os.ErrNotExist) {
			return p, fmt.Errorf("the new binary %s cannot be executed: %w", exe, err)
		}
		return p, fmt.Errorf("the new binary %s cannot be started: %w", exe, err)
	}
	timedOut, err := awaitProbe(ctx, cmd)
	if err != nil {
		log.Warn("the new binary's probe left processes", "to", exe, "err", err)
	}
	err = cmd.Wait()
	why := strings.TrimSpace(stderr.String())
	if why != "" {
		why = ": " + why
	}
	switch {
	case timedOut:
		return p, fmt.Errorf("the new binary %s did not answer its probe (daemon --upgrade-probe) in time (%v)", exe, ProbeTimeout)
	case err != nil:
		return p, fmt.Errorf("the new binary %s failed its probe (daemon --upgrade-probe): %v%s", exe, err, why)
	}
	line, _, _ := bytes.Cut(stdout.Bytes(), []byte("\n"))
	if json.Unmarshal(line, &p) != nil || p.Build == "" {
		return p, fmt.Errorf("the new binary %s exited without answering its probe (daemon --upgrade-probe): not a shellagent that can take over a daemon; it printed %.80q%s", exe, stdout.String(), why)
	}
	if !slices.Contains(p.Accepts, StateVersion) {
		return p, fmt.Errorf("the new binary %s (build %s) reads state versions %v, not this daemon's %d: stop this daemon (daemon stop) to change to it", exe, p.Build, p.Accepts, StateVersion)
	}
	return p, nil
}

// awaitProbe waits for the probe cmd, started, to exit, or for ctx to
// end first (timedOut), then kills whatever is left of it (endProbe),
// the probe too, before cmd.Wait reaps it: until then its pid names its
// session and process group, and nothing else. err says what could not
// be killed.
func awaitProbe(ctx context.Context, cmd *exec.Cmd) (timedOut bool, err error) {
	pid := cmd.Process.Pid
	w, werr := procexit.WatchChild(pid)
	if werr != nil {
		// Never for a child not yet reaped; kill it at once all the same.
		return ctx.Err() != nil, errors.Join(fmt.Errorf("watch probe %d: %w", pid, werr), endProbe(pid))
	}
	defer w.Close() // Best effort: the wait below is over.
	exited := make(chan struct{})
	go func() {
		w.Wait() // Best effort: an error is Close's, after the timeout.
		close(exited)
	}()
	select {
	case <-exited:
	case <-ctx.Done():
		timedOut = true
	}
	err = endProbe(pid)
	w.Close() // Best effort: ends a wait that the kill has not ended yet.
	<-exited
	if err != nil {
		return timedOut, fmt.Errorf("end probe %d: %w", pid, err)
	}
	return timedOut, nil
}

// limited keeps the first n bytes written to it and drops the rest.
type limited struct {
	b *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// closeConns closes every ACP connection, which detaches its sessions,
// and waits, at most connsGone, for them to be gone. From then on, new
// connections wait for the end of the upgrade before their hello
// (awaitThaw); until then (the probe) they are served, as ever, and
// closed here with the others.
func (s *Server) closeConns(log *slog.Logger) {
	s.mu.Lock()
	s.frozen, s.thawed = true, make(chan struct{})
	n := len(s.conns)
	for c := range s.conns {
		c.nc.CloseRead() // Best effort: ends its reads; it then detaches and closes.
	}
	s.mu.Unlock()
	if n > 0 {
		log.Info("closing the connections for the upgrade", "connections", n)
	}
	for deadline := time.Now().Add(connsGone); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		n = len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			return
		}
	}
	log.Warn("connections still open at the upgrade", "connections", n)
}
