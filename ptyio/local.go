package ptyio

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/contain"
	"shellagent/procexit"
	"shellagent/signals"
)

// hupTrap, put before the command line of a shell of the Bourne family,
// ignores SIGHUP in the shell and, inherited, in everything it starts;
// see the package comment. On the line's own first line, so that the
// shell's line numbers stay the user's.
const hupTrap = "trap '' HUP; "

// hupWrapper runs "$0 -c $1" with SIGHUP ignored, for a shell hupTrap
// does not suit: /bin/sh ignores it and execs the user's shell.
const hupWrapper = `trap '' HUP; exec "$0" -c "$1"`

// bourneShells are the shells, by base name, that read hupTrap as sh
// does.
var bourneShells = map[string]bool{"sh": true, "ash": true, "dash": true, "bash": true, "ksh": true, "mksh": true, "zsh": true}

// LongLine is the length from which a command line reaches a shell of
// the Bourne family in a file, not in its arguments: Linux takes at most
// 128 KiB in one argument (MAX_ARG_STRLEN), and macOS and FreeBSD at most
// 1 MiB and 256 KiB in all of them and the environment (ARG_MAX).
const LongLine = 64 << 10

// readLine is the -c script of a long line. The line's file (lineScript)
// is the shell's descriptor 3: the shell reads it with its dot command,
// which sets the positional parameters to the line; closes it, so that
// nothing the line starts inherits it; and evaluates the line with the
// parameters emptied again, as they are in SHELL -c LINE.
const readLine = `. /dev/stdin <&3 && exec 3<&- && eval "shift; $1"`

// shellArgv returns the argument vector that runs cmd as Shell -c Line
// with SIGHUP ignored: one exec for a shell of the Bourne family, two
// (/bin/sh's, then the shell's) for any other; and the script the shell
// must find as its descriptor 3, or "" (bourneArgv).
func shellArgv(cmd Command) (argv []string, script string) {
	if bourneShells[filepath.Base(cmd.Shell)] {
		return bourneArgv(cmd.Shell, hupTrap, cmd.Line)
	}
	return []string{"/bin/sh", "-c", hupWrapper, cmd.Shell, cmd.Line}, ""
}

// bourneArgv returns the argument vector that runs prefix, then line, in
// shell, a shell of the Bourne family, as shell -c prefix+line would; and
// the script the shell must find as its descriptor 3, or "". A line of
// LongLine bytes or more is read from there (readLine).
func bourneArgv(shell, prefix, line string) (argv []string, script string) {
	if len(line) < LongLine {
		return []string{shell, "-c", prefix + line}, ""
	}
	return []string{shell, "-c", prefix + readLine}, lineScript(line)
}

// lineScript returns the script that sets the positional parameters to
// line, quoted byte for byte.
func lineScript(line string) string {
	return "set -- '" + strings.ReplaceAll(line, "'", `'\''`) + "'"
}

// withScript returns files with, if script is not empty, a file that
// holds it (lineFile) as the next descriptor, and that file, which the
// caller closes once the child has started.
func withScript(files []uintptr, script string) ([]uintptr, *os.File, error) {
	if script == "" {
		return files, nil, nil
	}
	f, err := lineFile(script)
	if err != nil {
		return nil, nil, fmt.Errorf("pass the command line: %w", err)
	}
	return append(files, f.Fd()), f, nil
}

// readSize is the most one PTY read takes; the kernel returns about 4 KiB.
const readSize = 32 << 10

var readBufs = sync.Pool{New: func() any { b := make([]byte, readSize); return &b }}

