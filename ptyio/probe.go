package ptyio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/contain"
	"shellagent/procexit"
)

// probeGrace bounds each wait of a probe once it is killed: for its
// shell's exit, and for its group to empty.
const probeGrace = time.Second

// Probe implements Launcher: cmd runs as Shell -c Line with its standard
// input, output and error on /dev/null, in a session of its own, inside a
// new group of the Containment. Once the shell has exited, or ctx has
// ended, every process of the group is killed, whatever left the session
// (setsid, a daemon's double fork) included, and waited for.
func (l Local) Probe(ctx context.Context, cmd Command) error {
	if l.Containment == nil {
		return &StartError{cmd.Line, errors.New("ptyio.Local has no Containment")}
	}
	g, err := l.Containment.NewGroup()
	if err != nil {
		return &StartError{cmd.Line, err}
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return errors.Join(&StartError{cmd.Line, err}, g.Close())
	}
	sys := &syscall.SysProcAttr{}
	watch := procexit.AtFork(sys)
	attr := &syscall.ProcAttr{Dir: cmd.Dir, Env: cmd.Env, Files: []uintptr{null.Fd(), null.Fd(), null.Fd()}, Sys: sys}
	argv := []string{cmd.Shell, "-c", cmd.Line}
	pid, err := g.ForkExec(argv[0], argv, attr)
	_ = null.Close() // Best effort: the child has its copies.
	l.prepareNext()  // the probe took the spare group, if one was made
	if err != nil {
		return errors.Join(&StartError{cmd.Line, startError(err, argv[0], cmd.Dir)}, g.Close())
	}
	shell, err := watch(pid)
	if err != nil {
		return errors.Join(&StartError{cmd.Line, err}, abort(pid, g))
	}
	defer shell.Close() // Best effort: a pidfd, read only.
	status, err := awaitProbe(ctx, shell, g)
	switch {
	case err != nil:
		return fmt.Errorf("probe %d: %w", pid, err)
	case !status.Exited() || status.ExitStatus() != 0:
		return &ProbeExit{status}
	}
	return nil
}

// awaitProbe waits for the probe's shell to exit, or for ctx to end; then
// kills its group (the shell too, if it runs), waits for the shell,
// reaps it, waits for the group to empty, and releases it. Killing before
// the reap keeps the shell's pid, which leads the group's session, from
// naming anyone else's meanwhile.
func awaitProbe(ctx context.Context, shell *procexit.Process, g contain.Group) (unix.WaitStatus, error) {
	exited := make(chan error, 1)
	go func() { exited <- shell.Wait() }()
	var err error
	select {
	case err = <-exited:
		exited = nil
	case <-ctx.Done():
	}
	_, kerr := g.Kill()
	err = errors.Join(err, kerr)
	if exited != nil { // cut short: the kill ends the shell
		select {
		case werr := <-exited:
			err = errors.Join(err, werr, ctx.Err())
		case <-time.After(probeGrace):
			shell.Close() // Wait returns ErrClosed.
			<-exited
			return 0, errors.Join(err, fmt.Errorf("pid %d still running after SIGKILL", shell.Pid()), g.Close())
		}
	}
	status, serr := shell.Status()
	err = errors.Join(err, serr, shell.Reap())
	select {
	case <-g.Done():
	case <-time.After(probeGrace):
		err = errors.Join(err, fmt.Errorf("processes of %d still running after SIGKILL", shell.Pid()))
	}
	return status, errors.Join(err, g.Close())
}

// A ProbeExit is a probe whose shell exited with a status other than 0,
// or was killed by a signal.
type ProbeExit struct{ Status unix.WaitStatus }

func (e *ProbeExit) Error() string {
	if e.Status.Signaled() {
		return "killed by " + unix.SignalName(e.Status.Signal())
	}
	return fmt.Sprintf("exit status %d", e.Status.ExitStatus())
}
