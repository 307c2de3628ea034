package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// interopPackages are what testdata/interop/package.json pins, as found in
// its node_modules: the SDK, acpx and, on linux-x64, Node 22 for acpx.
var interopPackages = []string{
	"@agentclientprotocol/sdk/package.json",
	"acpx/dist/cli.js",
}

// installSDK installs the pinned packages into dir/node_modules with npm
// ci, unless they are there: first from npm's cache alone, then from the
// registry with no retries and a short timeout, so that an unreachable
// registry fails in seconds.
func installSDK(t *testing.T, dir string) error {
	t.Helper()
	npmMu.Lock() // one check and npm ci at a time: the interop tests share the directory
	defer npmMu.Unlock()
	installed := true
	for _, p := range interopPackages {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			installed = false
		}
	}
	if installed {
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

// npmMu serializes npm ci.
var npmMu sync.Mutex

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
	dir := interop(t)
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
