package ptyio

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestWriteIsTyping(t *testing.T) {
	t.Parallel()
	p, rec := launch(t, "read x; echo got $x")
	waitInputWait(t, p, true)
	if n, err := p.Write([]byte("hello\r")); n != 6 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if e := rec.wait(t); e.Shell != (Status{Exited: true}) {
		t.Errorf("exit %+v", e)
	}
	if got := rec.output(); !strings.HasSuffix(got, "got hello\r\n") {
		t.Errorf("output %q", got)
	}
	if _, err := p.Write([]byte("late")); err == nil {
		t.Errorf("a write after the end succeeded")
	}
}

// A program that does not read fills the terminal's input buffer: a
// write that finds it full fails at once, having written what fitted.
// (The kernel moves input from the PTY's buffer to the line discipline's
// in the background, so a write may fail before both are full: writes go
// on until one writes nothing.)
func TestWriteToAFullBufferFails(t *testing.T) {
	t.Parallel()
	p, rec := launch(t, "stty raw -echo; echo ready; sleep 100")
	waitOutput(t, rec, "ready")
	big := bytes.Repeat([]byte("x"), 256<<10)
	total := 0
	for i := 0; ; i++ {
		start := time.Now()
		n, err := p.Write(big)
		if d := time.Since(start); d > time.Second {
			t.Errorf("Write took %v", d)
		}
		if !errors.Is(err, ErrInputFull) || n < 0 || n >= len(big) {
			t.Fatalf("Write = %d, %v; want fewer bytes and ErrInputFull", n, err)
		}
		total += n
		if n == 0 {
			break
		}
		if i == 100 {
			t.Fatalf("the buffer never filled: %d bytes written", total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if total == 0 || total > 256<<10 {
		t.Errorf("%d bytes fitted in the input buffer", total)
	}
	p.Stop(time.Second)
	rec.wait(t)
}

func TestResizeSignalsTheProgram(t *testing.T) {
	t.Parallel()
	p, rec := launch(t, "trap 'stty size; exit' WINCH; echo ready; while :; do sleep 0.05; done")
	waitOutput(t, rec, "ready")
	if err := p.Resize(Size{Cols: 200, Rows: 50}); err != nil {
		t.Fatal(err)
	}
	rec.wait(t)
	if got := rec.output(); !strings.HasSuffix(got, "50 200\r\n") {
		t.Errorf("output %q, want the new size", got)
	}
	if err := p.Resize(Size{Cols: 80, Rows: 24}); err == nil {
		t.Errorf("a resize after the end succeeded")
	}
}

// InputWait sees a program blocked reading its terminal, whether the
// shell reads itself or waits for the program it started, and sees a
// new wait after each read; it sees none in a program that sleeps or
// reads something else than the terminal.
func TestInputWait(t *testing.T) {
	t.Parallel()
	// A read of a TCP socket sleeps in wait_woken too, as a terminal read
	// does.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() }) // after the parallel subtests
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // never written to: the reader waits
		}
	}()
	tcpRead := fmt.Sprintf("exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d; read -u 3 x'", ln.Addr().(*net.TCPAddr).Port)
	tests := []struct {
		line    string
		reading bool
	}{
		{"read x; read y", true},
		{"cat; cat", true},
		{"head -c 3 </dev/tty; head -c 3 </dev/tty", true},
		{"sleep 100", false},
		{"sleep 100 | cat >/dev/null", false},
		{"mkfifo f; exec 3<>f; cat f", false},
		{tcpRead, false},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			t.Parallel()
			p, rec := launch(t, tt.line)
			defer func() {
				p.Stop(time.Second)
				rec.wait(t)
			}()
			if !tt.reading {
				time.Sleep(500 * time.Millisecond)
				if w, err := p.InputWait(); w.Pid != 0 || err != nil {
					t.Errorf("InputWait = %+v, %v; want none", w, err)
				}
				return
			}
			first := waitInputWait(t, p, true)
			if again, err := p.InputWait(); again != first || err != nil {
				t.Errorf("the same wait seen as %+v, then %+v, %v", first, again, err)
			}
			if _, err := p.Write([]byte("abc\r")); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				w, err := p.InputWait()
				if err != nil {
					t.Fatal(err)
				}
				if w.Pid != 0 && w != first {
					if w.Reads == first.Reads && w.Pid == first.Pid {
						t.Errorf("a new wait with the same count of reads: %+v", w)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no new wait after input; last %+v, first %+v", w, first)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// waitInputWait waits until InputWait reports a waiting process (or, with
// !want, none) and returns what it reported.
func waitInputWait(t *testing.T, p Process, want bool) InputWait {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err := p.InputWait()
		if err != nil {
			t.Fatal(err)
		}
		if (w.Pid != 0) == want {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("InputWait = %+v after 10s", w)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkInputWait measures one look at a terminal whose shell waits
// for a program that reads it: the cost of each check the supervisor
// makes of a quiet terminal.
func BenchmarkInputWait(b *testing.B) {
	rec := newRecorder()
	p, err := launcher.Launch(Command{
		Shell: "/bin/sh", Line: "cat; true", Dir: b.TempDir(),
		Env: []string{"PATH=" + os.Getenv("PATH"), marker}, Size: Size{Cols: 80, Rows: 24},
	}, rec, rec)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		p.Stop(time.Second)
		<-rec.exited
	}()
	for {
		if w, _ := p.InputWait(); w.Pid != 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.ResetTimer()
	for b.Loop() {
		if w, err := p.InputWait(); w.Pid == 0 || err != nil {
			b.Fatalf("InputWait = %+v, %v", w, err)
		}
	}
}