// Local starts commands in PTYs on this machine, each in a new group of
// its Containment.
type Local struct {
	Containment *contain.Containment // required
	// PTYs, if not nil, holds a PTY open ahead of each launch; its owner
	// closes it once no Launch can run any more.
	PTYs *Spare

	// GiveUp, if not 0, replaces the package's GiveUp: how long after
	// the first SIGKILL of a stop a command whose processes are still
	// there is reported ended.
	GiveUp time.Duration
	// Ending, if not nil, is closed at the agent's end once its wait for
	// the stops has run out: a command whose processes are still there
	// EndGiveUp after the later of that and its stop's first SIGKILL is
	// reported ended without them, as GiveUp after the SIGKILL would be,
	// so that its end is reported before the agent exits.
	Ending <-chan struct{}

	prepareAfter time.Duration // 0: defaultPrepareAfter (prepare.go)
}

var _ Launcher = Local{}

// Launch starts cmd in a new session with a new PTY as its controlling
// terminal, inside a new group, and starts reading the PTY before it
// returns.
func (l Local) Launch(cmd Command, out io.Writer, ev Events) (Process, error) {
	if l.Containment == nil {
		return nil, &StartError{cmd.Line, errors.New("ptyio.Local has no Containment")}
	}
	g, err := l.Containment.NewGroup()
	if err != nil {
		return nil, &StartError{cmd.Line, err}
	}
	master, tty, err := l.PTYs.take(cmd.Size)
	if err != nil {
		return nil, errors.Join(&StartError{cmd.Line, err}, g.Close())
	}
	argv, script := shellArgv(cmd)
	files, line, err := withScript([]uintptr{tty.Fd(), tty.Fd(), tty.Fd()}, script)
	if err != nil {
		return nil, errors.Join(&StartError{cmd.Line, err}, tty.Close(), master.Close(), g.Close())
	}
	sys := &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	watch := procexit.AtFork(sys)
	attr := &syscall.ProcAttr{Dir: cmd.Dir, Env: cmd.Env, Files: files, Sys: sys}
	pid, err := g.ForkExec(argv[0], argv, attr)
	l.prepareNext() // once the shell has started (prepare.go)
	// The child has its copies; keeping ours would hide EIO from the
	// drain (and cost a descriptor per terminal). Best effort:
	// a close error on a descriptor we no longer use changes nothing.
	_ = tty.Close()
	if line != nil {
		_ = line.Close() // Best effort, as the tty's.
	}
	if err != nil {
		return nil, errors.Join(&StartError{cmd.Line, startError(err, argv[0], cmd.Dir)}, master.Close(), g.Close())
	}
	shell, err := watch(pid)
	if err != nil {
		return nil, errors.Join(&StartError{cmd.Line, err}, abort(pid, g), master.Close())
	}
	p := &local{pid: pid, master: master, tty: tty.Name(), shell: shell, group: g, out: out, ev: ev, readDone: make(chan struct{}), giveUp: cmp.Or(l.GiveUp, GiveUp), ending: l.Ending, killSent: make(chan struct{})}
	go p.read()
	go p.run()
	return p, nil
}

// A StartError is a Launch that failed: "start LINE: ERR", where Err
// says which step failed (for a fork, as startError puts it) and LINE is
// cut to its first startLine runes (a prompt may be a file's worth).
type StartError struct {
	Line string // the command line
	Err  error
}

// startLine is how many runes of its line a StartError's text shows.
const startLine = 60

func (e *StartError) Error() string {
	line := e.Line
	if r := []rune(line); len(r) > startLine {
		line = string(r[:startLine-1]) + "…"
	}
	return fmt.Sprintf("start %q: %v", line, e.Err)
}
func (e *StartError) Unwrap() error { return e.Err }

// FailedStep returns what a Launch's error says failed, without the
// command line: a StartError's Err, or err as it is.
func FailedStep(err error) error {
	if se := (*StartError)(nil); errors.As(err, &se) {
		return se.Err
	}
	return err
}

