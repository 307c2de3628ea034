package ptyio

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPtmxError: an open of /dev/ptmx refused with ENOSPC says the system
// is out of PTYs, with the counts of kernel/pty (a directory of the test's
// own here): kernel/pty/max reached, or, with fewer in use, the max= of
// this /dev/pts; the count unknown when kernel/pty cannot be read. Any
// other error is told as it is. Each still wraps the errno. (A real
// exhaustion, in a devpts instance of its own: cmd/shellagent's
// TestOutOfPTYsSaysSo.)
func TestPtmxError(t *testing.T) {
	t.Parallel()
	limits := func(nr, limit, reserve string) string {
		dir := t.TempDir()
		for name, v := range map[string]string{"nr": nr, "max": limit, "reserve": reserve} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	system := limits("4095", "4096", "1024")
	container := limits("3071", "4096", "1024")
	instance := limits("12", "4096", "1024")
	for _, tc := range []struct {
		name   string
		err    error
		limits string
		want   []string
	}{
		{"system", unix.ENOSPC, system, []string{"the system is out of PTYs: 4095 in use (" + system + "/nr) of kernel/pty/max 4096", "kernel/pty/reserve", "raise " + system + "/max"}},
		{"container", unix.ENOSPC, container, []string{"the system is out of PTYs: 3071 in use (" + container + "/nr) of kernel/pty/max 4096 (1024 fewer in a container's /dev/pts"}},
		{"instance", unix.ENOSPC, instance, []string{"out of PTYs: this /dev/pts allows no more (its devpts max= mount option), with 12 in use on the system (" + instance + "/nr) of kernel/pty/max 4096"}},
		{"unreadable", unix.ENOSPC, filepath.Join(t.TempDir(), "none"), []string{"the system is out of PTYs (kernel/pty/max reached, or the max= mount option of /dev/pts; the count is unknown: open "}},
		{"another errno", unix.EACCES, system, []string{"open /dev/ptmx: permission denied"}},
	} {
		err := ptmxError(tc.err, tc.limits)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: %v does not wrap %v", tc.name, err, tc.err)
		}
		for _, want := range append(tc.want, "open /dev/ptmx: "+tc.err.Error()) {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q, want it to say %q", tc.name, err, want)
			}
		}
	}
	if err := ptmxError(unix.EACCES, system); strings.Contains(err.Error(), "PTYs") {
		t.Errorf("EACCES: %q, want no word of PTYs", err)
	}
}
