package ptyio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"shellagent/signals"
)

// hupIgnored runs "$0 -c $1" with SIGHUP ignored; see the package comment.
const hupIgnored = `trap '' HUP; exec "$0" -c "$1"`

// readSize is the most one PTY read takes; the kernel returns about 4 KiB.
const readSize = 32 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, readSize); return &b }}

// Local starts commands in PTYs on this machine.
type Local struct{}

var _ Launcher = Local{}

// Launch starts cmd in a new session with a new PTY as its controlling
// terminal, and starts reading the PTY before it returns.
func (Local) Launch(cmd Command, out io.Writer, ev Events) (Process, error) {
	master, tty, err := OpenPTY(cmd.Size)
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", cmd.Line, err)
	}
	pidfd := -1
	attr := &syscall.ProcAttr{
		Dir:   cmd.Dir,
		Env:   cmd.Env,
		Files: []uintptr{tty.Fd(), tty.Fd(), tty.Fd()},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, PidFD: &pidfd},
	}
	argv := []string{"/bin/sh", "-c", hupIgnored, cmd.Shell, cmd.Line}
	pid, err := syscall.ForkExec(argv[0], argv, attr)
	tty.Close() // the child has its copies; keeping ours would hide EIO
	if err != nil {
		master.Close()
		return nil, fmt.Errorf("start %q: %w", cmd.Line, err)
	}
	shell, err := newPidFile(pid, pidfd)
	if err != nil {
		master.Close()
		return nil, err
	}
	p := &local{pid: pid, master: master, shell: shell, out: out, ev: ev, readDone: make(chan struct{})}
	go p.read()
	go p.run()
	return p, nil
}

// OpenPTY opens a PTY pair of the given size and returns a non-blocking
// master served by the runtime poller: reads park a goroutine, not an OS
// thread, and deadlines work. creack/pty's Open leaves the master in
// blocking mode (it calls Fd), so its descriptor is duplicated into a fresh
// non-blocking one; never call Fd on the master returned. Close tty once the
// command has started.
func OpenPTY(size Size) (master, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Cols: size.Cols, Rows: size.Rows}); err != nil {
		tty.Close()
		return nil, nil, fmt.Errorf("set size: %w", err)
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		tty.Close()
		return nil, nil, fmt.Errorf("dup pty master: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), tty, nil
}

// local is a command running in a local PTY. Its lifecycle belongs to the
// run goroutine; the reader goroutine owns reads of master.
type local struct {
	pid      int
	master   *os.File
	shell    *pidFile
	out      io.Writer
	ev       Events
	readDone chan struct{}

	mu   sync.Mutex // guards esc
	esc  *signals.Escalation
	done bool // run has finished; Stop does nothing
}

func (p *local) Pid() int { return p.pid }

// Stop implements Process.
func (p *local) Stop(grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.done:
	case p.esc == nil:
		p.esc = signals.Escalate(p.pid, grace)
	default:
		p.esc.Hurry()
	}
}

// read copies the PTY into out until EIO (every slave descriptor closed),
// the drain deadline, or Close.
func (p *local) read() {
	defer close(p.readDone)
	rc, err := p.master.SyscallConn()
	if err != nil {
		return
	}
	var rerr error
	readOnce := func(fd uintptr) bool {
		bp := readBufs.Get().(*[]byte)
		defer readBufs.Put(bp)
		n, err := unix.Read(int(fd), *bp)
		if err == unix.EAGAIN {
			return false
		}
		if n > 0 {
			p.out.Write((*bp)[:n])
		}
		rerr = err
		if err == nil && n == 0 {
			rerr = io.EOF
		}
		return true
	}
	for {
		if err := rc.Read(readOnce); err != nil {
			return // deadline or closed
		}
		if rerr != nil && rerr != unix.EINTR {
			return // EIO: nobody holds the terminal open any more
		}
	}
}

// run follows the command to its end: the shell's exit, then every other
// process of its session, then the last of its output.
func (p *local) run() {
	// An error leaves the status unknown (neither code nor signal); it
	// cannot happen for our own unreaped child.
	status, _ := p.waitShell()
	procs, _ := signals.SessionMembers(p.pid)
	if len(procs) > 0 {
		p.ev.ShellReturned(status)
	}
	p.waitSessionEmpty(procs)
	p.shell.reap()
	p.shell.close()
	p.master.SetReadDeadline(time.Now().Add(DrainTimeout))
	<-p.readDone
	p.master.Close()

	p.mu.Lock()
	p.done = true
	esc := p.esc
	p.mu.Unlock()
	exit := Exit{Shell: status}
	if esc != nil {
		esc.Finish()
		if sig := esc.Last(); sig != 0 {
			exit.Stopped = signals.Name(sig)
		}
	}
	p.ev.Exited(exit)
}

func (p *local) waitShell() (Status, error) {
	if err := p.shell.wait(); err != nil {
		return Status{}, err
	}
	return p.shell.status()
}

// waitSessionEmpty returns once no live process is left in the session,
// starting from the members of a first scan. A session cannot gain members
// from outside, so it is empty once a scan finds nobody; until then it waits
// on the oldest member, the one most likely to outlive the others, and
// scans again when that one exits.
func (p *local) waitSessionEmpty(procs []signals.Proc) {
	for len(procs) > 0 {
		if err := waitProc(procs[0]); err != nil && !errors.Is(err, unix.ESRCH) {
			time.Sleep(10 * time.Millisecond) // unexpected; do not spin
		}
		var err error
		if procs, err = signals.SessionMembers(p.pid); err != nil {
			return
		}
	}
}

// waitProc waits for the exit of a process that is not our child.
func waitProc(proc signals.Proc) error {
	f, err := openPidFile(proc.Pid)
	if err != nil {
		return err
	}
	defer f.close()
	if now, ok := signals.Stat(proc.Pid); !ok || now.Start != proc.Start {
		return nil // it exited, and the pid may be another process now
	}
	return f.wait()
}
