package main

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// clientRun is "shellagent client" running on pipes, with a marker in its
// environment (inherited by the agent and every command) so that the test
// can check that nothing is left behind.
type clientRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at EOF
	seen   []string
	stderr *strings.Builder
	marker string
}

// startClient starts the client in a process group of its own, as a shell
// starts a job, so that the test can interrupt it as a terminal does.
func startClient(t *testing.T, args ...string) *clientRun {
	t.Helper()
	return startClientIn(t, t.TempDir(), os.Environ(), args...)
}

// startClientIn starts the client as startClient does, in dir, with env
// and a marker of its own.
func startClientIn(t *testing.T, dir string, env []string, args ...string) *clientRun {
	t.Helper()
	r := &clientRun{t: t, lines: make(chan string, 100), stderr: new(strings.Builder), marker: "SHELLAGENT_TEST=" + rand.Text()}
	r.cmd = exec.Command(binary, append([]string{"client"}, args...)...)
	r.cmd.Env = append(env, noRaceExitDelay, r.marker, "SHELL=/bin/sh")
	r.cmd.Stderr = r.stderr
	r.cmd.Dir = dir
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.cmd.WaitDelay = 5 * time.Second
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) // Best effort: a failed test left it running.
			_ = r.cmd.Wait()                                      // Best effort: it was killed.
		}
		for _, pid := range acptest.ProcessesWith(r.marker) {
			t.Errorf("process %d left behind", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL) // Best effort: clean up after the failure.
		}
	})
	return r
}

// send writes input lines.
func (r *clientRun) send(lines ...string) {
	r.t.Helper()
	if _, err := io.WriteString(r.stdin, strings.Join(lines, "\n")+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

// expect waits for an output line equal to want and returns the lines
// read before it.
func (r *clientRun) expect(want string) []string {
	r.t.Helper()
	timeout := time.After(20 * time.Second)
	var before []string
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("the client's output ended before %q; it printed:\n%s\nstderr:\n%s", want, strings.Join(r.seen, "\n"), r.stderr)
			}
			r.seen = append(r.seen, line)
			if line == want {
				return before
			}
			before = append(before, line)
		case <-timeout:
			r.t.Fatalf("no line %q; the client printed:\n%s\nstderr:\n%s", want, strings.Join(r.seen, "\n"), r.stderr)
		}
	}
}

// interrupt sends SIGINT to the client's process group, as Ctrl-C at a
// terminal does.
func (r *clientRun) interrupt() {
	r.t.Helper()
	if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT); err != nil {
		r.t.Fatal(err)
	}
}

// wait waits for the client to exit, checks status 0 and returns the rest
// of its output.
func (r *clientRun) wait() []string {
	r.t.Helper()
	var rest []string
	for line := range r.lines {
		r.seen = append(r.seen, line)
		rest = append(rest, line)
	}
	if err := r.cmd.Wait(); err != nil {
		r.t.Errorf("client exit: %v\nstderr:\n%s", err, r.stderr)
	}
	return rest
}

// runScript runs the client on input and returns its output and stderr.
func runScript(t *testing.T, input string, args ...string) (string, string) {
	t.Helper()
	r := startClient(t, args...)
	if _, err := io.WriteString(r.stdin, input); err != nil {
		t.Fatal(err)
	}
	if err := r.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	out := r.wait()
	return strings.Join(out, "\n") + "\n", withoutSweeps(r.stderr.String())
}

// withoutSweeps drops from an agent's stderr the lines of its sweep of
// what dead agents left (that it swept, or that it exits before the
// sweep is done, as it can on a loaded machine): it sweeps the whole
// machine at its start, and an agent that another test, or another suite
// on the machine, killed a moment before is none of the test's business.
func withoutSweeps(stderr string) string {
	lines := strings.SplitAfter(stderr, "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool {
		return strings.Contains(l, `msg="swept what dead agents left"`) || strings.Contains(l, `msg="exiting before the sweep of dead agents' leftovers is done"`)
	})
	return strings.Join(lines, "")
}

// The example of the issue: hi is printed, the list shows the sleep, /ps
// lists it, and the end of the input stops it at once.
func TestClientScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Now()
	out, stderr := runScript(t, "echo hi\n/bg sleep 300\n/ps\n", "--cwd", dir)
	// The agent's promise: its work stopped within the kill grace (3 s by
	// default) plus a second; the sleep ends with SIGTERM (below).
	if took, bound := time.Since(start), testloop.Bound(4*time.Second); took > bound {
		t.Errorf("took %v, more than %v: the sleep was not stopped at the end of the input", took, bound)
	}
	for _, want := range []string{
		"[agent: shellagent devel, ACP v2]\n[session started in " + dir + "]\n",
		"> echo hi\n[term_1 started]\nhi\n[term_1 ended: exit 0]\n",
		"> /bg sleep 300\n[term_2 started: sleep 300]\n",
		"[background: term_2 (sleep 300)]\n> /ps\nBackground work:\nterm_2  terminal  sleep 300",
		"[closing the session will stop 1 background item: term_2 (sleep 300)]\n[term_2 ended: signal SIGTERM]\n[background: none; the session is quiet]\n[session closed]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if stderr != "" {
		t.Errorf("stderr: %s", stderr)
	}
}

