package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"shellagent/protocol/acptest"
)

// On pipes the agent reads stdin and writes stdout through the runtime
// poller (lifecycle_linux.go): each through an open file of its own of the
// same pipe, non-blocking, while the open files it shares with its client
// (descriptors 0 and 1) stay as the client made them.
func TestStdioPipesGoThroughThePoller(t *testing.T) {
	a, _ := startAgentOwnStdout(t)
	a.c.WaitFor("initialize response", func(m *acptest.Msg) bool { return m.IsResponse() })
	pid := a.cmd.Process.Pid
	for _, tc := range []struct {
		fd   int
		mode int // O_RDONLY or O_WRONLY, as the agent's own open file has it
	}{
		{0, os.O_RDONLY},
		{1, os.O_WRONLY},
	} {
		pipe := fdLink(t, pid, tc.fd)
		if !strings.HasPrefix(pipe, "pipe:") {
			t.Fatalf("fd %d is %s, want a pipe", tc.fd, pipe)
		}
		if flags := fdFlags(t, pid, tc.fd); flags&syscallNonblock != 0 {
			t.Errorf("fd %d (shared with the client): flags %#o have O_NONBLOCK", tc.fd, flags)
		}
		var own []int
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			fd, _ := strconv.Atoi(e.Name())
			if fd > 2 && fdLink(t, pid, fd) == pipe {
				if f := fdFlags(t, pid, fd); f&syscallNonblock != 0 && f&3 == tc.mode {
					own = append(own, fd)
				}
			}
		}
		if len(own) != 1 {
			t.Errorf("fd %d (%s): the agent has %d non-blocking open files of it with mode %d, want 1", tc.fd, pipe, len(own), tc.mode)
		}
	}
}

const syscallNonblock = 0o4000 // O_NONBLOCK in fdinfo's octal flags

func fdLink(t *testing.T, pid, fd int) string {
	t.Helper()
	l, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", strconv.Itoa(fd)))
	if err != nil {
		return ""
	}
	return l
}

func fdFlags(t *testing.T, pid, fd int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	t.Fatalf("fdinfo of %d/%d has no flags", pid, fd)
	return 0
}