// startError says which step of a start that failed went wrong, as
// os.StartProcess says it: a working directory that is gone or is no
// directory ("chdir DIR: no such file or directory"), else the exec of
// the shell ("fork/exec /bin/sh: …") for an error of the kernel's. It
// looks only after a failure, off the spawn's path.
func startError(err error, shell, dir string) error {
	if dir != "" {
		fi, serr := os.Stat(dir)
		var pe *fs.PathError
		switch {
		case errors.As(serr, &pe):
			return &fs.PathError{Op: "chdir", Path: dir, Err: pe.Err}
		case serr == nil && !fi.IsDir():
			return &fs.PathError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR}
		}
	}
	if errno := syscall.Errno(0); errors.As(err, &errno) {
		return &fs.PathError{Op: "fork/exec", Path: shell, Err: err}
	}
	return err
}

// withoutTrap returns the shell's command line, arguments joined by
// spaces, without the trap shellArgv puts before the user's line.
func withoutTrap(command string) string {
	shell, line, ok := strings.Cut(command, " -c "+strings.TrimSpace(hupTrap))
	if !ok {
		return command
	}
	return shell + " -c" + line
}

// abort kills and reaps what a failed Launch started, and releases its
// group.
func abort(pid int, g contain.Group) error {
	_, kerr := g.Kill()
	// Our own unreaped child: its pid cannot name another process.
	if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		kerr = errors.Join(kerr, fmt.Errorf("kill %d: %w", pid, err))
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
		kerr = errors.Join(kerr, fmt.Errorf("reap %d: %w", pid, err))
	}
	select {
	case <-g.Done():
	case <-time.After(time.Second):
		kerr = errors.Join(kerr, fmt.Errorf("processes of %d still running after SIGKILL", pid))
	}
	return errors.Join(kerr, g.Close())
}

// local is a command running in a local PTY. Its lifecycle belongs to the
// run goroutine; the reader goroutine owns reads of master.
type local struct {
	pid      int
	master   *os.File
	tty      string // the slave's path, /dev/pts/N
	shell    *procexit.Process
	group    contain.Group
	out      io.Writer
	ev       Events
	readDone chan struct{}   // closed when read returns
	readErr  error           // written by read before readDone is closed
	draining atomic.Bool     // the group is empty: read until the PTY is
	giveUp   time.Duration   // see GiveUp
	ending   <-chan struct{} // see Local.Ending
	killSent chan struct{}   // closed once the stop's first SIGKILL has gone out
	killOnce sync.Once

	mu     sync.Mutex // guards esc, done, thawed and parked
	esc    *signals.Escalation
	done   bool          // run has finished; Stop does nothing
	thawed chan struct{} // while frozen (handover.go): closed by Thaw
	parked chan struct{} // while frozen: the reader has parked
}

func (p *local) Pid() int { return p.pid }

// Members implements Process. The shell is listed with its line as the
// user wrote it, without the trap shellArgv puts before it.
func (p *local) Members() ([]Member, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done {
		return nil, nil
	}
	ms, err := p.group.Members()
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = Member{Pid: m.Pid, Command: m.Command}
		if m.Pid == p.pid {
			out[i].Command = withoutTrap(m.Command)
		}
	}
	return out, err
}

// Stop implements Process.
func (p *local) Stop(grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.done:
	case p.esc == nil:
		p.esc = signals.Escalate(sentKill{p.group, p.noteKill}, grace)
	default:
		p.esc.Hurry()
	}
}

// Write implements Process: a non-blocking write to the master, through
// the runtime poller's descriptor (never Fd, which would make the master
// blocking).
func (p *local) Write(b []byte) (int, error) {
	n := 0
	var werr error
	err := p.control(func(fd int) {
		for n < len(b) {
			k, err := unix.Write(fd, b[n:])
			n += max(k, 0)
			switch err {
			case nil, unix.EINTR:
			case unix.EAGAIN:
				werr = ErrInputFull
				return
			default:
				werr = err
				return
			}
		}
	})
	if err = errors.Join(err, werr); err != nil {
		return n, fmt.Errorf("write to the terminal of %d: %w", p.pid, err)
	}
	return n, nil
}

