package bench

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"shellagent/ptyio"
)

// The physical baselines: the same command in a PTY read by a plain Go
// loop, with no agent, no ring, no JSON and no pipe.

// termSize is the size of the agent's terminals (its default, 120x40).
var termSize = pty.Winsize{Cols: 120, Rows: 40}

// rawTerm is "/bin/sh -c LINE" in a new session whose controlling terminal
// is a fresh PTY, and a goroutine that reads the master until EIO.
type rawTerm struct {
	cmd    *exec.Cmd
	master *os.File
	bytes  atomic.Int64  // bytes read from the master
	done   chan struct{} // the reader has stopped
	err    error         // a read error other than EIO; valid after done
}

// rawMode is how a raw terminal's master is read.
type rawMode int

const (
	// blocking: creack/pty's master as pty.Start returns it (blocking mode),
	// read into a 32 KiB buffer on a thread of its own, as
	// io.Copy(io.Discard, master) would.
	blocking rawMode = iota
	// poller: a non-blocking master served by the runtime poller, read
	// through SyscallConn with a pooled buffer taken only when readable,
	// so that an idle terminal holds a parked goroutine and no thread and
	// no buffer: the least a Go program can spend on a terminal it drains.
	poller
)

// startRaw starts line; hook, if not nil, sees every read with the time it
// returned.
func startRaw(line string, mode rawMode, hook func([]byte, time.Time)) (*rawTerm, error) {
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Env = append(os.Environ(), marker)
	t := &rawTerm{cmd: cmd, done: make(chan struct{})}
	var err error
	switch mode {
	case blocking:
		t.master, err = pty.StartWithSize(cmd, &termSize)
		if err != nil {
			return nil, err
		}
		goLabeled(func() { t.readBlocking(hook) })
	case poller:
		var tty *os.File
		t.master, tty, err = ptyio.OpenPTY(ptyio.Size{Cols: termSize.Cols, Rows: termSize.Rows})
		if err != nil {
			return nil, err
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		err = cmd.Start()
		tty.Close()
		if err != nil {
			t.master.Close()
			return nil, err
		}
		goLabeled(func() { t.readPoller(hook) })
	}
	return t, nil
}

// goLabeled runs f on a new goroutine labelled path=raw for profiles.
func goLabeled(f func()) {
	pprof.Do(context.Background(), pprof.Labels("path", "raw"), func(context.Context) { go f() })
}

func (t *rawTerm) readBlocking(hook func([]byte, time.Time)) {
	defer close(t.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := t.master.Read(buf)
		if n > 0 {
			t.bytes.Add(int64(n))
			if hook != nil {
				hook(buf[:n], time.Now())
			}
		}
		if err != nil {
			t.setErr(err)
			return
		}
	}
}

var rawBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (t *rawTerm) readPoller(hook func([]byte, time.Time)) {
	defer close(t.done)
	rc, err := t.master.SyscallConn()
	if err != nil {
		t.err = err
		return
	}
	var rerr error
	for rerr == nil {
		err := rc.Read(func(fd uintptr) bool {
			bp := rawBufs.Get().(*[]byte)
			defer rawBufs.Put(bp)
			n, err := unix.Read(int(fd), *bp)
			if err == unix.EAGAIN {
				return false
			}
			if n > 0 {
				t.bytes.Add(int64(n))
				if hook != nil {
					hook((*bp)[:n], time.Now())
				}
			}
			if err != nil && err != unix.EINTR {
				rerr = err
			} else if err == nil && n == 0 {
				rerr = unix.EIO
			}
			return true
		})
		if err != nil {
			rerr = err
		}
	}
	t.setErr(rerr)
}

func (t *rawTerm) setErr(err error) {
	if !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrClosed) {
		t.err = err
	}
}

// kill sends SIGKILL to the terminal's whole process group.
func (t *rawTerm) kill() {
	_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
}

// wait waits for EIO (every process holding the terminal gone) and for the
// shell, then closes the master. It returns the reader's error, if any.
func (t *rawTerm) wait() error {
	<-t.done
	_ = t.cmd.Wait()
	t.master.Close()
	return t.err
}

// rawDrain runs line to its end and reads all of its output: the baseline
// of the throughput benchmark.
func rawDrain(line string) (n int64, d time.Duration, err error) {
	start := time.Now()
	t, err := startRaw(line, blocking, nil)
	if err != nil {
		return 0, 0, err
	}
	err = t.wait()
	return t.bytes.Load(), time.Since(start), err
}
