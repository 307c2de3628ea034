package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The probe of the new binary: it is run with the daemon's flags and
// must answer a Probe that reads this StateVersion, in time; every other
// outcome is refused with an error that names the binary and why.
func TestProbe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := script("good", `[ "$*" = "daemon --upgrade-probe --shell /bin/sh" ] || { echo "unexpected: $*" >&2; exit 2; }
echo '{"build":"v2 (abc)","accepts":[1,2]}'`, 0o755)
	// Each probe has the daemon's own ProbeTimeout (a probe that ends by
	// itself, at once here, took over a second at load 20), but the slow
	// one, whose sleep outlasts its 300 ms.
	for _, tt := range []struct {
		name, exe, why string
		wait           time.Duration
	}{
		{"good", good, "", ProbeTimeout},
		{"slow", script("slow", "exec sleep 5", 0o755), "in time", 300 * time.Millisecond},
		{"exits", script("exits", "exit 0", 0o755), "exited without answering its probe", ProbeTimeout},
		{"fails", script("fails", "echo 'unknown flag --shell' >&2; exit 2", 0o755), "failed its probe (daemon --upgrade-probe): exit status 2: unknown flag --shell", ProbeTimeout},
		{"other state", script("other", `echo '{"build":"v3","accepts":[99]}'`, 0o755), fmt.Sprintf("reads state versions [99], not this daemon's %d", StateVersion), ProbeTimeout},
		{"not executable", script("noexec", "exit 0", 0o644), "cannot be executed", ProbeTimeout},
		{"missing", filepath.Join(dir, "missing"), "cannot be executed", ProbeTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.wait)
			defer cancel()
			p, err := runProbe(ctx, slog.New(slog.DiscardHandler), tt.exe, []string{"--shell", "/bin/sh"})
			switch {
			case tt.why == "" && (err != nil || p.Build != "v2 (abc)"):
				t.Errorf("probe: %+v, %v; want build v2 (abc)", p, err)
			case tt.why != "" && (err == nil || !strings.Contains(err.Error(), tt.why) || !strings.Contains(err.Error(), tt.exe)):
				t.Errorf("probe: %v; want an error naming %s and %q", err, tt.exe, tt.why)
			}
		})
	}
}
