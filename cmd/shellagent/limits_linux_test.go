package main

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/protocol/acptest"
)

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
