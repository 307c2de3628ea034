package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// interopRequired reports whether SHELLAGENT_INTEROP=1 makes the interop
// test mandatory (.ci/run sets it): then a missing node or npm fails it
// instead of skipping it.
func interopRequired() bool { return os.Getenv("SHELLAGENT_INTEROP") == "1" }

// skipOrFail skips the interop test with one line, or fails it when it is
// mandatory.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if interopRequired() {
		t.Fatalf("interop test: %s (SHELLAGENT_INTEROP=1 makes it mandatory)", why)
	}
	t.Skipf("interop test skipped: %s; set SHELLAGENT_INTEROP=1 to require it", why)
}

// installSDK installs the pinned SDK into dir/node_modules with npm ci:
// first from npm's cache alone, then from the registry with no retries
// and a short timeout, so that an unreachable registry fails in seconds.
func installSDK(t *testing.T, dir string) error {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk")); err == nil {
		return nil
	}
	base := []string{"ci", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error"}
	attempts := [][]string{
		{"--offline"},
		{"--prefer-offline", "--fetch-retries=0", "--fetch-timeout=20000"},
	}
	var out []byte
	var err error
	for _, extra := range attempts {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		out, err = exec.CommandContext(ctx, "npm", append(base, extra...)...).CombinedOutput()
		cancel()
		if err == nil {
			return nil
		}
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return &npmError{err: err, line: first}
}

// npmError is a failed npm ci, with the first line npm printed.
type npmError struct {
	err  error
	line string
}

func (e *npmError) Error() string { return "npm ci: " + e.err.Error() + ": " + e.line }

// TestOfficialClient drives the agent with the official ACP TypeScript
// SDK's v2 client (testdata/interop/interop.mjs), which checks the session
// helpers' view of every step: background list, cancel capabilities,
// permission requests for listed work. It needs node and npm; without
// them it skips unless SHELLAGENT_INTEROP=1.
func TestOfficialClient(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, tool+" is not in PATH")
		}
	}
	dir, err := filepath.Abs("../../testdata/interop")
	if err != nil {
		t.Fatal(err)
	}
	if err := installSDK(t, dir); err != nil {
		skipOrFail(t, "cannot install the ACP TypeScript SDK: "+err.Error())
	}
	cmd := exec.Command("node", filepath.Join(dir, "interop.mjs"), binary, t.TempDir())
	cmd.Env = append(os.Environ(), noRaceExitDelay)
	cmd.Stderr = testWriter{t}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("interop client: %v\n%s", err, out)
	}
	var summary struct {
		OK        bool              `json:"ok"`
		Terminals map[string]string `json:"terminals"`
	}
	if err := json.Unmarshal(out, &summary); err != nil || !summary.OK {
		t.Fatalf("interop summary %q: %v", out, err)
	}
	if summary.Terminals["term_1"] != "interop\r\n" || summary.Terminals["term_4"] != "bg-allowed\r\n" {
		t.Errorf("terminals as the SDK client saw them: %q", summary.Terminals)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}
