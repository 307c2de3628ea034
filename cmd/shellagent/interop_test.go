package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestOfficialClient drives the agent with the official ACP TypeScript
// SDK's v2 client (testdata/interop/interop.mjs), which checks the session
// helpers' view of every step: background list, cancel capabilities,
// permission requests for listed work.
func TestOfficialClient(t *testing.T) {
	dir, err := filepath.Abs("../../testdata/interop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		// .ci/run installs it; a fresh checkout gets it here.
		if out, err := exec.Command("npm", "ci", "--prefix", dir, "--no-audit", "--no-fund").CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
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
