package peercred

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Both ends of a connection name this process's user: the accepting end
// reads the dialler's, the dialling end the listener's.
func TestPeerUID(t *testing.T) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dialled, err := net.DialUnix("unix", nil, l.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer dialled.Close()
	accepted, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	for name, c := range map[string]*net.UnixConn{"accepted": accepted, "dialled": dialled} {
		if cred, err := Peer(c); err != nil || cred.UID != os.Getuid() || cred.PID != os.Getpid() {
			t.Errorf("%s: Peer = %+v, %v; want uid %d, pid %d", name, cred, err, os.Getuid(), os.Getpid())
		}
	}
}

// A peer of another user is told apart: as root, a client run as nobody
// connects, and Peer names nobody. The client is this test binary
// (TestHelperDial), copied where nobody can run it.
func TestPeerUIDOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to connect as another user")
	}
	const nobody = 65534
	dir, err := os.MkdirTemp("", "peercred")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "client")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{os.Chmod(dir, 0o755), os.Chmod(bin, 0o755)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestHelperDial$")
	cmd.Env = append(os.Environ(), "PEERCRED_DIAL="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	l.SetDeadline(time.Now().Add(30 * time.Second))
	c, err := l.AcceptUnix()
	if err != nil {
		t.Fatalf("no client: %v (client said %q)", err, out.String())
	}
	defer c.Close()
	cred, err := Peer(c)
	if err != nil || cred.UID != nobody || cred.PID != cmd.Process.Pid {
		t.Errorf("Peer = %+v, %v; want uid %d (nobody), pid %d", cred, err, nobody, cmd.Process.Pid)
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// TestHelperDial is the client of TestPeerUIDOfAnotherUser: it connects
// and waits, at most 30 s, for the server to hang up.
func TestHelperDial(t *testing.T) {
	sock := os.Getenv("PEERCRED_DIAL")
	if sock == "" {
		t.Skip("the client of TestPeerUIDOfAnotherUser")
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b [1]byte
	c.Read(b[:]) // until the server closes
}
