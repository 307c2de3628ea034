package stack

import (
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestPortHolder: a port this test listens on is taken, held by this
// process, its command line the test binary's, not by the child that it
// shares the socket with; once closed it is free.
func TestPortHolder(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:0", "0.0.0.0:0", "[::1]:0", "[::]:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if strings.HasPrefix(addr, "[") {
				t.Logf("no IPv6 here: %v", err)
				continue
			}
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		child := holdInChild(t, l)
		free, pid, cmd, err := PortHolder(port)
		if err != nil || free {
			t.Errorf("PortHolder(%d) while %s listens: free %v, %v", port, addr, free, err)
		}
		if runtime.GOOS == "linux" {
			exe, _ := os.Executable()
			if pid != os.Getpid() || !strings.HasPrefix(cmd, os.Args[0]) {
				t.Errorf("PortHolder(%d) while %s listens: held by %d %q, want this test, %d %q…", port, addr, pid, cmd, os.Getpid(), exe)
			}
		}
		l.Close()
		child.Process.Kill()
		child.Wait()
		if free, pid, cmd, err := PortHolder(port); err != nil || !free || pid != 0 || cmd != "" {
			t.Errorf("PortHolder(%d) once %s closed: free %v, %d %q, %v; want free", port, addr, free, pid, cmd, err)
		}
	}
	for _, bad := range []int{0, -1, 65536} {
		if _, _, _, err := PortHolder(bad); err == nil {
			t.Errorf("PortHolder(%d): no error", bad)
		}
	}
}

// holdInChild starts a child that holds l's socket too, as a worker or a
// child forked and not yet exec'd does.
func holdInChild(t *testing.T, l net.Listener) *exec.Cmd {
	t.Helper()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the child has its copy
	child := exec.Command("sleep", "60")
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	return child
}