// Resize implements Process.
func (p *local) Resize(s Size) error {
	var ierr error
	err := p.control(func(fd int) {
		ierr = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: s.Rows, Col: s.Cols})
	})
	if err = errors.Join(err, ierr); err != nil {
		return fmt.Errorf("resize the terminal of %d: %w", p.pid, err)
	}
	return nil
}

// InputWait implements Process: the foreground process group is the
// master's (TIOCGPGRP), and blockedReader looks at its processes.
func (p *local) InputWait() (InputWait, error) {
	var pgid int
	var ierr error
	if err := p.control(func(fd int) { pgid, ierr = unix.IoctlGetInt(fd, unix.TIOCGPGRP) }); err != nil {
		return InputWait{}, fmt.Errorf("foreground group of the terminal of %d: %w", p.pid, err)
	}
	if ierr != nil || pgid <= 0 {
		return InputWait{}, nil // no foreground group: nobody reads
	}
	return blockedReader(pgid, p.tty)
}

// control runs f on the master's descriptor, unless the master is closed.
func (p *local) control(f func(fd int)) error {
	rc, err := p.master.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { f(int(fd)) })
}

// errDrained ends a read that found the PTY empty after the last process
// of the command had gone.
var errDrained = errors.New("drained")

// read copies the PTY into out until, once the group is empty, the PTY
// is empty (or every descriptor of the terminal is closed: EIO; while the
// group is live, only on macOS and FreeBSD: see readLive).
// out may block: it is called with no lock held and outside the poller's
// callback, so that nothing waits on it but this goroutine.
//
// Once the first output is in out, read yields before it reads again, so
// that the goroutines that write readied (the connection's writer) run
// before those its next read readies. For a short command that next read
// finds the PTY closed, and with the agent's one P (cmd/shellagent) the
// exit's handling (the reap, the group's removal) would otherwise run
// first while the first byte, the one the user waits for, waits
// (bench/HISTORY.md, round 20).
func (p *local) read() {
	defer close(p.readDone)
	r, err := newPtyReader(p.master, p.draining.Load)
	if err != nil {
		p.readErr = fmt.Errorf("read pty: %w", err)
		return
	}
	first := true
	for {
		data, err := r.next()
		if len(data) > 0 {
			if _, werr := p.out.Write(data); werr != nil && p.readErr == nil {
				p.readErr = fmt.Errorf("write output: %w", werr)
			}
			if first {
				first = false
				runtime.Gosched()
			}
		}
		r.release()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Frozen (handover.go): what was read is in out. A deadline
			// that outlived a freeze given up is no error either.
			if th := p.frozen(); th != nil {
				<-th
			}
			continue
		}
		if err != nil {
			if err != io.EOF && err != errDrained {
				p.readErr = errors.Join(p.readErr, fmt.Errorf("read pty: %w", err))
			}
			return
		}
	}
}

// ptyReader reads a non-blocking PTY master one chunk at a time. Its
// callbacks are bound once, so that a read allocates nothing.
type ptyReader struct {
	rc       syscall.RawConn
	draining func() bool // the group is empty: read what is left, never wait
	bp       *[]byte     // the buffer of the last read, until release
	n        int
	rerr     error
	read     func(fd uintptr) bool // for RawConn.Read
	readNow  func(fd uintptr)      // for RawConn.Control
}

func newPtyReader(master *os.File, draining func() bool) (*ptyReader, error) {
	rc, err := master.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &ptyReader{rc: rc, draining: draining}
	r.read = r.readLive
	r.readNow = func(fd uintptr) { r.readFD(fd) }
	return r, nil
}

