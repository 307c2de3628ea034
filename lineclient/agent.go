package lineclient

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"
)

// exitTimeout bounds the wait for the agent to exit once its stdin is
// closed after a session closed as asked; then it is stopped with
// SIGTERM.
const exitTimeout = 10 * time.Second

// stderrDelay bounds the wait for the end of the agent's stderr once it
// has exited, where the client copies it (crlfWriter): a process it
// started may hold it open.
const stderrDelay = time.Second

// agentProc is the agent's process. Its stdin and stdout are pipes of the
// client's own (cmd.Wait closes neither), handed to a conn.
type agentProc struct {
	cmd    *exec.Cmd
	stdin  *os.File      // the write end of the agent's stdin
	stdout *os.File      // the read end of the agent's stdout
	exited chan struct{} // closed once the agent has exited and been reaped
	err    error         // cmd.Wait's result; read after exited
}

// startAgent starts the agent in a process group of its own, so that a
// Ctrl-C at the terminal reaches the client only.
func startAgent(cfg Config) (*agentProc, error) {
	cmd := exec.Command(cfg.Agent[0], cfg.Agent[1:]...)
	cmd.Env = cfg.Env
	cmd.Stderr = cfg.AgentStderr
	if cfg.raw != nil && cfg.AgentStderr != nil {
		cmd.Stderr = &crlfWriter{w: cfg.AgentStderr, raw: cfg.raw}
		// Wait copies the agent's stderr to its end; a daemon the relay
		// started may hold it on (where it has no log file of its own).
		cmd.WaitDelay = stderrDelay
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("lineclient: agent stdin: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = inR.Close() // Best effort: unused.
		_ = inW.Close() // Best effort: unused.
		return nil, fmt.Errorf("lineclient: agent stdout: %w", err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	_ = inR.Close()  // Safe: the agent holds its own copy, if it started.
	_ = outW.Close() // Safe: likewise.
	if err != nil {
		_ = inW.Close()  // Best effort: nothing was written.
		_ = outR.Close() // Best effort: nothing was read.
		return nil, fmt.Errorf("lineclient: starting the agent %s: %w", cfg.Agent[0], err)
	}
	a := &agentProc{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{})}
	go func() {
		a.err = cmd.Wait()
		if errors.Is(a.err, exec.ErrWaitDelay) {
			a.err = nil // it exited 0; what holds its stderr is not its
		}
		close(a.exited)
	}()
	return a, nil
}

// stop ends the agent. Without now, the agent's stdin has been closed
// and stop first waits exitTimeout for the agent to exit of itself; with
// now, its stdin stays open until conn.close (see conn.hangUp). An agent
// still running is sent SIGTERM to its process group, then SIGKILL after
// grace or at an interrupt; say tells the user of each signal. stop
// returns once the agent has been reaped: with now, nil; else the agent's
// exit error, or an error saying that it had to be signalled.
func (a *agentProc) stop(now bool, grace time.Duration, interrupts <-chan os.Signal, say func(string)) error {
	if !now {
		select {
		case <-a.exited:
			if a.err != nil {
				return fmt.Errorf("lineclient: agent %s: %w", a.cmd.Path, a.err)
			}
			return nil
		case <-time.After(exitTimeout):
			say(fmt.Sprintf("the agent did not exit within %v of its stdin closing: SIGTERM sent", exitTimeout))
		}
	}
	a.terminate(grace, interrupts, say)
	if now {
		return nil
	}
	return fmt.Errorf("lineclient: agent %s did not exit within %v of its stdin closing", a.cmd.Path, exitTimeout)
}

// terminate sends SIGTERM to the agent's process group, then SIGKILL
// after grace or at an interrupt, and waits for the agent to be reaped.
func (a *agentProc) terminate(grace time.Duration, interrupts <-chan os.Signal, say func(string)) {
	a.signal(syscall.SIGTERM)
	select {
	case <-a.exited:
		return
	case <-time.After(grace):
		say(fmt.Sprintf("the agent did not exit within %v of SIGTERM: SIGKILL sent", grace))
	case <-interrupts:
		say("interrupted again: SIGKILL sent to the agent")
	}
	a.signal(syscall.SIGKILL)
	<-a.exited
}

// signal sends sig to the agent's process group, unless it has been
// reaped (its pid may then name another process).
func (a *agentProc) signal(sig syscall.Signal) {
	select {
	case <-a.exited:
	default:
		_ = syscall.Kill(-a.cmd.Process.Pid, sig) // Best effort: it may exit meanwhile.
	}
}

// crlfWriter is the agent's stderr when the client has a terminal: while
// raw is set (the terminal is in raw mode, which does not return the
// carriage), each "\n" not after a "\r" is written "\r\n", so that the
// agent's log lines do not staircase; otherwise the bytes pass as they
// are. Only exec's copying goroutine writes to it.
type crlfWriter struct {
	w   io.Writer
	raw *atomic.Bool
	cr  bool // the last byte written was '\r'
}

func (c *crlfWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	out := p
	if c.raw.Load() {
		out = make([]byte, 0, len(p)+8)
		prev := c.cr
		for _, b := range p {
			if b == '\n' && !prev {
				out = append(out, '\r')
			}
			out = append(out, b)
			prev = b == '\r'
		}
	}
	c.cr = p[len(p)-1] == '\r'
	if _, err := c.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
