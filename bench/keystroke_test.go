package bench

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// BenchmarkKeystroke: the round trip of a keystroke through the reference
// client in terminal mode (shellagent client on a PTY, built from
// cmd/shellagent, with its own agent), from the byte written into the
// client's PTY to its echo on the client's screen: the client reads it,
// sends _shellagent/terminal/write, the agent writes it to the command's
// PTY, whose line discipline echoes it (cat in the foreground, in
// canonical mode), the agent sends the echo as terminal_output_chunk, and
// the client writes it to its screen. The physical baseline is the same
// echo of cat under pty.Start. Target: at most 1 ms more at p50.
func BenchmarkKeystroke(b *testing.B) {
	client := keystrokeClient(b)
	raw := keystrokeRaw(b)
	b.ResetTimer()
	ds := echoes(b, client, b.N)
	b.StopTimer()
	rawDs := echoes(b, raw, b.N)
	p50, rawP50 := percentile(ds, 50), percentile(rawDs, 50)
	b.ReportMetric(micros(p50), "p50_us")
	b.ReportMetric(micros(percentile(ds, 99)), "p99_us")
	b.ReportMetric(micros(rawP50), "raw_p50_us")
	b.ReportMetric(micros(percentile(rawDs, 99)), "raw_p99_us")
	b.ReportMetric(micros(p50-rawP50), "p50_over_raw_us")
}

// echoTerm is a PTY master whose reads arrive, timed, on chunks.
type echoTerm struct {
	master *os.File
	chunks chan echoChunk // closed when the master's reads end
}

type echoChunk struct {
	data []byte
	at   time.Time
}

// newEchoTerm reads master until it fails (EIO once the PTY is gone).
func newEchoTerm(master *os.File) *echoTerm {
	e := &echoTerm{master: master, chunks: make(chan echoChunk, 256)}
	go func() {
		defer close(e.chunks)
		buf := make([]byte, 32<<10)
		for {
			n, err := master.Read(buf)
			if n > 0 {
				e.chunks <- echoChunk{bytes.Clone(buf[:n]), time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	return e
}

// until reads until the output since the call holds want count times, and
// returns when the read that completed it returned.
func (e *echoTerm) until(tb testing.TB, want string, count int) time.Time {
	tb.Helper()
	var seen []byte
	timeout := time.After(waitTimeout)
	for {
		select {
		case c, ok := <-e.chunks:
			if !ok {
				tb.Fatalf("the terminal closed before %q; it showed %q", want, seen)
			}
			seen = append(seen, c.data...)
			if bytes.Count(seen, []byte(want)) >= count {
				return c.at
			}
		case <-timeout:
			tb.Fatalf("no %q within %v; the terminal showed %q", want, waitTimeout, seen)
		}
	}
}

func (e *echoTerm) press(tb testing.TB, keys string) time.Time {
	tb.Helper()
	at := time.Now()
	if _, err := io.WriteString(e.master, keys); err != nil {
		tb.Fatal(err)
	}
	return at
}

// echoes types n letters into cat, one at a time, each once the last has
// been echoed, and returns the time each took to come back. Every 32
// letters, Enter ends the line (cat prints it back), unmeasured.
func echoes(tb testing.TB, e *echoTerm, n int) []time.Duration {
	tb.Helper()
	ds := make([]time.Duration, 0, n)
	for i := range n {
		k := string(rune('a' + i%26))
		sent := e.press(tb, k)
		ds = append(ds, e.until(tb, k, 1).Sub(sent))
		if i%32 == 31 {
			e.press(tb, "\r")
			e.until(tb, "\r\n", 2) // the echo of Enter, then cat's line
		}
	}
	if n%32 != 0 {
		e.press(tb, "\r")
		e.until(tb, "\r\n", 2)
	}
	return ds
}

// keystrokeClient starts shellagent client on a PTY (shellagentBinary,
// never moving a command to the background), runs cat in
// it, and waits until cat's terminal takes keys. At the end Ctrl-D ends
// cat and then the client, which must exit 0.
func keystrokeClient(tb testing.TB) *echoTerm {
	tb.Helper()
	bin, err := shellagentBinary()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	cmd := exec.Command(bin, "client", "--set", "foreground_timeout=0")
	cmd.Env = append(os.Environ(), marker, "SHELL=/bin/sh", "TERM=xterm-256color")
	cmd.Dir = dir
	master, err := pty.StartWithSize(cmd, &termSize)
	if err != nil {
		tb.Fatal(err)
	}
	e := newEchoTerm(master)
	tb.Cleanup(func() { endTerm(tb, e, cmd, "\x04\x04") })
	e.until(tb, "> ", 1)
	e.press(tb, "cat\r")
	e.until(tb, "keys go to the command", 1)
	e.press(tb, "\r") // the first key, once the client has cat's terminal
	e.until(tb, "\r\n", 2)
	return e
}

// keystrokeRaw starts cat under pty.Start.
func keystrokeRaw(tb testing.TB) *echoTerm {
	tb.Helper()
	cmd := exec.Command("cat")
	cmd.Env = append(os.Environ(), marker)
	master, err := pty.StartWithSize(cmd, &termSize)
	if err != nil {
		tb.Fatal(err)
	}
	e := newEchoTerm(master)
	tb.Cleanup(func() { endTerm(tb, e, cmd, "\x04") })
	return e
}

// endTerm types keys that should end cmd, and waits for it to exit 0;
// if it does not, it is killed and the test fails.
func endTerm(tb testing.TB, e *echoTerm, cmd *exec.Cmd, keys string) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for _, k := range keys {
		_, _ = io.WriteString(e.master, string(k)) // Best effort: it may have exited.
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			tb.Errorf("%s exited: %v", cmd.Path, err)
		}
	case <-time.After(waitTimeout):
		tb.Errorf("%s did not exit", cmd.Path)
		_ = cmd.Process.Signal(syscall.SIGKILL) // Best effort: the run fails anyway.
		<-done
	}
	_ = e.master.Close() // Safe: the reader ends.
	for range e.chunks {
	}
}