// readLive is readFD while the command's group is live. EIO there says
// only that no descriptor of the terminal is open at the moment (every
// process redirected its stdin, stdout and stderr: "cmd </dev/null >log
// 2>&1", a server that daemonized): a process of the group may open it
// again, as /dev/tty, its controlling terminal, to write or to ask (ssh,
// sudo, git asking for a password), and what it writes is the command's
// output. So it waits in the poller, as for EAGAIN: Linux wakes the
// master's readers when the terminal is opened and written again, and
// not meanwhile, and the drain wakes it when the group is empty. On macOS
// and FreeBSD, where this is not tested, the end of the descriptors ends
// the reading, as before.
func (r *ptyReader) readLive(fd uintptr) bool {
	if !r.readFD(fd) {
		return false
	}
	if r.rerr == unix.EIO && runtime.GOOS == "linux" && !r.draining() {
		r.release()
		return false
	}
	return true
}

// readFD reads once, into a buffer from the pool that it keeps only when
// the read returns something (EAGAIN gives it back), so an idle terminal
// holds none.
func (r *ptyReader) readFD(fd uintptr) bool {
	r.bp = readBufs.Get().(*[]byte)
	r.n, r.rerr = unix.Read(int(fd), *r.bp)
	if r.rerr == unix.EAGAIN {
		readBufs.Put(r.bp)
		r.bp = nil
		return false
	}
	return true
}

// release returns the last read's buffer to the pool.
func (r *ptyReader) release() {
	if r.bp != nil {
		readBufs.Put(r.bp)
		r.bp = nil
	}
}

// next reads the next chunk. Until draining reports true it waits for data
// in the runtime poller; after that it never waits, and errDrained means
// every byte has been read. A reader parked in the poller is woken with a
// read deadline in the past.
func (r *ptyReader) next() ([]byte, error) {
	r.n, r.rerr = 0, nil
	var err error
	if !r.draining() {
		err = r.rc.Read(r.read)
		if err != nil && !(errors.Is(err, os.ErrDeadlineExceeded) && r.draining()) {
			return nil, err
		}
	}
	if err != nil || r.bp == nil {
		// Draining: one read that does not wait.
		if err := r.rc.Control(r.readNow); err != nil {
			return nil, err
		}
		if r.bp == nil {
			return nil, errDrained
		}
	}
	switch {
	case r.rerr == nil && r.n > 0:
		return (*r.bp)[:r.n], nil
	case r.rerr == unix.EINTR:
		return nil, nil
	case r.rerr == nil, r.rerr == unix.EIO:
		return nil, io.EOF // every slave descriptor is closed
	}
	return nil, r.rerr
}

// sentKill is a command's group as its stop's Target: it tells the
// command when a SIGKILL has gone out.
type sentKill struct {
	contain.Group
	sent func()
}

func (k sentKill) Kill() (bool, error) {
	reached, err := k.Group.Kill()
	if reached || err == nil {
		k.sent()
	}
	return reached, err
}

// noteKill records that the stop's first SIGKILL has gone out.
func (p *local) noteKill() { p.killOnce.Do(func() { close(p.killSent) }) }

// shellEnd is the shell's wait status, once it has exited.
type shellEnd struct {
	status Status
	err    error
}

