package stack

import (
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// TestPortHolder: a port this test listens on is taken, held by this
// process, its command line the test binary's, not by the child that it
// shares the socket with; once closed it is free.
func TestPortHolder(t *testing.T) {
	t.Parallel()
	// Each port is testloop.FreePort's, outside the ephemeral range: a
	// port the system picked (":0") may be taken, once closed, as the
	// local end of any parallel test's outgoing connection, and would
	// not be free then.
	for _, host := range []string{"127.0.0.1", "0.0.0.0", "::1", "::"} {
		addr := net.JoinHostPort(host, strconv.Itoa(testloop.FreePort(t)))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if strings.Contains(host, ":") {
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
		// Free once every copy of the socket is gone: a child that a
		// parallel test forks holds one until its exec.
		for end := time.Now().Add(testloop.Wait); ; time.Sleep(10 * time.Millisecond) {
			free, pid, cmd, err := PortHolder(port)
			if err == nil && free && pid == 0 && cmd == "" {
				break
			}
			if time.Now().After(end) {
				t.Errorf("PortHolder(%d) once %s closed: free %v, %d %q, %v; want free", port, addr, free, pid, cmd, err)
				break
			}
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

// TestListenPorts: the ports a process holds a listening socket on, and
// a child that shares the socket, are found; a connected socket, a closed
// listener and a pid that is gone add none.
func TestListenPorts(t *testing.T) {
	if runtime.GOOS != "linux" {
		if ports, ok := ListenPorts([]int{os.Getpid()}); ports != nil || ok {
			t.Errorf("ListenPorts = %v, %v; want nil, false where /proc is not", ports, ok)
		}
		return
	}
	t.Parallel()
	var (
		want []int
		ls   []net.Listener
	)
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls = append(ls, l)
		want = append(want, l.Addr().(*net.TCPAddr).Port)
	}
	child := holdInChild(t, ls[1]).Process.Pid
	both := slices.Sorted(slices.Values(want))
	// A connection to the first: its two ends are sockets, but do not
	// listen, and the client's port is not listed.
	conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(want[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A port nothing listens on, outside the ephemeral range: one a
	// listen on ":0" gave and that was closed may be given again to
	// another test of this package, which listens on it.
	closed := testloop.FreePort(t)
	tests := []struct {
		name string
		pids []int
		want []int
	}{
		{"this process", []int{os.Getpid()}, both},
		{"the child sharing the second", []int{child}, want[1:]},
		{"both, each port once", []int{child, os.Getpid()}, both},
		{"gone", []int{1 << 30}, nil},
	}
	for _, tt := range tests {
		got, ok := ListenPorts(tt.pids)
		// Other tests of this package listen too: only this test's ports
		// (and the closed one, and the client's) are looked for.
		got = slices.DeleteFunc(got, func(p int) bool {
			return !slices.Contains(want, p) && p != closed && p != conn.LocalAddr().(*net.TCPAddr).Port
		})
		if !ok || !slices.Equal(got, tt.want) {
			t.Errorf("%s: ListenPorts = %v, %v; want %v, true", tt.name, got, ok, tt.want)
		}
	}
}

// TestPortHolderWhileProcessesStart: a free port is free while other
// goroutines of the process fork and exec, as a daemon starting other
// sessions' commands does. Before, a child forked while one of
// PortHolder's own probe listeners was open held a copy of it until its
// exec, so that the next probe (0.0.0.0 after 127.0.0.1) failed with
// EADDRINUSE and the port was "in use (by a process this user cannot
// see)": a stack's service failed at its first run (seen in CI).
//
// Not parallel: its forks would hold copies of other tests' listeners.
func TestPortHolderWhileProcessesStart(t *testing.T) {
	port := portSeenFree(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				exec.Command("true").Run() // Best effort: only the forks count.
			}
		}()
	}
	defer func() {
		close(stop)
		<-done
		<-done
	}()
	transient := 0 // tries that found the port taken by no process, and free again right after
	for i := range 300 {
		free, pid, cmd, err := PortHolder(port)
		if !free && err == nil && pid == 0 && transient == 0 {
			// Another process of the machine (a suite beside this one)
			// may hold the port for a moment: CI, beside other suites, saw
			// one such try. A fork of this process holding a probe's
			// listener, the fault, shows in try after try.
			time.Sleep(100 * time.Millisecond)
			if free, _, _, err = PortHolder(port); free && err == nil {
				transient++
				t.Logf("PortHolder(%d), try %d: taken by a process not found, free again 100 ms later", port, i+1)
				continue
			}
		}
		if !free || err != nil {
			t.Fatalf("PortHolder(%d), try %d, while processes start: taken by %d %q (%v); want free", port, i+1, pid, cmd, err)
		}
	}
}

// portSeenFree returns a port that FreePort gave and PortHolder, before
// any fork of the test, sees free: another process of the machine (a
// test suite beside this one) may hold a port FreePort found free a
// moment before, and TestPortHolderWhileProcessesStart once failed at its
// first try so ("taken by 0"), which says nothing of its forks.
func portSeenFree(t *testing.T) int {
	t.Helper()
	for range 10 {
		port := testloop.FreePort(t)
		if free, _, _, err := PortHolder(port); free && err == nil {
			return port
		}
	}
	t.Fatal("no port FreePort gives is free to PortHolder, in 10 tries")
	return 0
}
