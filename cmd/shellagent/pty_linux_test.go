package main

import (
	"os/exec"
	"strings"
	"testing"

	"shellagent/protocol/acptest"
)

// TestOutOfPTYsSaysSo: when the system is out of PTYs, a command that
// cannot start says so, naming kernel/pty/max and the count in use
// (/proc/sys/kernel/pty/nr), not only "open /dev/ptmx: no space left on
// device". The agent runs in a user and mount namespace of its own whose
// /dev/pts is a devpts instance that allows one PTY (max=1): a real
// exhaustion that costs the machine nothing. That PTY is the agent's
// spare, then a background command's; the next command cannot have one.
func TestOutOfPTYsSaysSo(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err == nil {
		err = exec.Command(unshare, "-Urm", "true").Run()
	}
	if err != nil {
		t.Skipf("no user and mount namespace to exhaust PTYs in (unshare -Urm: %v)", err)
	}
	const script = `set -e
mount -t devpts -o newinstance,max=1,ptmxmode=0666 devpts "$1"
mount --bind "$1" /dev/pts
mount --bind /dev/pts/ptmx /dev/ptmx
shift
exec "$@"`
	args := []string{"-Urm", "sh", "-c", script, "sh", t.TempDir(), binary, "--shell", "/bin/sh", "--containment", testMode}
	marker := "SHELLAGENT_TEST=" + strings.ToLower(t.Name())
	c, _ := acptest.StartBinary(t, unshare, args, []string{marker, noRaceExitDelay, ownState(t)})
	a := &agent{t: t, c: c, marker: marker, cwd: t.TempDir()}
	c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
	sid := a.session()
	a.prompt(sid, "/bg sleep 60")
	c.WaitFor("the background command's terminal", func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.TerminalID() != ""
	})
	a.prompt(sid, "echo never")
	failed := c.WaitFor("a failed tool call", func(m *acptest.Msg) bool {
		return m.SessionID == sid && m.Status() == "failed"
	})
	text := failed.Text()
	for _, want := range []string{"Could not start", "no space left on device", "out of PTYs", "kernel/pty/max", "/proc/sys/kernel/pty/nr"} {
		if !strings.Contains(text, want) {
			t.Errorf("the failed tool call says %q, want it to say %q", text, want)
		}
	}
}
