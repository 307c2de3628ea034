package main

import (
	"strings"
	"syscall"
	"testing"

	"shellagent/protocol/acptest"
)

// The daemon reads a relay's requests from the relay's stdin, which the
// relay hands it with its hello, not through the relay: with the relay
// stopped (SIGSTOP), a session is opened, a prompt runs and its output
// arrives. Continued, the relay ends at the end of its input as before,
// with 0, and the daemon detaches the session.
func TestDaemonReadsTheRelaysStdin(t *testing.T) {
	t.Parallel()
	d := newDaemonFixture(t)
	r := d.relay()
	d.waitLog(`"input from its stdin"=true`)
	pid := r.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay to stop", func() bool { return procState(pid) == "T" })

	sid := r.session(d.cwd)
	r.prompt(sid, "echo through the daemon alone")
	r.c.WaitFor("the prompt's output", func(*acptest.Msg) bool {
		return strings.Contains(string(r.c.Output(sid, "term_1")), "through the daemon alone")
	})
	if s := procState(pid); s != "T" {
		t.Errorf("the relay is in state %q while it was to be stopped", s)
	}

	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r.c.Close()
	if code := r.exited(); code != 0 {
		t.Errorf("the relay exited %d at the end of its input, want 0", code)
	}
	d.waitLog("disconnected; its sessions are detached")
	r.c.Check()
}

// procState is the state letter of process pid (/proc/PID/stat), or "".
func procState(pid int) string {
	if f := statFields(pid); len(f) > 0 {
		return f[0]
	}
	return ""
}