// The README's first command prints the same on every run: demoOutput
// (TestReadmeDemo checks that the README shows it).
func TestClientDemo(t *testing.T) {
	t.Parallel()
	demo, err := os.ReadFile("../../testdata/demo.txt")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	want := demoOutput(dir)
	for range 2 {
		out, stderr := runScript(t, string(demo), "--cwd", dir, "--set", "foreground_timeout=1s")
		if out != want || stderr != "" {
			t.Errorf("the demo printed:\n%s\nwant:\n%s\nstderr: %s", out, want, stderr)
		}
	}
}

// demoOutput is what the demo (testdata/demo.txt with --set
// foreground_timeout=1s) prints when run in dir.
func demoOutput(dir string) string {
	return `[agent: shellagent devel, ACP v2]
[session started in ` + dir + `]
[set foreground_timeout to 1s]
> printf 'compiled in 0.4s\nlistening on http://localhost:3000\n'; exec sleep 600
[term_1 started]
compiled in 0.4s
listening on http://localhost:3000
[call_1 completed: Still running after the 1s foreground timeout: moved to the background. It runs on in terminal term_1; stop it with terminal/cancel or /stop term_1.]
[background: term_1 (printf 'compiled in 0.4s\nlistening on http://localhost:3000\n'; exec sleep 600)]
> /stop term_1
Stopping term_1: SIGTERM sent; its exit status follows.
[term_1 ended: signal SIGTERM]
[background: none; the session is quiet]
[session closed]
`
}

// Output is labelled by terminal while several terminals run, and not
// while one does. b2 waits for the third command to have started (the
// file f1), not a second: on a loaded machine the third could start
// after that second, and b2 came while one terminal ran; and that
// command runs on a second after b2 was printed.
func TestClientLabels(t *testing.T) {
	t.Parallel()
	out, _ := runScript(t, "echo alone\n"+
		"/bg echo b1; until [ -e f1 ]; do sleep 0.05; done; echo b2; touch b2; sleep 30\n"+
		"touch f1; echo f1; until [ -e b2 ]; do sleep 0.05; done; sleep 1; echo f2\n")
	for _, want := range []string{"\nalone\n", "\nterm_2| b2\n", "\nterm_3| f1\n", "\nterm_3| f2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// Ctrl-C cancels the foreground command and background work runs on; a
// second Ctrl-C before the next line closes the session, which stops it.
func TestClientInterrupt(t *testing.T) {
	t.Parallel()
	r := startClient(t)
	r.send("/bg sleep 30", "echo working; sleep 30")
	r.expect("[background: term_1 (sleep 30)]")
	r.expect("term_2| working") // labelled: two terminals run
	r.interrupt()
	r.expect("[cancelling the foreground command; background work runs on; Ctrl-C again closes the session]")
	r.expect("[term_2 ended: signal SIGTERM]")
	r.expect("[turn cancelled]")
	r.send("echo still here")
	r.expect("term_3| still here")
	r.expect("[term_3 ended: exit 0]")
	// A new line starts the count again: one Ctrl-C cancels, the second
	// closes.
	r.interrupt()
	r.expect("[cancelling the foreground command; background work runs on; Ctrl-C again closes the session]")
	r.interrupt()
	r.expect("[closing the session will stop 1 background item: term_1 (sleep 30)]")
	r.expect("[term_1 ended: signal SIGTERM]")
	r.expect("[session closed]")
	if rest := r.wait(); len(rest) > 0 {
		t.Errorf("printed after closing: %q", rest)
	}
}

// The end of the input closes the session even while a command runs,
// when the input is a pipe that ends.
func TestClientEOF(t *testing.T) {
	t.Parallel()
	r := startClient(t)
	r.send("/bg sleep 30", "/bg sleep 30")
	r.expect("[background: term_1 (sleep 30), term_2 (sleep 30)]")
	start := time.Now()
	if err := r.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	r.expect("[closing the session will stop 2 background items: term_1 (sleep 30), term_2 (sleep 30)]")
	r.expect("[session closed]")
	r.wait()
	// The promise: the kill grace (3 s by default) plus a second.
	if took, bound := time.Since(start), testloop.Bound(4*time.Second); took > bound {
		t.Errorf("closing took %v, more than %v", took, bound)
	}
}

// SIGTERM to the client stops the agent at once, without waiting for a
// close: the agent stops its work in its kill grace and exits, the client
// exits 1, and nothing is left behind.
func TestClientSIGTERM(t *testing.T) {
	t.Parallel()
	r := startClient(t)
	r.send("/bg sleep 30")
	r.expect("[background: term_1 (sleep 30)]")
	start := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r.expect("[terminated signal received: stopping the agent]")
	for range r.lines {
	}
	var exit *exec.ExitError
	if err := r.cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(r.stderr.String(), "terminated signal received") {
		t.Errorf("exit %v, stderr %q; want exit status 1 naming the signal", err, r.stderr)
	}
	// The agent has 3s (its kill grace) to stop the sleep, and the client
	// waits for it 2s more before SIGKILL.
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the client took %v to end after SIGTERM", took)
	}
}

// --trace writes every line of the exchange, in both directions.
func TestClientTrace(t *testing.T) {
	t.Parallel()
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	runScript(t, "echo traced\n", "--trace", trace)
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	var chunks int
	for line := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
		var entry map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &entry); err != nil || len(entry) != 1 {
			t.Fatalf("trace line %q is not {\"client\":…} or {\"agent\":…}: %v", line, err)
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Update struct {
					SessionUpdate string `json:"sessionUpdate"`
				} `json:"update"`
			} `json:"params"`
		}
		for from, raw := range entry {
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("trace line %q: %v", line, err)
			}
			if from == "client" && m.Method != "" {
				methods = append(methods, m.Method)
			}
			if from == "agent" && m.Params.Update.SessionUpdate == "terminal_output_chunk" {
				chunks++
			}
		}
	}
	if want := "initialize session/new session/prompt session/close"; strings.Join(methods, " ") != want {
		t.Errorf("the client sent %v, want %s", methods, want)
	}
	if chunks == 0 || !strings.Contains(string(data), `"terminalId":"term_1","exitStatus":{"exitCode":0}`) {
		t.Errorf("the trace lacks the agent's messages:\n%s", data)
	}
}