// run follows the command to its end: the shell's exit, then every other
// process of its group, then the last of its output. A command whose
// processes are still there p.giveUp after its stop's first SIGKILL is
// reported ended without them (Exit.Left), and release waits for them;
// so is one whose processes are still there EndGiveUp after the agent's
// end has closed p.ending, once that SIGKILL has gone out.
func (p *local) run() {
	shellc := make(chan shellEnd, 1)
	go func() {
		status, err := p.waitShell()
		shellc <- shellEnd{status, err}
	}()
	var (
		status    Status
		errs      []error
		returned  bool
		groupDone <-chan struct{} // once the shell has returned
		killSent  = p.killSent
		giveUp    <-chan time.Time
		ending    <-chan struct{}  // p.ending, once the SIGKILL has gone out
		hurried   <-chan time.Time // EndGiveUp after p.ending is closed
		left      []Leftover
	)
	for ended := false; !ended; {
		select {
		case end := <-shellc:
			status, returned = end.status, true
			errs = append(errs, end.err)
			if ended = p.group.Empty(); !ended {
				p.ev.ShellReturned(status)
				groupDone = p.group.Done()
			}
		case <-groupDone:
			ended = true
		case <-killSent:
			killSent = nil
			t := time.NewTimer(p.giveUp)
			defer t.Stop()
			giveUp, ending = t.C, p.ending
		case <-ending:
			ending = nil
			t := time.NewTimer(EndGiveUp)
			defer t.Stop()
			hurried = t.C
		case <-giveUp:
			left, ended = p.leftovers(), true
		case <-hurried:
			left, ended = p.leftovers(), true
		}
	}

	// The stop ends before the shell is reaped: a signal racing the
	// shell's own exit is judged by its zombie's status (see contain),
	// which reaping would take away.
	p.mu.Lock()
	p.waitThawed()
	p.done = true
	esc := p.esc
	p.mu.Unlock()
	exit := Exit{Shell: status}
	if esc != nil {
		esc.Finish()
		if sig := esc.Last(); sig != 0 {
			exit.Stopped = signals.Name(sig)
		}
		errs = append(errs, esc.Err())
	}
	if p.group.Killed() || left != nil {
		// A SIGKILL the escalation may not have sent: the containment's
		// KillAll (a second stop signal, a shutdown that timed out); or
		// one the processes left have not acted on.
		exit.Stopped = signals.Name(unix.SIGKILL)
	}
	if left != nil {
		exit.Left = left
		errs = append(errs, p.drain(), p.master.Close())
		go p.release(shellc, returned)
	} else {
		errs = append(errs, p.shell.Reap(), p.shell.Close(), p.drain(), p.master.Close())
		errs = append(errs, p.group.Close())
	}
	if exit.Err = errors.Join(errs...); exit.Err != nil {
		exit.Err = fmt.Errorf("terminal of %d: %w", p.pid, exit.Err)
	}
	p.ev.Exited(exit)
}

// leftovers lists the processes of the command still there, with their
// state, never nil.
func (p *local) leftovers() []Leftover {
	ms, _ := p.group.Members() // Best effort: the list is for the report
	left := make([]Leftover, 0, len(ms))
	for _, m := range ms {
		left = append(left, Leftover{Pid: m.Pid, Command: m.Command, State: procState(m.Pid)})
	}
	return left
}

// release waits, after the command was reported ended without them (see
// GiveUp), for the shell and every process left to go, then reaps the
// shell and releases the group. It reports nothing: the command's end was
// reported once. returned says whether shellc has delivered already.
func (p *local) release(shellc <-chan shellEnd, returned bool) {
	if !returned {
		<-shellc
	}
	<-p.group.Done()
	// Best effort: nobody is left to tell of an error.
	_ = errors.Join(p.shell.Reap(), p.shell.Close(), p.group.Close())
}

// procState returns the state of process pid as /proc/PID/stat shows it
// ("R", "S", "D"...), or "" where there is none to read.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) {
		return string(b[i+2])
	}
	return ""
}

// drain reads what is left in the PTY once no process of the command
// remains (none can write any more), however long out blocks, and returns
// the reader's error.
func (p *local) drain() error {
	p.draining.Store(true)
	// Wakes a reader parked in the poller; one busy in out.Write sees
	// draining when it returns.
	err := p.master.SetReadDeadline(time.Now())
	<-p.readDone
	return errors.Join(err, p.readErr)
}

func (p *local) waitShell() (Status, error) {
	if err := p.shell.Wait(); err != nil {
		return Status{}, err
	}
	ws, err := p.shell.Status()
	if err != nil {
		return Status{}, err
	}
	return statusOf(ws), nil
}

// statusOf turns a wait status into a Status.
func statusOf(ws unix.WaitStatus) Status {
	switch {
	case ws.Exited():
		return Status{Exited: true, Code: ws.ExitStatus()}
	case ws.Signaled():
		return Status{Signal: signals.Name(ws.Signal())}
	}
	return Status{}
}
