package acptest

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// StopTimeout is how long the cleanup of StartBinary waits for the agent to
// exit after closing its stdin before it kills it.
const StopTimeout = 10 * time.Second

// StartBinary starts the agent binary at path with args, and env added to
// the current environment, and returns a Client connected to its stdin and
// stdout. The agent's stderr goes to t.Log line by line. A t.Cleanup closes
// the agent's stdin and waits for it to exit, killing it after StopTimeout;
// an exit other than status 0 is reported with t.Errorf. A test that stops
// the agent itself (for example with a signal) should call cmd.Wait, after
// which the cleanup does not wait again.
func StartBinary(t testing.TB, path string, args []string, env []string, opts ...Option) (*Client, *exec.Cmd) {
	t.Helper()
	return startBinary(t, path, args, env, opts...)
}

// startBinary is StartBinary for any reporter.
func startBinary(t reporter, path string, args []string, env []string, opts ...Option) (*Client, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 2 * time.Second // bounds stderr copying once the agent has exited
	stderr := &lineLogger{t: t, prefix: "agent stderr: "}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("acptest: %v", err)
		return nil, nil
	}
	// An os.Pipe of our own, unlike cmd.StdoutPipe, is not closed by
	// cmd.Wait, so the reader always sees the agent's last line and EOF.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatalf("acptest: %v", err)
		return nil, nil
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		// Best effort: the test ends here; a pipe's Close fails only if
		// it was closed already.
		_, _ = pr.Close(), pw.Close()
		t.Fatalf("acptest: starting %s: %v", path, err)
		return nil, nil
	}
	_ = pw.Close() // Best effort: the agent holds its own copy; ours must go for EOF.
	c := newClient(t, pr, stdin, opts...)
	t.Cleanup(func() {
		stopAgent(t, c, cmd)
		_ = pr.Close() // Best effort: the reader has seen EOF, or the test failed already.
		stderr.flush()
	})
	return c, cmd
}

// stopAgent closes the agent's stdin, waits for it to exit (killing it
// after StopTimeout), then closes the client.
func stopAgent(t reporter, c *Client, cmd *exec.Cmd) {
	t.Helper()
	c.in.close()
	if cmd.ProcessState == nil {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		timer := time.NewTimer(StopTimeout)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("acptest: the agent exited with %v after its stdin was closed", err)
			}
		case <-timer.C:
			t.Errorf("acptest: the agent did not exit within %v of its stdin being closed; killing it", StopTimeout)
			_ = cmd.Process.Kill() // Best effort: it may have exited meanwhile; Wait tells.
			<-done                 // killed: its exit status says nothing more
		}
		timer.Stop()
	}
	c.Close()
}

// lineLogger logs every complete line written to it.
type lineLogger struct {
	t      reporter
	prefix string
	mu     sync.Mutex
	buf    []byte
}

// Write logs the complete lines of p and keeps the rest.
func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.t.Logf("%s%s", l.prefix, l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// flush logs what remains of an unterminated last line.
func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Logf("%s%s", l.prefix, l.buf)
		l.buf = nil
	}
}
