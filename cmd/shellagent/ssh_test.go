package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// sshServer is a real OpenSSH server on loopback, for the test that runs
// the agent as an editor on another machine would: ssh HOST shellagent
// --daemon. Its host key, the client's key and authorized_keys are made
// for the test; only that key can log in, as root.
type sshServer struct {
	port string
	key  string // the client's private key
}

// startSSHD starts sshd -D on a free loopback port, or skips the test
// with one line (fails it under SHELLAGENT_INTEROP=1, as .ci/run sets,
// which installs openssh-server) when OpenSSH is missing.
func startSSHD(t *testing.T) *sshServer {
	t.Helper()
	testloop.Long(t, "interop with a real sshd")
	for _, prog := range []string{"/usr/sbin/sshd", "ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(prog); err != nil {
			skipOrFail(t, prog+" is not installed (apt-get install openssh-server openssh-client)")
		}
	}
	if os.Geteuid() != 0 {
		skipOrFail(t, "sshd runs as root for this test")
	}
	dir := t.TempDir()
	hostKey, key := filepath.Join(dir, "host"), filepath.Join(dir, "client")
	for _, k := range []string{hostKey, key} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	// sshd wants its privilege separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(testloop.FreePort(t)) // sshd binds it next
	config := filepath.Join(dir, "sshd_config")
	conf := fmt.Sprintf(`Port %s
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
`, port, hostKey, authorized, filepath.Join(dir, "sshd.pid"))
	if err := os.WriteFile(config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	sshd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", config)
	sshd.Stderr = testWriter{t}
	if err := sshd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sshd.Process.Kill() // Best effort: the server of this test only.
		sshd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd does not listen on %s: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &sshServer{port: port, key: key}
}

// command returns ssh running remote (words joined by spaces, as ssh does)
// on the server, as the user root.
// The ssh client itself gets the test's environment, without the
// fixture's marker: it is the editor's, not the daemon's.
func (s *sshServer) command(remote ...string) *exec.Cmd {
	cmd := exec.Command("ssh", "-p", s.port, "-i", s.key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "root@127.0.0.1", strings.Join(remote, " "))
	cmd.Env = os.Environ()
	return cmd
}

// An editor on one machine drives dev servers on another through ssh HOST
// shellagent --daemon: the ssh client dies mid-stream (a dropped link, a
// laptop that sleeps), sshd hangs up the remote relay, and nothing stops;
// the next ssh HOST shellagent --daemon lists the session and resumes it,
// with the same terminal and its output continued.
//
// Long (interop with sshd): TestDaemonKeepsWorkWhenTheRelayEnds checks the
// same rule with the relay's process group hung up as sshd does.
func TestDaemonOverSSH(t *testing.T) {
	t.Parallel()
	server := startSSHD(t)
	d := newDaemonFixture(t)
	// sshd gives the remote command a login environment of its own: the
	// fixture's (the marker that finds its processes, the log's place)
	// goes on the command line.
	remote := []string{"env"}
	for _, kv := range d.env()[len(os.Environ()):] {
		remote = append(remote, shellWord(kv))
	}
	remote = append(remote, binary)
	for _, a := range d.relayArgs() {
		remote = append(remote, shellWord(a))
	}
	relay := func() *relayProc {
		r := d.startRelayCmd(server.command(remote...))
		r.c.MustCall("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "test", "version": "1"}}, nil)
		return r
	}

	a := relay()
	sid, seen := a.startCounter(d.cwd)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil { // the ssh client
		t.Fatal(err)
	}
	a.exited()
	time.Sleep(500 * time.Millisecond) // the gap: sshd hangs up the remote relay; the counter prints on

	b := relay()
	b.resumeCounter(sid, d.cwd, seen, "the first ssh")
	b.prompt(sid, "/stop term_1")
	if sig := b.exitSignal(sid, "term_1"); sig != "SIGTERM" {
		t.Errorf("/stop term_1: signal %v", sig)
	}
	b.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	d.waitGone(2*time.Second, "session/close", d.work)
	b.c.Check()
}

// shellWord quotes s for the remote shell that runs an ssh command.
func shellWord(s string) string { return strconv.Quote(s) }
