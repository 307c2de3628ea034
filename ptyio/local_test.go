package ptyio

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/contain"
	"shellagent/contain/containtest"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// marker is in the environment of every command the tests start, so that
// TestMain can prove that none is left.
var marker = "SHELLAGENT_TEST=" + rand.Text()

// launcher holds the tests' commands in containtest.Mode.
var launcher Local

func TestMain(m *testing.M) {
	testloop.Parallel(8)
	containtest.Main(m, func(c *contain.Containment) { launcher = Local{Containment: c} }, func() error {
		if left := acptest.ProcessesWith(marker); len(left) > 0 {
			return fmt.Errorf("processes left behind: %v", left)
		}
		return nil
	})
}

// recorder collects a process's output and events.
type recorder struct {
	dir         string // the command's working directory
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

func (r *recorder) wait(t testing.TB) Exit {
	t.Helper()
	select {
	case e := <-r.exited:
		return e
	case <-time.After(20 * time.Second):
		t.Fatalf("command did not end; output so far %q", r.output())
	}
	return Exit{}
}

// gated is a shell loop that runs until the test releases it (release),
// or until the command's directory is gone (a test that failed first),
// for a job that must outlive the test's look at it: a job that ended
// on its own after a sleep ended first on a loaded machine, before the
// test had seen the shell's exit.
const gated = `while [ -d "$PWD" ] && [ ! -e gate ]; do sleep 0.05; done`

// releaseAfterALook checks that the command, whose shell has exited, does
// not end for 500 ms while its gated job runs (failing with why, if it
// does), then releases the job.
func (r *recorder) releaseAfterALook(t testing.TB, why string) {
	t.Helper()
	select {
	case <-r.exited:
		r.release(t)
		t.Fatal(why)
	case <-time.After(500 * time.Millisecond):
	}
	r.release(t)
}

// release ends the command's gated loops.
func (r *recorder) release(t testing.TB) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func launch(t *testing.T, line string) (Process, *recorder) {
	t.Helper()
	return launchShell(t, "/bin/sh", line)
}

// launchShell launches line with shell.
func launchShell(t *testing.T, shell, line string) (Process, *recorder) {
	t.Helper()
	rec := newRecorder()
	rec.dir = t.TempDir()
	p, err := launcher.Launch(Command{
		Shell: shell,
		Line:  line,
		Dir:   rec.dir,
		Env:   []string{"TERM=xterm-256color", "PATH=" + os.Getenv("PATH"), marker},
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
		// A real-time signal, named as bash's kill -l names it (Linux).
		{"kill -37 $$", Status{Signal: "SIGRTMIN+3"}, ""},
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

// A command whose processes all let go of the terminal (stdin, stdout
// and stderr redirected) and later open it again as /dev/tty, as ssh,
// sudo or git do to ask for a password, gets what it writes there to the
// client, more than the PTY buffers too; and the reader waits for it
// without spinning on the EIO meanwhile. Before, the reader ended at that
// EIO: "late" was lost and the second write blocked the command forever.
func TestOutputAfterEveryDescriptorClosed(t *testing.T) {
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &before); err != nil {
		t.Fatal(err)
	}
	_, rec := launch(t, "echo before; exec </dev/null >/dev/null 2>&1; sleep 0.5; echo late >/dev/tty; seq 20000 >/dev/tty")
	e := rec.wait(t)
	if err := unix.Getrusage(unix.RUSAGE_SELF, &after); err != nil {
		t.Fatal(err)
	}
	if e.Shell != (Status{Exited: true}) || e.Err != nil {
		t.Errorf("exit %+v", e)
	}
	out := rec.output()
	if !strings.HasPrefix(out, "before\r\nlate\r\n1\r\n") || !strings.HasSuffix(out, "\r\n20000\r\n") || strings.Count(out, "\r\n") != 20002 {
		t.Errorf("output: %d lines, %.40q … %.40q", strings.Count(out, "\r\n"), out, out[max(0, len(out)-40):])
	}
	// A reader that spun for the half second would use about as much CPU.
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	if cpu > 250*time.Millisecond {
		t.Errorf("the command took %v of the agent's CPU", cpu)
	}
}

func TestBackgroundJobKeepsCommandLive(t *testing.T) {
	// The job runs until the test releases it: before, "sleep 1"
	// could end within the test's look after a shell's exit that a
	// loaded machine reported late.
	_, rec := launch(t, "("+gated+") & echo started")
	<-rec.shellExited
	if rec.shell != (Status{Exited: true}) {
		t.Errorf("ShellReturned(%+v), want exit 0", rec.shell)
	}
	rec.releaseAfterALook(t, "command ended while its background job still ran")
	e := rec.wait(t)
	if e.Shell != (Status{Exited: true}) {
		t.Errorf("exit %+v after the shell", e)
	}
	if rec.output() != "started\r\n" {
		t.Errorf("output %q", rec.output())
	}
}

// The hangup of the shell's exit (SIGHUP to the terminal's foreground
// group, where "&" jobs are) kills no job: commands run with SIGHUP
// ignored. A shell of the Bourne family gets there in one exec, with the
// trap before LINE in its arguments (its $0, its line numbers and Members
// showing LINE as written); any other shell is exec'd by /bin/sh, which
// ignores SIGHUP first, as SHELL -c LINE.
func TestHangupIgnoredByEveryShell(t *testing.T) {
	other := filepath.Join(t.TempDir(), "othersh") // a name bourneShells does not know
	if err := os.Symlink("/bin/sh", other); err != nil {
		t.Fatal(err)
	}
	// The job outlives the test's own steps up to the shell's exit, on a
	// loaded machine too (a 1 s job ended first at load 20): it runs
	// until the test releases it.
	const line = `(` + gated + `) & echo "0=$0"; grep SigIgn /proc/self/status; tr '\0' '|' </proc/$$/cmdline; echo` + "\n" +
		`nosuchcommand_x; read x`
	for _, tt := range []struct{ shell, argv string }{
		{"/bin/sh", "/bin/sh|-c|trap '' HUP; " + line + "|"},
		{"/bin/bash", "/bin/bash|-c|trap '' HUP; " + line + "|"},
		{other, other + "|-c|" + line + "|"},
	} {
		t.Run(filepath.Base(tt.shell), func(t *testing.T) {
			t.Parallel()
			if _, err := os.Stat(tt.shell); err != nil {
				t.Skip(err)
			}
			p, rec := launchShell(t, tt.shell, line)
			waitOutput(t, rec, "not found\r\n") // the error of line 2: all of it, before the echo of the input below
			ms, err := p.Members()
			if err != nil {
				t.Fatal(err)
			}
			want := Member{Pid: p.Pid(), Command: tt.shell + " -c " + strings.Join(strings.Fields(line), " ")}
			if !slices.Contains(ms, want) {
				t.Errorf("members %+v, want %+v among them", ms, want)
			}
			if _, err := p.Write([]byte("\r")); err != nil { // ends the read: the shell exits
				t.Fatal(err)
			}
			<-rec.shellExited
			rec.releaseAfterALook(t, "the command ended with its shell: the hangup killed its job")
			e := rec.wait(t)
			if e.Shell != (Status{Exited: true}) || e.Stopped != "" || e.Err != nil {
				t.Errorf("exit %+v", e)
			}
			out := strings.ReplaceAll(rec.output(), "\r\n", "\n")
			for _, w := range []string{"0=" + tt.shell + "\n", tt.argv + "\n", "2: nosuchcommand_x: "} {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in the output %q", w, out)
				}
			}
			if !sighupIgnoredIn(out) {
				t.Errorf("SIGHUP not ignored: %q", out)
			}
		})
	}
}

// sighupIgnoredIn reports whether the SigIgn line of /proc/PID/status in out
// has SIGHUP's bit.
func sighupIgnoredIn(out string) bool {
	_, mask, _ := strings.Cut(out, "SigIgn:")
	mask, _, _ = strings.Cut(strings.TrimSpace(mask), "\n")
	m, err := strconv.ParseUint(mask, 16, 64)
	return err == nil && m&(1<<(unix.SIGHUP-1)) != 0
}

// A process that leaves the session keeps the command live, and what it
// writes to the terminal is delivered before the exit.
func TestSetsidChildKeepsTheCommandLive(t *testing.T) {
	// The child runs until the test releases it: before, it slept 0.5 s,
	// and the test wanted the exit 400 ms after the shell's, which a
	// loaded machine, reporting the shell's exit late, did not give.
	_, rec := launch(t, "setsid sh -c '"+gated+"; echo late' & echo early")
	<-rec.shellExited
	rec.releaseAfterALook(t, "exit reported after the shell's, before the setsid child's")
	e := rec.wait(t)
	if e.Shell != (Status{Exited: true}) || e.Stopped != "" || e.Err != nil {
		t.Errorf("exit %+v", e)
	}
	if got := rec.output(); got != "early\r\nlate\r\n" {
		t.Errorf("output %q", got)
	}
}

func TestStop(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		returned bool // stop once the shell has returned
		grace    time.Duration
		twice    bool
		want     Exit
	}{
		{"TERM ends it", "echo ready; sleep 30", false, time.Hour, false, Exit{Shell: Status{Signal: "SIGTERM"}, Stopped: "SIGTERM"}},
		{"trapped TERM, exit code kept", "trap 'exit 7' TERM; sleep 30 & sleep 0.2; echo ready; wait", false, time.Hour, false, Exit{Shell: Status{Exited: true, Code: 7}, Stopped: "SIGTERM"}},
		{"TERM ignored", "trap '' TERM; echo ready; sleep 30", false, 300 * time.Millisecond, false, Exit{Shell: Status{Signal: "SIGKILL"}, Stopped: "SIGKILL"}},
		{"second stop skips the grace", "trap '' TERM; echo ready; sleep 30", false, time.Hour, true, Exit{Shell: Status{Signal: "SIGKILL"}, Stopped: "SIGKILL"}},
		{"detached job", "trap '' TERM; sleep 30 & echo ready", true, 300 * time.Millisecond, false, Exit{Shell: Status{Exited: true}, Stopped: "SIGKILL"}},
		{"setsid child", "setsid sh -c 'sleep 30' & echo ready", true, time.Hour, false, Exit{Shell: Status{Exited: true}, Stopped: "SIGTERM"}},
		{"setsid child ignores TERM and HUP", "setsid sh -c \"trap '' TERM HUP; sleep 30\" & sleep 0.2; echo ready", true, 300 * time.Millisecond, false, Exit{Shell: Status{Exited: true}, Stopped: "SIGKILL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, rec := launch(t, tt.line)
			waitOutput(t, rec, "ready")
			if tt.returned {
				<-rec.shellExited
			}
			p.Stop(tt.grace)
			if tt.twice {
				p.Stop(tt.grace)
			}
			if e := rec.wait(t); !reflect.DeepEqual(e, tt.want) {
				t.Errorf("exit %+v, want %+v", e, tt.want)
			}
			p.Stop(tt.grace) // after the end: nothing happens
			if ms, err := p.Members(); len(ms) != 0 || err != nil {
				t.Errorf("members after the end: %v, %v", ms, err)
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
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}

// slowWriter is an output that blocks on every write, as the writer's
// backpressure does while a client catches up.
type slowWriter struct {
	*recorder
	delay time.Duration
}

func (w slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay)
	return w.recorder.Write(p)
}

// Output written before the last process ended is all delivered before
// the exit, however long out blocks, even when a process that left the
// session writes the tail after the shell has returned.
func TestBlockingOutputLosesNothingAtExit(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	_, err := launcher.Launch(Command{
		Shell: "/bin/sh",
		Line:  "setsid sh -c 'seq 1 20000; echo END' & exit 0",
		Dir:   t.TempDir(),
		Env:   []string{"PATH=" + os.Getenv("PATH"), marker},
		Size:  Size{Cols: 120, Rows: 40},
	}, slowWriter{rec, 5 * time.Millisecond}, rec)
	if err != nil {
		t.Fatal(err)
	}
	e := rec.wait(t)
	var want strings.Builder
	for i := 1; i <= 20000; i++ {
		want.WriteString(strconv.Itoa(i) + "\r\n")
	}
	want.WriteString("END\r\n")
	if got := rec.output(); got != want.String() || e.Err != nil {
		t.Errorf("output %d bytes, want %d (ends %q); err %v", len(got), want.Len(), got[max(0, len(got)-20):], e.Err)
	}
}

// A start that fails before the shell runs leaves nothing, and says why:
// its working directory, named, if that is what failed; FailedStep says
// it without the command line.
func TestFailedStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ shell, dir, want string }{
		{"/bin/sh", "/nonexistent/dir", "chdir /nonexistent/dir: no such file or directory"},
		{"/bin/sh", file, "chdir " + file + ": not a directory"},
		{"/nonexistent/sh", t.TempDir(), "fork/exec /nonexistent/sh: no such file or directory"},
	} {
		rec := newRecorder()
		_, err := launcher.Launch(Command{
			Shell: tc.shell, Line: "echo never", Dir: tc.dir,
			Env: []string{marker}, Size: Size{Cols: 80, Rows: 24},
		}, rec, rec)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), `start "echo never": `) {
			t.Errorf("Launch in %s with %s = %v, want %q", tc.dir, tc.shell, err, tc.want)
		} else if step := FailedStep(err); step.Error() != tc.want {
			t.Errorf("FailedStep(%v) = %q, want %q", err, step, tc.want)
		}
	}

	// A long line is named by its start: the error of a 300 KiB heredoc
	// was 300 KiB, in the failed tool call's text.
	rec := newRecorder()
	_, err := launcher.Launch(Command{
		Shell: "/bin/sh", Line: longLine(longContent(300<<10), "true"), Dir: "/nonexistent/dir",
		Env: []string{marker}, Size: Size{Cols: 80, Rows: 24},
	}, rec, rec)
	const start, end = `start "cat > f <<'EOF'\n`, `…": chdir /nonexistent/dir: no such file or directory`
	if err == nil || len(err.Error()) > 200 || !strings.HasPrefix(err.Error(), start) || !strings.HasSuffix(err.Error(), end) {
		t.Errorf("Launch of a long line in a missing directory = %.300v, want %s…%s, at most 200 bytes", err, start, end)
	}
}

// abort, what Launch does when it fails after the fork, kills and reaps
// everything the command started.
func TestAbortKillsAndReaps(t *testing.T) {
	g, err := launcher.Containment.NewGroup()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := g.ForkExec("/bin/sh", []string{"sh", "-c", "setsid sleep 30 & sleep 30"}, &syscall.ProcAttr{
		Env: []string{"PATH=" + os.Getenv("PATH"), marker},
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ms, _ := g.Members(); len(ms) >= 3 || time.Now().After(deadline) {
			break
		}
	}
	if err := abort(pid, g); err != nil {
		t.Fatal(err)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); !errors.Is(err, unix.ECHILD) {
		t.Errorf("the shell was not reaped: wait4 = %v", err)
	}
	if left := acptest.ProcessesWith(marker); len(left) > 0 {
		t.Errorf("left running: %v", left)
	}
}
