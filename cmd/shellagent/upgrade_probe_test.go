//go:build linux

package main

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// probeStack is a stack whose service waits for an exec: ready probe
// each of whose tries leaves a process of a session of its own (setsid)
// behind it and waits for the gate file (cut short after 5 s), exiting 0
// once it exists: every process the tries start carries the marker,
// PROBEMARK=TOKEN.
func probeStack(token string) string {
	return `
[services.web]
command = "exec sleep 300"
ready = "exec:export PROBEMARK=` + token + `; setsid sleep 1000 </dev/null >/dev/null 2>&1 & until test -e gate; do sleep 0.1; done"
ready_timeout = "60s"
`
}

// probeSurvivors waits (at most a few seconds) for the processes that
// an exec: probe's tries started, those that carry marker, to be gone,
// and returns those that are not; it kills them, so that the test leaves
// nothing running either way.
func probeSurvivors(marker string) []int {
	deadline := time.Now().Add(testloop.Bound(time.Second))
	for {
		left := acptest.ProcessesWith(marker)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL) // Best effort: the test fails anyway.
			}
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// upProbing starts the stack of probeStack in a daemon of plainBinary,
// with shellagent up waiting for it, and waits until a try of its ready
// probe is in flight (its processes run).
func upProbing(t *testing.T) (d *daemonFixture, sock []string, up *started, marker string) {
	token := rand.Text()
	marker = "PROBEMARK=" + token
	d, sock = newStackFixture(t, probeStack(token))
	d.startOwnDaemon(plainBinary)
	up = d.startBin(plainBinary, d.cwd, append([]string{"up"}, sock...)...)
	waitFor(t, "a try of web's ready probe to run", func() bool { return len(acptest.ProcessesWith(marker)) >= 2 })
	return d, sock, up, marker
}

// readyAfter opens the probe's gate and waits for up to say that web is
// ready, then checks that nothing any try of the probe started runs on.
func readyAfter(t *testing.T, d *daemonFixture, up *started, marker, what string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(d.cwd, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-up.done:
		if code := exitCode(err); code != 0 || !strings.Contains(up.out.String(), "Ready: web.") {
			t.Errorf("up across %s: exit %d, stdout %q, stderr %q; want 0, web ready", what, code, up.out.String(), up.errOut.String())
		}
	case <-time.After(testloop.Bound(20 * time.Second)):
		up.cmd.Process.Kill()
		t.Errorf("up did not return after the probe's gate opened, across %s: stdout %q, stderr %q", what, up.out.String(), up.errOut.String())
	}
	if left := probeSurvivors(marker); len(left) > 0 {
		t.Errorf("after %s and web ready, processes %v that a try of its exec: probe started still ran (killed now)", what, left)
	}
}

// A service's exec: ready probe in flight at the daemon's upgrade in
// place: the try is ended and its containment group emptied before the
// exec, so that nothing it started (a slow command, a process of a
// session of its own) runs on in the new image; the new image tries
// again, and the service becomes ready once its condition holds, with
// shellagent up, connected again, saying so.
// Before, the try's processes ran on in the new image (its group was not
// handed over, and what would have killed it ended with the old image).
func TestDaemonUpgradeEndsAnExecProbeInFlight(t *testing.T) {
	t.Parallel()
	d, sock, up, marker := upProbing(t)
	d.upgrade(otherBinary)
	readyAfter(t, d, up, marker, "the upgrade")
	if _, _, code := d.runBin(otherBinary, d.cwd, append([]string{"down"}, sock...)...); code != 0 {
		t.Errorf("down: exit %d", code)
	}
}

// An upgrade that fails after the freeze (the new binary passes its
// probe, then is gone when the daemon execs it) thaws the old image: the
// exec: ready probe whose try the freeze ended tries again, and the
// service becomes ready once its condition holds; nothing a try started
// runs on.
func TestDaemonUpgradeFailedResumesAnExecProbe(t *testing.T) {
	t.Parallel()
	d, sock, up, marker := upProbing(t)
	gone := filepath.Join(t.TempDir(), "gone")
	script := "#!/bin/sh\ncase \"$2\" in --upgrade-probe) rm -f \"$0\"; exec " + plainBinary + " \"$@\";; esac\nexit 7\n"
	if err := os.WriteFile(gone, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := d.run(plainBinary, "daemon", "upgrade", "--socket", d.socket, "--to", gone); code != 1 || !strings.Contains(stderr, "exec") {
		t.Fatalf("upgrade to a binary gone after its probe: exit %d, %q; want 1, the exec failed", code, stderr)
	}
	readyAfter(t, d, up, marker, "the failed upgrade")
	if _, _, code := d.runBin(plainBinary, d.cwd, append([]string{"down"}, sock...)...); code != 0 {
		t.Errorf("down: exit %d", code)
	}
}
