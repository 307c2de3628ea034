package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A run of failed accepts is logged once at its start, then at most once
// each acceptLogEvery with the failures since, and once when an accept
// works again, with the run's count. Before, each failure was a line:
// ten a second while the daemon was out of descriptors.
func TestAcceptLogOfARunOfFailures(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		failures int // one each 100 ms, as accept retries
		want     []string
	}{
		{"one", 1, []string{"level=WARN", "failures=1", "level=INFO", "failed_accepts=1"}},
		{"two seconds", 20, []string{"level=WARN", "failures=1", "level=INFO", "failed_accepts=20"}},
		{"25 seconds", 250, []string{
			"level=WARN", "failures=1", // at 0 s
			"level=WARN", "failures=100", // at 10 s
			"level=WARN", "failures=100", // at 20 s
			"level=INFO", "failed_accepts=250"}},
	} {
		var buf bytes.Buffer
		a := acceptLog{log: slog.New(slog.NewTextHandler(&buf, nil))}
		start := time.Now()
		for i := range tt.failures {
			a.failure(start.Add(time.Duration(i)*100*time.Millisecond), errors.New("accept unix: too many open files"))
		}
		a.success()
		a.success() // nothing failed since: nothing to say
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			for _, f := range strings.Fields(line) {
				if strings.HasPrefix(f, "level=") || strings.HasPrefix(f, "failures=") || strings.HasPrefix(f, "failed_accepts=") {
					got = append(got, f)
				}
			}
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s: logged %q, want %q:\n%s", tt.name, got, tt.want, buf.String())
		}
	}
}
