package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// TestMain gives the hello timeout, which also bounds the read of a
// status answer, testloop.Bound for a loaded machine, and bounds an
// answer at 1 MiB, not 16: TestAnAnswerWithoutEndIsRefused reads past
// the bound within the timeout, and under load (two busy loops beside
// go test -race ./...) reading 16 MiB in the 4 KiB a read takes was seen
// to take more than 15 s.
func TestMain(m *testing.M) {
	helloTimeout = testloop.Bound(helloTimeout)
	maxAnswer = 1 << 20
	os.Exit(m.Run())
}

// A daemon's answer to status is read up to maxAnswer bytes: one that
// never ends its line is refused, not held in memory without bound
// (issue 22's hardening: every read of a peer is bounded).
func TestAnAnswerWithoutEndIsRefused(t *testing.T) {
	t.Parallel()
	socket, l := listenOwn(t)
	defer l.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		nc, err := l.AcceptUnix()
		if err != nil {
			return
		}
		defer nc.Close()
		if _, err := bufio.NewReader(nc).ReadBytes('\n'); err != nil {
			return
		}
		hello, _ := json.Marshal(Hello{Shellagent: RelayVersion, Build: "test", Pid: os.Getpid()})
		nc.Write(append(hello, '\n'))
		junk := bytes.Repeat([]byte("x"), 1<<20)
		for range 2 * maxAnswer >> 20 {
			if _, err := nc.Write(junk); err != nil {
				return // the client gave up, as it must
			}
		}
	}()
	_, err := AskStatus(socket, Hello{Shellagent: RelayVersion, Build: "test", Pid: os.Getpid()})
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("AskStatus of an answer that never ends: %v, want a refusal of its length", err)
	}
	<-served
}

// A daemon that takes the connection but never answers (one out of file
// descriptors leaves it queued on its listener, unaccepted; a hung one
// never reads it) is a *NoAnswerError: it says what was waited for, how
// long, why that may be and where to look, and names the daemon's pid.
// Before, the relay said only "hello: i/o timeout".
func TestDialOfADaemonThatDoesNotAccept(t *testing.T) {
	t.Parallel()
	socket, l := listenOwn(t)
	defer l.Close() // never accepts, as a daemon out of descriptors
	const within = 200 * time.Millisecond
	start := time.Now()
	_, err := dialWithin(socket, Hello{Shellagent: RelayVersion, Build: "test", Pid: os.Getpid(), Want: WantACP}, Stdio{}, within)
	if took := time.Since(start); took > testloop.Bound(within) {
		t.Errorf("Dial gave up after %v, want within %v", took, testloop.Bound(within))
	}
	e, ok := errors.AsType[*NoAnswerError](err)
	if !ok {
		t.Fatalf("Dial: %v (%T), want a *NoAnswerError", err, err)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) || e.Socket != socket || e.Waited != within {
		t.Errorf("Dial: %#v, want the deadline's error, socket %s, waited %v", e, socket, within)
	}
	if runtime.GOOS == "linux" && e.PID != os.Getpid() {
		t.Errorf("the daemon's pid is %d, want %d (the listener's)", e.PID, os.Getpid())
	}
	want := "the daemon at " + socket + " (pid " + strconv.Itoa(e.PID) + ") did not answer within 200ms (it may be out of file descriptors or hung: see its log)"
	if e.PID == 0 {
		want = strings.Replace(want, " (pid 0)", "", 1)
	}
	if err.Error() != want {
		t.Errorf("Dial: %q\nwant %q", err, want)
	}
	e.Log = "/state/daemon.log"
	if !strings.HasSuffix(err.Error(), "hung: see /state/daemon.log)") {
		t.Errorf("with its log: %q", err)
	}
}

// listenOwn listens on a socket in a directory of the test's own (mode
// 0700, as a daemon's), and returns its path and listener.
func listenOwn(t *testing.T) (string, *net.UnixListener) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "d.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	return socket, l
}
