package daemon

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// What the old image hands over, the new image takes back as it was: the
// listener (still bound to the same socket file, accepting), the lock,
// the requester's connection (which gets the answer) and the Host's
// files in order, every descriptor close-on-exec again; a process handle
// whose process was reaped since the freeze is reported as ended, one
// whose process lives is not. The exec itself is left out: the test
// plays both images in one process.
func TestHandOverAndResume(t *testing.T) {
	dir, err := os.MkdirTemp("", "up")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "d.sock")
	if err := PrepareDir(socket); err != nil {
		t.Fatal(err)
	}
	lock, ok, err := TryLock(socket)
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	defer lock.Close()
	sock, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()

	// The requester: one end of a connected pair is the daemon's.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	daemonEnd, err := fileConn(pair[0])
	if err != nil {
		t.Fatal(err)
	}
	defer daemonEnd.Close()
	requester, err := fileConn(pair[1])
	if err != nil {
		t.Fatal(err)
	}
	defer requester.Close()

	// Two process handles: one of a process that lives on, one of a
	// process reaped after the freeze.
	live, reaped := exec.Command("sleep", "30"), exec.Command("true")
	var handles []*os.File
	for _, cmd := range []*exec.Cmd{live, reaped} {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
		if err != nil {
			t.Skipf("pidfd_open: %v", err)
		}
		f := os.NewFile(uintptr(fd), "pidfd")
		defer f.Close()
		handles = append(handles, f)
	}
	defer func() { live.Process.Kill(); live.Wait() }()

	s := &Server{Socket: socket, Build: "old", Upgrade: &Upgrade{Lock: lock}, l: sock}
	mfd, fds, err := s.handOver(daemonEnd, []byte("the host's state"), handles)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 + len(handles) + 1; len(fds) != want {
		t.Errorf("handed over %d descriptors, want %d", len(fds), want)
	}
	reaped.Wait()
	// The old image's claim goes with its exec.
	closeClaim(sock.claim)

	r, err := Resume(mfd)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Lock.Close()
	if r.From != "old" || string(r.State) != "the host's state" || len(r.Files) != len(handles) {
		t.Errorf("resumed from %q, state %q, %d files", r.From, r.State, len(r.Files))
	}
	if !slices.Equal(r.Ended, []int{1}) {
		t.Errorf("ended handles %v, want [1]: the reaped process's only", r.Ended)
	}
	for _, f := range r.Files {
		defer f.Close()
	}
	for _, fd := range fds[:len(fds)-1] {
		// The memfd is closed; the others are close-on-exec, or were
		// replaced by the listener's and the requester's own.
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d is not close-on-exec after Resume", fd)
		}
	}
	got, ok := r.Listener.(*Socket)
	if !ok || got.id != sock.id {
		t.Fatalf("the listener resumed is %T, bound to %v; want a Socket bound to %v", r.Listener, got, sock.id)
	}
	defer got.Close()
	dialled := make(chan error, 1)
	go func() {
		nc, err := net.Dial("unix", socket)
		if err == nil {
			nc.Close()
		}
		dialled <- err
	}()
	nc, err := got.AcceptUnix()
	if err != nil {
		t.Fatalf("accept on the listener resumed: %v", err)
	}
	nc.Close()
	if err := <-dialled; err != nil {
		t.Fatal(err)
	}

	r.Answer("new", nil)
	var up Upgraded
	if err := readLine(bufio.NewReader(requester), &up); err != nil || up.Build != "new" || up.Error != "" || up.Pid != os.Getpid() {
		t.Errorf("the requester got %+v, %v", up, err)
	}
}

// Nothing of a probe outlives it, whatever the outcome: one that hangs in
// a child past its time, with children in its own process group, in
// another one of its session (as a shell with job control puts its jobs)
// and in a session of their own; one that answers, or fails, and leaves children
// running in its session (a child in a session of its own is lost to
// any look once its parent has exited). Each child is a sleep of its own
// length, which names it.
func TestProbeLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	children := func(n int) string {
		return fmt.Sprintf("sleep %d1 &\nperl -e 'setpgrp(0, 0); exec @ARGV' sleep %d2 &\n", n, n)
	}
	for _, tt := range []struct {
		name, body, why string
		n               int
		wait            time.Duration
	}{
		{"hangs", children(47) + "setsid sleep 473 &\nsleep 47", "in time", 47, 300 * time.Millisecond},
		{"answers", children(48) + `echo '{"build":"v2","accepts":[` + strconv.Itoa(StateVersion) + `]}'`, "", 48, ProbeTimeout},
		{"fails", children(49) + "exit 3", "exit status 3", 49, ProbeTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exe := filepath.Join(dir, tt.name)
			if err := os.WriteFile(exe, []byte("#!/bin/sh\n"+tt.body+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), tt.wait)
			defer cancel()
			_, err := runProbe(ctx, slog.New(slog.DiscardHandler), exe, nil)
			if tt.why == "" && err != nil || tt.why != "" && (err == nil || !strings.Contains(err.Error(), tt.why)) {
				t.Errorf("probe: %v; want %q", err, tt.why)
			}
			var left []string
			for i := 1; i <= 3; i++ {
				arg := fmt.Sprintf("%d%d", tt.n, i)
				for _, pid := range liveWithArgs("sleep", arg) {
					left = append(left, "sleep "+arg)
					unix.Kill(pid, unix.SIGKILL) // Best effort: cleanup.
				}
			}
			if len(left) > 0 {
				t.Errorf("the probe left %v running", left)
			}
		})
	}
}

// liveWithArgs lists the live (not zombie) processes whose arguments are
// args.
func liveWithArgs(args ...string) []int {
	want := strings.Join(args, "\x00") + "\x00"
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || string(b) != want {
			continue
		}
		if p, ok := readStat(pid); ok && p.live {
			pids = append(pids, pid)
		}
	}
	return pids
}
