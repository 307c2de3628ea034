package main

import (
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"shellagent/contain"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// The client on a terminal, driven as a person would: keystrokes typed
// into the PTY it runs on, and its screen read back through a small
// terminal model (screen_test.go), or through tmux for vim.

// ttyRows and ttyCols are the size of the test terminals.
const ttyRows, ttyCols = 30, 100

// ttyTimeout bounds each wait for the screen: what is bound to show,
// with no promise of when.
const ttyTimeout = testloop.Wait

// ttyRun is "shellagent client" on a PTY of the test's, with a marker in
// its environment so that the test can check that nothing is left
// behind.
type ttyRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	pty    *os.File
	scr    *screen
	dir    string
	read   chan struct{} // closed when the PTY has been read to its end
	marker string
}

// startTTY starts the client on a new PTY of ttyRows by ttyCols. Its
// agent has a sweep scope of its own: the agent's stderr is the
// terminal, and an agent of the suite's scope sweeps what the suite's
// killed agents left and says so there ("swept what dead agents left"),
// in the middle of the screen the test reads.
func startTTY(t *testing.T, args ...string) *ttyRun {
	t.Helper()
	return startTTYIn(t, t.TempDir(), append(os.Environ(), contain.SweepScopeEnv+"="+rand.Text()), args...)
}

// startTTYIn starts the client as startTTY does, in dir, with env and a
// marker of its own.
func startTTYIn(t *testing.T, dir string, env []string, args ...string) *ttyRun {
	t.Helper()
	r := &ttyRun{t: t, dir: dir, read: make(chan struct{}), marker: "SHELLAGENT_TEST=" + rand.Text()}
	r.cmd = exec.Command(binary, append([]string{"client"}, args...)...)
	r.cmd.Env = append(env, noRaceExitDelay, r.marker, "SHELL=/bin/sh", "TERM=xterm-256color")
	r.cmd.Dir = r.dir
	var err error
	r.pty, err = pty.StartWithSize(r.cmd, &pty.Winsize{Rows: ttyRows, Cols: ttyCols})
	if err != nil {
		t.Fatal(err)
	}
	r.scr = newScreen(ttyRows, ttyCols, r.pty)
	go func() {
		defer close(r.read)
		_, _ = io.Copy(r.scr, r.pty) // Safe: ends with EIO once the client has exited.
	}()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil { // a failed test: end the client, and so its agent
			_ = r.cmd.Process.Signal(syscall.SIGTERM) // Best effort: it may have exited.
			done := make(chan struct{})
			go func() { _ = r.cmd.Wait(); close(done) }() // Best effort: it was signalled.
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = r.cmd.Process.Kill() // Best effort: it did not end.
				<-done
			}
		}
		_ = r.pty.Close() // Best effort: the reader ends.
		<-r.read
		noneLeft(t, r.marker)
	})
	return r
}

