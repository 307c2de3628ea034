package ptyio

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"shellagent/signals"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder collects a process's output and events.
type recorder struct {
	mu          sync.Mutex
	out         bytes.Buffer
	shellAt     time.Time
	shell       Status
	shellExited chan struct{}
	exited      chan Exit
}

func newRecorder() *recorder {
	return &recorder{shellExited: make(chan struct{}), exited: make(chan Exit, 1)}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.Write(p)
}

func (r *recorder) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

func (r *recorder) ShellReturned(s Status) {
	r.shell, r.shellAt = s, time.Now()
	close(r.shellExited)
}

func (r *recorder) Exited(e Exit) {
	select {
	case <-r.shellExited:
	default:
		r.shellAt = time.Now() // the shell was the last process
		close(r.shellExited)
	}
	r.exited <- e
}

func (r *recorder) wait(t *testing.T) Exit {
	t.Helper()
	select {
	case e := <-r.exited:
		return e
	case <-time.After(20 * time.Second):
		t.Fatalf("command did not end; output so far %q", r.output())
	}
	return Exit{}
}

func launch(t *testing.T, line string) (Process, *recorder) {
	t.Helper()
	rec := newRecorder()
	p, err := Local{}.Launch(Command{
		Shell: "/bin/sh",
		Line:  line,
		Dir:   t.TempDir(),
		Env:   []string{"TERM=xterm-256color", "PATH=" + os.Getenv("PATH")},
		Size:  Size{Cols: 120, Rows: 40},
	}, rec, rec)
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}

func TestExitStatus(t *testing.T) {
	tests := []struct {
		line string
		want Status
		out  string
	}{
		{"echo hello", Status{Exited: true, Code: 0}, "hello\r\n"},
		{"printf 'a\\nb'; exit 3", Status{Exited: true, Code: 3}, "a\r\nb"},
		{"kill -KILL $$", Status{Signal: "SIGKILL"}, ""},
		{"stty size", Status{Exited: true}, "40 120\r\n"},
		{"echo $TERM; pwd | grep -c TestExitStatus", Status{Exited: true}, "xterm-256color\r\n1\r\n"},
		{"test -t 0 && test -t 1 && echo tty", Status{Exited: true}, "tty\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			_, rec := launch(t, tt.line)
			e := rec.wait(t)
			if e.Shell != tt.want || e.Stopped != "" {
				t.Errorf("exit %+v, want shell %+v", e, tt.want)
			}
			if got := rec.output(); got != tt.out {
				t.Errorf("output %q, want %q", got, tt.out)
			}
		})
	}
}

func TestBackgroundJobKeepsCommandLive(t *testing.T) {
	_, rec := launch(t, "sleep 1 & echo started")
	<-rec.shellExited
	if rec.shell != (Status{Exited: true}) {
		t.Errorf("ShellReturned(%+v), want exit 0", rec.shell)
	}
	select {
	case <-rec.exited:
		t.Fatal("command ended while its background job still ran")
	case <-time.After(500 * time.Millisecond):
	}
	e := rec.wait(t)
	if time.Since(rec.shellAt) < 500*time.Millisecond || e.Shell != (Status{Exited: true}) {
		t.Errorf("exit %+v %v after the shell", e, time.Since(rec.shellAt))
	}
	if rec.output() != "started\r\n" {
		t.Errorf("output %q", rec.output())
	}
}

func TestProcessThatLeftTheSessionDoesNotDelayTheExit(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	_, rec := launch(t, "setsid sh -c 'echo $$ > "+pidFile+"; exec sleep 30' & while [ ! -s "+pidFile+" ]; do sleep 0.01; done; echo done")
	waitOutput(t, rec, "done") // the shell's last act
	shellDone := time.Now()
	rec.wait(t)
	if d := time.Since(shellDone); d > 250*time.Millisecond {
		t.Errorf("exit reported %v after the shell's", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	unix.Kill(pid, unix.SIGKILL)
}

func TestStop(t *testing.T) {
	tests := []struct {
		name  string
		line  string
		grace time.Duration
		twice bool
		want  Exit
	}{
		{"TERM ends it", "echo ready; sleep 30", time.Hour, false, Exit{Shell: Status{Signal: "SIGTERM"}, Stopped: "SIGTERM"}},
		{"trapped TERM, exit code kept", "trap 'exit 7' TERM; sleep 30 & sleep 0.2; echo ready; wait", time.Hour, false, Exit{Shell: Status{Exited: true, Code: 7}, Stopped: "SIGTERM"}},
		{"TERM ignored", "trap '' TERM; echo ready; sleep 30", 300 * time.Millisecond, false, Exit{Shell: Status{Signal: "SIGKILL"}, Stopped: "SIGKILL"}},
		{"second stop skips the grace", "trap '' TERM; echo ready; sleep 30", time.Hour, true, Exit{Shell: Status{Signal: "SIGKILL"}, Stopped: "SIGKILL"}},
		{"detached job", "trap '' TERM; sleep 30 & echo ready", 300 * time.Millisecond, false, Exit{Shell: Status{Exited: true}, Stopped: "SIGKILL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, rec := launch(t, tt.line)
			waitOutput(t, rec, "ready")
			if strings.Contains(tt.line, "& echo ready") {
				<-rec.shellExited
			}
			p.Stop(tt.grace)
			if tt.twice {
				p.Stop(tt.grace)
			}
			if e := rec.wait(t); e != tt.want {
				t.Errorf("exit %+v, want %+v", e, tt.want)
			}
			p.Stop(tt.grace) // after the end: nothing happens
			if procs, _ := signals.SessionMembers(p.Pid()); len(procs) != 0 {
				t.Errorf("processes left: %+v", procs)
			}
		})
	}
}

func waitOutput(t *testing.T, rec *recorder, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(rec.output(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in output %q", s, rec.output())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLargeOutputIsComplete(t *testing.T) {
	_, rec := launch(t, "seq 1 200000")
	rec.wait(t)
	var want strings.Builder
	for i := 1; i <= 200000; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteString("\r\n")
	}
	if got := rec.output(); got != want.String() {
		t.Errorf("output has %d bytes, want %d", len(got), want.Len())
	}
}

// Idle terminals must not hold OS threads: masters and pidfds are served by
// the runtime poller.
func TestIdleTerminalsHoldNoThreads(t *testing.T) {
	const n = 40
	before := threads(t)
	var procs []Process
	var recs []*recorder
	for range n {
		p, rec := launch(t, "sleep 30")
		procs, recs = append(procs, p), append(recs, rec)
	}
	time.Sleep(200 * time.Millisecond)
	during := threads(t)
	for _, p := range procs {
		p.Stop(time.Second)
	}
	for _, rec := range recs {
		rec.wait(t)
	}
	if during-before > 8 {
		t.Errorf("threads went from %d to %d with %d idle terminals", before, during, n)
	}
}

func threads(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}
