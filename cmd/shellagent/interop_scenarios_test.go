package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	kit "shellagent/scenario"
)

// TestOfficialClientScenarios plays every /scenario through the official
// ACP TypeScript SDK's v2 client (testdata/interop/scenarios.mjs), one
// session each, all at once in one agent, and checks that the SDK's own
// session state agrees with each scenario's rule: its background list
// counts an unknown item and becomes unknown after an omitted or
// malformed list, its cancel capabilities follow every patch, its
// isForBackgroundWork tells the listed work's permission request from the
// foreground one's, and so on (see the verify function of each). The
// agent runs with --client-checks: the SDK, a conforming client, gets no
// notice. It needs node and npm; without them it skips unless
// SHELLAGENT_INTEROP=1.
func TestOfficialClientScenarios(t *testing.T) {
	t.Parallel()
	dir := interop(t)
	args := []string{filepath.Join(dir, "scenarios.mjs"), binary, t.TempDir()}
	for _, sc := range kit.All {
		args = append(args, sc.Name)
	}
	cmd := exec.Command("node", args...)
	cmd.Env = append(os.Environ(), noRaceExitDelay)
	cmd.Stderr = testWriter{t}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scenarios client: %v\n%s", err, out)
	}
	var summary struct {
		OK      bool
		Results []struct {
			Name    string
			Updates int
		}
	}
	if err := json.Unmarshal(out, &summary); err != nil || !summary.OK || len(summary.Results) != len(kit.All) {
		t.Fatalf("scenarios summary %q: %v", out, err)
	}
	for _, r := range summary.Results {
		if r.Updates == 0 {
			t.Errorf("%s: the SDK saw no update", r.Name)
		}
	}
}
