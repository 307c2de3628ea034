package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/protocol/acptest"
)

// A client that sends requests faster than they can be answered does not
// grow the agent's memory without bound: past 1000 requests of one
// connection awaiting their answers (here prompts held behind a
// foreground command that runs on), the next is refused at once with
// -32600 saying why, and the connection goes on; the held ones are
// answered as ever (-32800 at session/cancel).
//
// Before the bound, every such request was kept until it was answered:
// 100,000 prompts held behind `sleep 1000` took the daemon from 14 MB to
// 258 MB of RSS, and 60,000 session/close of a session whose command
// ignores SIGTERM (kill grace 30 s) took 36 MB, released only when they
// were answered.
func TestRequestsAwaitingAnswersAreBounded(t *testing.T) {
	t.Parallel()
	const bound, over = 1000, 50
	a := startAgent(t, "--foreground-timeout", "0")
	sid := a.session()
	a.prompt(sid, "sleep 600") // inserted: its answer does not wait for the command
	a.c.WaitFor("sleep runs", func(m *acptest.Msg) bool { return m.SessionID == sid && m.State() == "running" })

	ids := make([]int64, bound+over)
	for i := range ids {
		ids[i] = a.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]string{{"type": "text", "text": "echo held"}}})
	}
	for i, id := range ids[bound:] {
		m := a.c.Wait(id)
		if m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "await their answers") {
			t.Fatalf("prompt %d of %d sent while %d were held: answered %s, want -32600 saying that too many await their answers", bound+i+1, len(ids), bound, m.Raw)
		}
	}
	// Still serving, the held prompts still held.
	a.c.MustCall("session/list", map[string]any{}, nil)
	held := func() int {
		n := 0
		for _, m := range a.c.Transcript() {
			if m.IsResponse() && m.Error == nil && m.MessageID() != "" {
				n++
			}
		}
		return n
	}
	if n := held(); n != 1 {
		t.Fatalf("%d prompts were inserted, want the first one only", n)
	}
	a.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	for i, id := range ids[:bound] {
		if m := a.c.Wait(id); m.Error == nil || m.Error.Code != -32800 {
			t.Fatalf("held prompt %d: answered %s at session/cancel, want -32800", i+1, m.Raw)
		}
	}
	// The bound counts what awaits an answer now, not what ever did.
	a.prompt(sid, "echo after")
	a.c.WaitFor("echo after", func(m *acptest.Msg) bool { return strings.Contains(string(a.c.Output(sid, "term_2")), "after") })
	a.c.Close()
	a.c.Check()
}

// A shortage of descriptors does not lose a terminal's end: the agent's
// commands end while it can open none (its RLIMIT_NOFILE lowered below
// what it holds, as when terminals and connections fill its table), and each
// terminal still gets its exitStatus once it can open them again.
//
// Before the fix, in cgroup mode, the watcher's one call for the change
// of a terminal's cgroup.events failed to open the file (EMFILE), the
// change was not signalled again, and the terminal stayed live for good,
// its processes gone: a daemon run with ulimit -n 64, 22 terminals of
// sleep and idle connections holding the rest, listed all 22 as running
// in daemon status long after the sleeps had ended and the connections
// had gone, and sent no exitStatus.
func TestTerminalEndsOutliveADescriptorShortage(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	sid := a.session()
	const n = 3
	for i := 1; i <= n; i++ {
		a.prompt(sid, "/bg sleep 600")
		term := fmt.Sprintf("term_%d", i)
		a.c.WaitFor(term+" announced", func(m *acptest.Msg) bool {
			return m.SessionID == sid && m.Kind == "terminal_update" && m.TerminalID() == term
		})
	}
	a.waitProcesses(1 + n) // the agent, and at least a sleep a terminal

	pid := a.cmd.Process.Pid
	var limit unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &limit); err != nil {
		t.Fatalf("read the agent's RLIMIT_NOFILE: %v", err)
	}
	// A descriptor gets the lowest free number, refused from the limit
	// on: with the limit at 3, above stdin, stdout and stderr, the agent
	// can open nothing, whatever it closes meanwhile (a reaped shell's
	// pidfd).
	short := limit
	short.Cur = 3
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &short, nil); err != nil {
		t.Fatalf("lower the agent's RLIMIT_NOFILE: %v", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &limit, nil); err != nil {
				t.Errorf("restore the agent's RLIMIT_NOFILE: %v", err)
			}
		}
	}
	defer restore()
	// Killed until none is left: a shell may fork its sleep after a look.
	waitFor(t, "the commands to end", func() bool {
		left := 0
		for _, p := range a.processes() {
			if p != pid {
				syscall.Kill(p, syscall.SIGKILL)
				left++
			}
		}
		return left == 0
	})
	time.Sleep(300 * time.Millisecond) // the agent sees the ends, and can open nothing
	restore()
	for i := 1; i <= n; i++ {
		term := fmt.Sprintf("term_%d", i)
		a.c.WaitFor(term+" exitStatus", func(m *acptest.Msg) bool {
			return m.SessionID == sid && m.TerminalID() == term && m.ExitStatus() != nil
		})
	}
	a.c.Close()
	a.c.Check()
}
