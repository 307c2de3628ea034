package ptyio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
// input on /dev/null and its output and error on a pipe (the end of
// which a ProbeExit holds), in a session of its own, inside a
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
	null, err := os.OpenFile(os.DevNull, os.O_RDONLY, 0)
	if err != nil {
		return errors.Join(&StartError{cmd.Line, err}, g.Close())
	}
	defer null.Close() // Best effort: read only; the child has its copy.
	out, w, err := os.Pipe()
	if err != nil {
		return errors.Join(&StartError{cmd.Line, err}, g.Close())
	}
	argv, script := probeArgv(cmd)
	files, line, err := withScript([]uintptr{null.Fd(), w.Fd(), w.Fd()}, script)
	if err != nil {
		return errors.Join(&StartError{cmd.Line, err}, out.Close(), w.Close(), g.Close())
	}
	printed := make(chan []byte, 1)
	go func() { printed <- readTail(out, probeTail) }()
	sys := &syscall.SysProcAttr{}
	watch := procexit.AtFork(sys)
	attr := &syscall.ProcAttr{Dir: cmd.Dir, Env: cmd.Env, Files: files, Sys: sys}
	pid, err := g.ForkExec(argv[0], argv, attr)
	_ = w.Close() // Best effort: the child has its copies.
	if line != nil {
		_ = line.Close() // Best effort, as w.
	}
	l.prepareNext() // the probe took the spare group, if one was made
	read := false   // what printed sent was taken
	defer func() {
		_ = out.Close() // Best effort: read only; ends a read that a process outliving its SIGKILL holds.
		if !read {
			<-printed
		}
	}()
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
		// The group is empty (or given up on): the pipe's end is near.
		exit := &ProbeExit{Status: status}
		select {
		case exit.Output = <-printed:
			read = true
		case <-time.After(probeGrace):
		}
		return exit
	}
	return nil
}

// probeArgv returns the argument vector that runs cmd as Shell -c Line,
// and the script the shell must find as its descriptor 3, or ""
// (bourneArgv).
func probeArgv(cmd Command) (argv []string, script string) {
	if bourneShells[filepath.Base(cmd.Shell)] {
		return bourneArgv(cmd.Shell, "", cmd.Line)
	}
	return []string{cmd.Shell, "-c", cmd.Line}, ""
}

// probeTail is how much of the end of its output a probe keeps.
const probeTail = 4 << 10

// readTail reads r to its end (or its first error) and returns the last
// n bytes it read.
func readTail(r io.Reader, n int) []byte {
	buf := make([]byte, 0, 2*n)
	chunk := make([]byte, n)
	for {
		k, err := r.Read(chunk)
		buf = append(buf, chunk[:k]...)
		if len(buf) > n {
			buf = append(buf[:0], buf[len(buf)-n:]...)
		}
		if err != nil {
			return buf
		}
	}
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
type ProbeExit struct {
	Status unix.WaitStatus
	// Output is the end of what the probe's processes wrote to their
	// standard output and error (at most 4 KiB), as written.
	Output []byte
}

func (e *ProbeExit) Error() string {
	if e.Status.Signaled() {
		return "killed by " + unix.SignalName(e.Status.Signal())
	}
	return fmt.Sprintf("exit status %d", e.Status.ExitStatus())
}
