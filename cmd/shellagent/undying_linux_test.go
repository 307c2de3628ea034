package main

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/contain"
	"shellagent/contain/containtest"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// undyingEnd is how long after its start the agent's end, or daemon
// stop, may take with a terminal whose process a SIGKILL cannot end and
// a kill grace of 100 ms (docs/terminals.md): the grace and the end's
// slack, then the containment's wait for a process that has its SIGKILL
// pending (twice contain's CloseTimeout), which its close does not wait
// again.
const undyingEnd = 100*time.Millisecond + time.Second + 4*time.Second

// The agent's end (stdin EOF: the editor closed) with a terminal whose
// process a SIGKILL cannot end (frozen in uninterruptible sleep, as on a
// dead NFS or FUSE mount) sends that terminal's one exitStatus, signal
// SIGKILL with the pid in _meta.shellagent.left (the client checks every
// message against the schema), before its stdout ends, and exits 0 in
// bounded time. Before, the end's own bounds ran out first: the agent
// exited without the exitStatus, GiveUp after the SIGKILL.
func TestTheEndReportsAnUnkillableTerminal(t *testing.T) {
	testloop.Long(t, "waits out the give-up of an unkillable process, 5 s")
	t.Parallel()
	// A sweep scope of its own: the process it leaves until the thaw is
	// no other agent's of the suite to sweep (and wait for).
	a := startScopedAgent(t, "--kill-grace", "100ms")
	sid := a.session()
	a.prompt(sid, "/bg echo ready; exec sleep 302")
	a.waitOutput(sid, "term_1", "ready")
	pid := sleepingWith(t, a.marker, "302")
	thaw := containtest.Unkillable(t, pid)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	a.c.Close() // stdin EOF; returns at stdout's
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("agent exit: %v", err)
		}
	case <-time.After(testloop.Bound(undyingEnd)):
		t.Errorf("the agent did not exit within %v of stdin EOF", testloop.Bound(undyingEnd))
		a.cmd.Process.Kill()
		<-done
	}
	t.Logf("the agent exited %v after stdin EOF", time.Since(start))
	checkLeft(t, a.c, sid, "term_1", pid)
	thaw()
	a.noSurvivors(time.Second, "the agent's exit and the thaw")
}

// daemon stop with a terminal whose process a SIGKILL cannot end, in a
// session attached to a relay and in a detached one, sends the attached
// client its terminal's one exitStatus (signal SIGKILL, the pid in
// _meta.shellagent.left) and records the detached one's in its history,
// before the daemon exits; daemon stop exits 0. Before, the attached
// client got none (the detached one was recorded only when GiveUp after
// the SIGKILL happened to come before the history closed).
func TestDaemonStopReportsAnUnkillableTerminal(t *testing.T) {
	testloop.Long(t, "waits out the give-up of an unkillable process, 5 s")
	t.Parallel()
	d := newDaemonFixture(t, "--kill-grace", "100ms")
	a := d.relay()
	gone := a.session(d.cwd)
	a.prompt(gone, "/bg echo ready; exec sleep 303")
	a.c.WaitFor("ready", func(*acptest.Msg) bool { return strings.Contains(string(a.c.Output(gone, "term_1")), "ready") })
	a.c.Close()
	b := d.relay()
	here := b.session(d.cwd)
	b.prompt(here, "/bg echo ready; exec sleep 304")
	b.c.WaitFor("ready", func(*acptest.Msg) bool { return strings.Contains(string(b.c.Output(here, "term_1")), "ready") })
	gonePid, herePid := sleepingWith(t, d.marker, "303"), sleepingWith(t, d.marker, "304")
	thawGone := containtest.Unkillable(t, gonePid)
	thawHere := containtest.Unkillable(t, herePid)

	start := time.Now()
	stdout, stderr, code := d.run(binary, "daemon", "stop", "--socket", d.socket)
	t.Logf("daemon stop (%v):\n%s", time.Since(start), stdout)
	if code != 0 || !strings.Contains(stdout, " exited\n") {
		t.Errorf("daemon stop: exit %d, stderr %q, stdout %q; want 0 and the daemon exited", code, stderr, stdout)
	}
	if took, bound := time.Since(start), testloop.Bound(undyingEnd); took > bound {
		t.Errorf("daemon stop took %v, more than %v", took, bound)
	}
	b.exited()
	b.c.Close()
	checkLeft(t, b.c, here, "term_1", herePid)
	if st := journalExit(t, filepath.Join(d.state, "shellagent", "sessions", gone+".jsonl"), "term_1"); !leftIs(st, gonePid) {
		t.Errorf("the detached session's history records term_1's exit as %v, want signal SIGKILL and _meta.shellagent.left [%d]", st, gonePid)
	}
	thawGone()
	thawHere()
}

// startScopedAgent is startAgent with a sweep scope of its own.
func startScopedAgent(t *testing.T, args ...string) *agent {
	marker := "SHELLAGENT_TEST=" + rand.Text()
	scope := contain.SweepScopeEnv + "=" + rand.Text()
	c, cmd := acptest.StartBinary(t, binary, append([]string{"--shell", "/bin/sh", "--containment", testMode}, args...), []string{marker, noRaceExitDelay, ownState(t), scope})
	a := &agent{t: t, c: c, cmd: cmd, marker: marker, cwd: t.TempDir()}
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	return a
}

// sleepingWith waits until a process with marker in its environment has
// exec'd "sleep arg", and returns its pid.
func sleepingWith(t *testing.T, marker, arg string) int {
	t.Helper()
	deadline := time.Now().Add(testloop.Wait)
	for {
		for _, p := range acptest.ProcessesWith(marker) {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline"); strings.HasPrefix(string(b), "sleep\x00"+arg+"\x00") {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sleep %s after %v", arg, testloop.Wait)
		}
		time.Sleep(scanPause)
	}
}

// checkLeft checks that c received exactly one exitStatus for term, with
// signal SIGKILL and _meta.shellagent.left [pid].
func checkLeft(t *testing.T, c *acptest.Client, sid, term string, pid int) {
	t.Helper()
	var exits []map[string]any
	for _, m := range c.Updates(sid) {
		if m.TerminalID() == term && m.ExitStatus() != nil {
			exits = append(exits, m.ExitStatus())
		}
	}
	if len(exits) != 1 || !leftIs(exits[0], pid) {
		t.Errorf("exitStatus of %s: %v; want one, signal SIGKILL and _meta.shellagent.left [%d]\n%s", term, exits, pid, c.Dump())
	}
}

// leftIs reports whether exit status es says SIGKILL with pid alone left.
func leftIs(es map[string]any, pid int) bool {
	meta, _ := es["_meta"].(map[string]any)
	sa, _ := meta["shellagent"].(map[string]any)
	left, _ := sa["left"].([]any)
	return es["signal"] == "SIGKILL" && slices.Equal(left, []any{float64(pid)})
}

// journalExit returns the status of the exit record of term in the
// history file at path, or nil if there is none.
func journalExit(t *testing.T, path, term string) map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	var status map[string]any
	for sc.Scan() {
		var rec struct {
			T      string         `json:"t"`
			Term   string         `json:"term"`
			Status map[string]any `json:"status"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.T == "exit" && rec.Term == term {
			status = rec.Status
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return status
}
