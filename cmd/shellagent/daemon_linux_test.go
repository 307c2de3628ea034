package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/internal/testloop"
)

// asUser makes cmd run as uid and gid, able to read and search any
// directory (CAP_DAC_OVERRIDE), so that only the daemon's peer check
// stands between it and the socket.
func asUser(cmd *exec.Cmd, uid, gid uint32) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: uid, Gid: gid},
		AmbientCaps: []uintptr{unix.CAP_DAC_OVERRIDE},
	}
}

// A connection from another uid is closed before a byte is exchanged, and
// logged: a client of another user, and root connecting to a daemon of
// another user (root is not exempt).
func TestDaemonRefusesOtherUsers(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("connecting as another user needs root")
	}
	// The binaries, where another user can run them: the exec happens
	// before the capabilities take effect.
	bin, err := os.MkdirTemp("", "sa-bin")
	if err == nil {
		err = os.Chmod(bin, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	testExe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client, agent := filepath.Join(bin, "client"), filepath.Join(bin, "shellagent")
	copyFile(t, testExe, client)
	copyFile(t, binary, agent)
	connect := func(t *testing.T, socket string, as *[2]uint32) string {
		t.Helper()
		cmd := exec.Command(client)
		cmd.Env = append(os.Environ(), connectEnv+"="+socket)
		if as != nil {
			asUser(cmd, as[0], as[1])
		}
		out, err := cmd.Output()
		if code := exitCode(err); code != 0 || strings.TrimSpace(string(out)) != "closed" {
			t.Errorf("connecting as %v: exit %d, %q; want the connection closed at once", as, code, out)
		}
		return string(out)
	}

	t.Run("a client of another user", func(t *testing.T) {
		t.Parallel()
		d := newDaemonFixture(t)
		d.relay() // starts the daemon
		connect(t, d.socket, &[2]uint32{65534, 65534})
		d.waitLog(`msg="refused a connection from another user"`)
		d.waitLog(`uid=65534`)
	})
	t.Run("root, to a daemon of another user", func(t *testing.T) {
		t.Parallel()
		dir, err := os.MkdirTemp("", "sa")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		socket := filepath.Join(dir, "d.sock")
		var log syncBuffer
		cmd := exec.Command(agent, "daemon", "--socket", socket, "--shell", "/bin/sh", "--containment", "subreaper")
		cmd.Env = append(os.Environ(), noRaceExitDelay)
		cmd.Stderr = &log
		asUser(cmd, 65534, 65534)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			t.Logf("the other user's daemon:\n%s", log.String())
		}()
		waitFor(t, "the daemon to listen", func() bool { return strings.Contains(log.String(), "daemon serving") })
		connect(t, socket, nil)
		waitFor(t, "the refusal in the log", func() bool {
			return strings.Contains(log.String(), `msg="refused a connection from another user"`) && strings.Contains(log.String(), "uid=0")
		})
	})
}

// copyFile copies the executable src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err == nil {
		err = os.WriteFile(dst, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A daemon whose socket is removed binds it again: after `rm $S`, and
// after `rm -r` of its directory (a tmp cleaner), each with detached work
// running, daemon status started at once, then a relay started at once,
// reach the same daemon within a few seconds, and the relay resumes the
// session; daemon stop stops it, and no second daemon starts. Issue 22's repro: after `rm $S`
// with detached work running, a new relay failed after 5 s ("lock is
// held"), `daemon stop` said "no daemon is running" and exited 1, and
// the daemon and its work ran on; after `rm -r` of the directory a
// second daemon started and the first one's work was orphaned until
// killed by pid. Linux: the claim that keeps a second daemon from
// starting after `rm -r` is an abstract socket.
func TestDaemonRebindsARemovedSocket(t *testing.T) {
	t.Parallel()
	removals := []struct {
		name   string
		remove func(d *daemonFixture) error
	}{
		{"rm $S", func(d *daemonFixture) error { return os.Remove(d.socket) }},
		{"rm -r DIR", func(d *daemonFixture) error { return os.RemoveAll(d.dir) }},
	}
	for _, rm := range removals {
		t.Run(rm.name, func(t *testing.T) {
			t.Parallel()
			d := newDaemonFixture(t)
			a := d.relay()
			sid, seen := a.startCounter(d.cwd)
			a.c.Close()
			a.exited()
			first := d.daemons()
			if len(first) != 1 {
				t.Fatalf("%d daemons: %v", len(first), describe(first))
			}
			time.Sleep(500 * time.Millisecond) // the gap: the counter prints to no one
			if err := rm.remove(d); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("daemon pid %d,", first[0])
			if out, stderr, code := d.run(binary, "daemon", "status", "--socket", d.socket); code != 0 || !strings.Contains(out, want) {
				t.Errorf("daemon status, at once: exit %d, %q %q; want 0 and %q", code, out, stderr, want)
			}
			if err := rm.remove(d); err != nil { // again, for the relay
				t.Fatal(err)
			}

			start := time.Now()
			b := d.relay() // at once: before the daemon has bound again
			// The relay dials for rebindWait (2 s) while the daemon binds again.
			if took := time.Since(start); took > testloop.Bound(2*time.Second) {
				t.Errorf("the relay took %v to reach the daemon", took)
			}
			if ds := d.daemons(); !slices.Equal(ds, first) {
				t.Errorf("daemons %v, want only the first, %v", describe(ds), first)
			}
			b.resumeCounter(sid, d.cwd, seen, "the first relay")
			d.waitLog(`msg="the socket was removed; bound it again"`)

			if out, stderr, code := d.run(binary, "daemon", "status", "--socket", d.socket); code != 0 || !strings.Contains(out, want) {
				t.Errorf("daemon status: exit %d, %q %q; want 0 and %q", code, out, stderr, want)
			}
			b.c.Close()
			b.exited()
			want = fmt.Sprintf("daemon pid %d exited", first[0])
			if out, stderr, code := d.run(binary, "daemon", "stop", "--socket", d.socket); code != 0 || !strings.Contains(out, want) {
				t.Errorf("daemon stop: exit %d, %q %q; want 0 and %q", code, out, stderr, want)
			}
			d.noneLeft(5*time.Second, "daemon stop")
		})
	}
}