// noneLeft fails the test for each process with the marker still alive
// a while after the test, and kills it.
func noneLeft(t *testing.T, marker string) {
	deadline := time.Now().Add(10 * time.Second)
	for len(acptest.ProcessesWith(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for _, pid := range acptest.ProcessesWith(marker) {
		t.Errorf("process %d left behind", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL) // Best effort: clean up after the failure.
	}
}

// press types keys into the client's terminal.
func (r *ttyRun) press(keys string) {
	r.t.Helper()
	if _, err := r.pty.WriteString(keys); err != nil {
		r.t.Fatal(err)
	}
}

// waitScreen waits until ok holds for everything the terminal has shown
// (the lines scrolled off, then the screen), and returns that.
func (r *ttyRun) waitScreen(what string, ok func(all string) bool) string {
	r.t.Helper()
	deadline := time.Now().Add(ttyTimeout)
	for {
		all := r.scr.all()
		if ok(all) {
			return all
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the terminal never showed %s; it shows:\n%s", what, all)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCount waits until s has been shown n times.
func (r *ttyRun) waitCount(s string, n int) string {
	r.t.Helper()
	return r.waitScreen(strings.Repeat("another ", n-1)+strconv.Quote(s), func(all string) bool { return strings.Count(all, s) >= n })
}

// waitPrompt waits until the cursor is on an empty prompt, the nth
// shown.
func (r *ttyRun) waitPrompt(n int) string {
	r.t.Helper()
	return r.waitScreen("the prompt", func(all string) bool {
		return prompts(all) >= n && r.scr.cursorLine() == ">"
	})
}

// tickLines counts the lines that are "tick".
func tickLines(all string) int {
	n := 0
	for l := range strings.SplitSeq(all, "\n") {
		if l == "tick" {
			n++
		}
	}
	return n
}

// prompts counts the lines that start with the prompt.
func prompts(all string) int {
	n := 0
	for l := range strings.SplitSeq(all, "\n") {
		if l == ">" || strings.HasPrefix(l, "> ") {
			n++
		}
	}
	return n
}

// quit types keys that end the session (Ctrl-D or /quit) while nothing
// runs, and fails the test unless the client says the session closed and
// exits without error.
func (r *ttyRun) quit(keys string) {
	r.t.Helper()
	r.press(keys)
	r.waitCount("[session closed]", 1)
	if err := r.exit(); err != nil {
		r.t.Errorf("client exit: %v", err)
	}
}

// stop stops terminal term from the prompt, and waits for its end and
// for the prompt to come back as the nth.
func (r *ttyRun) stop(term string, prompt int) {
	r.t.Helper()
	r.press("/stop " + term + "\r")
	r.waitCount("["+term+" ended: signal SIGTERM]", 1)
	r.waitPrompt(prompt)
}

// ticksStay fails the test unless the screen still shows n tick lines a
// second later: no output of a terminal that is not shown reached it.
func (r *ttyRun) ticksStay(n int, when string) {
	r.t.Helper()
	time.Sleep(time.Second)
	if after := tickLines(r.scr.all()); after != n {
		r.t.Errorf("%d ticks shown %s:\n%s", after-n, when, r.scr.all())
	}
}

// exit waits for the client to exit and returns its error.
func (r *ttyRun) exit() error {
	r.t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(ttyTimeout):
		r.t.Fatalf("the client did not exit; the terminal shows:\n%s", r.scr.all())
		return nil
	}
}

// hint is the line shown when the command of term_N takes the keyboard.
func hint(id string) string {
	return "[" + id + ": keys go to the command; Ctrl-B b: background, Ctrl-B c: cancel]"
}

// A command that reads a line gets the line typed at the terminal.
func TestTerminalRead(t *testing.T) {
	t.Parallel()
	r := startTTY(t)
	r.waitPrompt(1)
	r.press("read x; echo got $x\r")
	r.waitCount(hint("term_1"), 1)
	r.press("hello\r")
	all := r.waitCount("[term_1 ended: exit 0]", 1)
	if !strings.Contains(all, hint("term_1")+"\nhello\ngot hello\n[term_1 ended: exit 0]") {
		t.Errorf("the command did not get the line; the terminal shows:\n%s", all)
	}
	r.waitPrompt(2)
	r.quit("\x04") // Ctrl-D: nothing runs, so no question
}

// Ctrl-C is the command's own: SIGINT from its PTY, not the client's
// interrupt. The command has the terminal's size: the client gives it at
// the start, and again after SIGWINCH.
func TestTerminalInterruptAndSize(t *testing.T) {
	t.Parallel()
	r := startTTY(t)
	r.waitPrompt(1)
	r.press("while read x; do stty size; done\r")
	// The size is sent when the command takes the keyboard, before any
	// key: the first line typed sees it.
	r.waitCount(hint("term_1"), 1)
	r.press("\r")
	r.waitCount("30 100", 1)
	if err := pty.Setsize(r.pty, &pty.Winsize{Rows: 20, Cols: 70}); err != nil {
		t.Fatal(err)
	}
	r.scr.resize(20, 70)
	// SIGWINCH reaches the client when it does: type lines until the
	// command sees the new size.
	r.waitScreen("the new size", func(all string) bool {
		r.press("\r")
		time.Sleep(100 * time.Millisecond)
		return strings.Contains(all, "20 70")
	})
	r.press("\x03")
	all := r.waitCount("[term_1 ended: signal SIGINT]", 1)
	if strings.Contains(all, "cancelling") {
		t.Errorf("Ctrl-C was the client's interrupt:\n%s", all)
	}
	r.waitPrompt(2)
	r.quit("/quit\r")
}

// Foreground work with no terminal to type into (/wait) is the client's
// to interrupt: Ctrl-C cancels it, and the prompt returns.
func TestTerminalInterruptWait(t *testing.T) {
	t.Parallel()
	r := startTTY(t)
	r.waitPrompt(1)
	r.press("/bg sleep 60\r")
	r.waitCount("[background: term_1 (sleep 60)]", 1)
	r.waitPrompt(2)
	r.press("/wait term_1 never\r")
	r.waitCount("[call_2 in_progress: Waiting for a line of term_1", 1)
	r.press("\x03")
	r.waitCount("[cancelling the foreground command; background work runs on; Ctrl-C again closes the session]", 1)
	r.waitCount("[turn cancelled]", 1)
	r.waitPrompt(3)
	r.stop("term_1", 4)
	r.quit("\x04")
}

// Ctrl-B b moves a server to the background, and the prompt returns; its
// output is no longer shown.
func TestTerminalBackground(t *testing.T) {
	t.Parallel()
	r := startTTY(t)
	r.waitPrompt(1)
	r.press("while sleep 0.2; do echo tick; done\r")
	r.waitScreen("ticks", func(all string) bool { return tickLines(all) >= 2 })
	r.press("\x02b")
	all := r.waitCount("[background: term_1 (while sleep 0.2; do echo tick; done)]", 1)
	if !strings.Contains(all, "Moved to the background by /bg.") {
		t.Errorf("no word of the move:\n%s", all)
	}
	r.waitPrompt(2)
	ticks := tickLines(r.scr.all())
	r.ticksStay(ticks, "after the move to the background")
	r.stop("term_1", 3)
	r.quit("\x04")
}

// /attach shows a background terminal's output and takes keys for it;
// Ctrl-B d detaches, and its output is no longer shown.
func TestTerminalAttach(t *testing.T) {
	t.Parallel()
	r := startTTY(t)
	r.waitPrompt(1)
	r.press("/bg while sleep 0.2; do echo tick; done\r")
	r.waitCount("[background: term_1 (while sleep 0.2; do echo tick; done)]", 1)
	r.waitPrompt(2)
	r.ticksStay(0, "before /attach") // a background terminal's output is not shown
	r.press("/attach term_1\r")
	r.waitCount("[term_1 (while sleep 0.2; do echo tick; done): keys go to it; Ctrl-B d: detach, Ctrl-B c: stop it]", 1)
	// The screen is redrawn from what it printed before, then goes on.
	before := r.waitScreen("ticks", func(all string) bool { return tickLines(all) >= 6 })
	r.press("\x02d")
	r.waitPrompt(3)
	ticks := tickLines(r.scr.all())
	if ticks < tickLines(before) {
		t.Fatalf("fewer ticks than before:\n%s", r.scr.all())
	}
	r.ticksStay(ticks, "after detaching")
	r.press("/attach term_9\r")
	r.waitCount("[no terminal term_9; /ps lists them]", 1)
	r.stop("term_1", 5)
	r.quit("/quit\r")
}

// Up-arrow recalls the last line, and the edited line is what runs.
func TestTerminalHistory(t *testing.T) {
	t.Parallel()
	r := startTTY(t)
	r.waitPrompt(1)
	r.press("echo one\r")
	r.waitCount("[term_1 ended: exit 0]", 1)
	r.waitPrompt(2)
	r.press("\x1b[A") // Up
	r.waitScreen("the line recalled", func(string) bool { return r.scr.cursorLine() == "> echo one" })
	r.press("\x7f\x7f\x7ftwo\r") // three Backspaces: "echo two"
	all := r.waitCount("[term_2 ended: exit 0]", 1)
	if !strings.Contains(all, "> echo two\n"+hint("term_2")+"\ntwo\n") {
		t.Errorf("the recalled line did not run as edited:\n%s", all)
	}
	r.waitPrompt(3)
	r.quit("\x04")
}

// The terminal's reply to a cursor position request never becomes part
// of the next line: the command typed next runs as typed.
func TestTerminalCursorReport(t *testing.T) {
	t.Parallel()
	r := startTTY(t)
	r.waitPrompt(1)
	r.press(`printf '\033[6n'` + "\r")
	r.waitCount("[term_1 ended: exit 0]", 1)
	r.waitPrompt(2)
	// Between commands too: a reply that comes while the prompt waits.
	r.press("\x1b[12;1R\x1b[?62;c\x1b]11;rgb:0000/0000/0000\x07echo after\r")
	all := r.waitCount("[term_2 ended: exit 0]", 1)
	if !strings.Contains(all, "> echo after\n"+hint("term_2")+"\nafter\n[term_2 ended: exit 0]") {
		t.Errorf("the typed command did not run unchanged:\n%s", all)
	}
	r.waitPrompt(3)
	r.quit("/quit\r")
}

// Closing with a running server asks first: n keeps it running (and says
// how to stop it), and so does Ctrl-C at the question; y closes.
func TestTerminalCloseAsks(t *testing.T) {
	t.Parallel()
	r := startTTY(t)
	r.waitPrompt(1)
	r.press("/bg sleep 60\r")
	r.waitCount("[background: term_1 (sleep 60)]", 1)
	r.waitPrompt(2)
	question := "[closing the session will stop 1 background item: term_1 (sleep 60)]\n[close the session and stop it? y/N]"
	kept := "[nothing was stopped; stop an item with /stop term_1]"
	r.press("\x04") // Ctrl-D
	r.waitCount(question, 1)
	r.press("n")
	r.waitCount(kept, 1)
	r.waitPrompt(3)
	r.press("/ps\r")
	r.waitCount("term_1  terminal  sleep 60", 1)
	r.waitPrompt(4)
	r.press("\x03")
	r.waitCount("[Ctrl-C again, Ctrl-D or /quit closes the session]", 1)
	r.press("\x03")
	r.waitCount(question, 2)
	r.press("\x03") // a second Ctrl-C at the question: no
	r.waitCount(kept, 2)
	r.press("/quit\r")
	r.waitCount(question, 3)
	r.press("y")
	all := r.waitCount("[session closed]", 1)
	if !strings.Contains(all, "[term_1 ended: signal SIGTERM]") {
		t.Errorf("the close did not stop the server:\n%s", all)
	}
	if strings.Contains(all, "terminal/cancel") && strings.Count(all, "terminal/cancel") != strings.Count(all, "stop it with terminal/cancel or /stop") {
		t.Errorf("the client named a wire method:\n%s", all)
	}
	if err := r.exit(); err != nil {
		t.Errorf("client exit: %v", err)
	}
}

// needTool returns the path of a program a test needs, or skips the test
// in one line without it, unless SHELLAGENT_INTEROP=1 makes it mandatory.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if interopRequired() {
			t.Fatalf("%s is not installed (SHELLAGENT_INTEROP=1 makes this test mandatory)", name)
		}
		t.Skipf("%s is not installed; set SHELLAGENT_INTEROP=1 to require it", name)
	}
	return path
}

// vim opens a file in a real terminal emulator (tmux), :wq saves it, and
// the client is back at its prompt.
func TestTerminalVim(t *testing.T) {
	t.Parallel()
	tmux := needTool(t, "tmux")
	needTool(t, "vim")
	dir := t.TempDir()
	sock := filepath.Join(dir, "tmux.sock")
	marker := "SHELLAGENT_TEST=" + rand.Text()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tmux, append([]string{"-S", sock}, args...)...)
		cmd.Env = append(os.Environ(), "TERM=xterm-256color")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "30", "-c", dir,
		"env "+marker+" "+noRaceExitDelay+" SHELL=/bin/sh "+binary+" client 2>"+filepath.Join(dir, "stderr")+"; echo client exited: $?; sleep 60")
	t.Cleanup(func() {
		_ = exec.Command(tmux, "-S", sock, "kill-server").Run() // Best effort: the test may have ended it; the client gets SIGHUP.
		noneLeft(t, marker)
	})
	screen := func() string { return run("capture-pane", "-p") }
	wait := func(what string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(ttyTimeout)
		for {
			s := screen()
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				stderr, _ := os.ReadFile(filepath.Join(dir, "stderr")) // Safe: an empty stderr says as much.
				t.Fatalf("tmux never showed %s; it shows:\n%s\nthe client's stderr:\n%s", what, s, stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	lastLine := func(s string) string {
		lines := strings.Split(strings.TrimRight(s, "\n "), "\n")
		return strings.TrimRight(lines[len(lines)-1], " ")
	}
	wait("the prompt", func(s string) bool { return lastLine(s) == ">" })
	run("send-keys", "vim -u NONE -i NONE f.txt", "Enter")
	wait("vim", func(s string) bool { return strings.Count(s, "\n~") > 20 })
	run("send-keys", "ihello from vim", "Escape")
	run("send-keys", ":wq", "Enter")
	s := wait("the prompt after vim", func(s string) bool {
		return strings.Contains(s, "[term_1 ended: exit 0]") && lastLine(s) == ">"
	})
	if strings.Contains(s, "~") {
		t.Errorf("vim's screen is still shown:\n%s", s)
	}
	data, err := os.ReadFile(filepath.Join(dir, "f.txt"))
	if err != nil || string(data) != "hello from vim\n" {
		t.Errorf("f.txt holds %q (%v), want %q", data, err, "hello from vim\n")
	}
	run("send-keys", "C-d")
	wait("the close", func(s string) bool { return strings.Contains(s, "[session closed]") })
}

// An agent without the input methods gets line mode, said once.
func TestTerminalFallback(t *testing.T) {
	t.Parallel()
	fake := filepath.Join(t.TempDir(), "agent.sh")
	// An ACP v2 agent of a few lines that offers no input methods.
	script := `#!/bin/sh
while read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case $line in
  *'"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":2,"info":{"name":"plain","version":"1"},"capabilities":{}}}\n' "$id";;
  *'"session/new"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s1"}}\n' "$id";;
  *'"session/prompt"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"messageId":"m1"}}\n{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message","messageId":"a1","content":[{"type":"text","text":"heard you"}]}}}\n' "$id";;
  *'"session/close"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id"; exit 0;;
  esac
done
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := startTTY(t, "--", fake)
	r.waitCount("[this agent cannot be typed into: line mode (each line is sent as a prompt; Ctrl-C cancels)]", 1)
	r.press("hello\r")
	r.waitCount("heard you", 1)
	// Ctrl-C at the terminal is the client's (the agent runs in a process
	// group of its own, which the terminal does not signal).
	r.press("\x03")
	r.waitCount("[cancelling the foreground command; background work runs on; Ctrl-C again closes the session]", 1)
	r.press("again\r")
	all := r.waitCount("heard you", 2)
	if n := strings.Count(all, "line mode"); n != 1 {
		t.Errorf("line mode said %d times:\n%s", n, all)
	}
	r.quit("\x04") // the end of the input, in the terminal's own line mode
}