// Any ACP v2 agent command after --: here this binary with its own flags.
func TestClientOtherAgent(t *testing.T) {
	t.Parallel()
	out, _ := runScript(t, "sleep 30\n", "--", binary, "--foreground-timeout", "1s", "--shell", "/bin/sh")
	if !strings.Contains(out, "[call_1 completed: Still running after the 1s foreground timeout") ||
		!strings.Contains(out, "[closing the session will stop 1 background item: term_1 (sleep 30)]") {
		t.Errorf("output:\n%s", out)
	}
}

// Permission requests are printed and answered by --permissions.
func TestClientPermissions(t *testing.T) {
	t.Parallel()
	allowed, _ := runScript(t, "echo ran\n", "--set", "permission=ask", "--permissions", "allow")
	if !strings.Contains(allowed, "[permission requested: Run echo ran (run \"echo ran\" in ") ||
		!strings.Contains(allowed, "[answered allow by --permissions allow]\n[term_1 started]\nran\n") {
		t.Errorf("with --permissions allow:\n%s", allowed)
	}
	rejected, _ := runScript(t, "echo ran\n", "--set", "permission=ask")
	if !strings.Contains(rejected, "[answered reject by --permissions reject]\n[call_1 failed: ") || strings.Contains(rejected, "\nran\n") {
		t.Errorf("with the default in scripts (reject):\n%s", rejected)
	}
	asked, _ := runScript(t, "echo ran\nno\n", "--set", "permission=ask", "--permissions", "ask")
	if !strings.Contains(asked, "[answer with one of: allow, reject]\n[answered reject]\n[call_1 failed: ") {
		t.Errorf("with --permissions ask and the answer no:\n%s", asked)
	}
}

// A setting the agent rejects ends the client with exit status 1, and the
// refusal is printed once, as a person reads it. Issue 23: it was printed
// twice, once with the wire request shape and once on stderr with a
// "lineclient:" prefix.
func TestClientBadSetting(t *testing.T) {
	t.Parallel()
	r := startClient(t, "--set", "foreground_timeout=soon")
	before := r.expect("[session closed]")
	want := "[cannot set foreground_timeout to soon: want a duration such as 10s, 500ms or 1m30s; offered: 0, 1s, 5s, 10s, 30s, 60s, 300s or any other duration, e.g. 7s or 1m30s]"
	if len(before) == 0 || before[len(before)-1] != want {
		t.Errorf("printed %q, want the last line %q", before, want)
	}
	for range r.lines {
	}
	var exit *exec.ExitError
	if err := r.cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 1 || withoutSweeps(r.stderr.String()) != "" {
		t.Errorf("exit %v, stderr %q; want exit status 1 and nothing on stderr", err, r.stderr)
	}
}

// --set takes any duration, as the flag does. Issue 23: "--set
// foreground_timeout=7s" was refused though "--foreground-timeout 7s"
// works.
func TestClientSetsAnyDuration(t *testing.T) {
	t.Parallel()
	out, stderr := runScript(t, "echo ran\n", "--set", "foreground_timeout=7s", "--set", "kill_grace=1m30s")
	if !strings.Contains(out, "[set foreground_timeout to 7s]\n[set kill_grace to 1m30s]\n") || !strings.Contains(out, "\nran\n") || stderr != "" {
		t.Errorf("printed:\n%s\nstderr %q", out, stderr)
	}
}
