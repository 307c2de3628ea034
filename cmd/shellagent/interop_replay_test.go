package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOfficialClientReplay plays each v2 golden transcript with shellagent
// replay to the official ACP TypeScript SDK's v2 client
// (testdata/interop/replay.mjs), which sends the transcript's client lines
// through its own request, notification and permission handling, under
// its own ids: zero departures, exit status 0, every agent line delivered
// by the SDK. malformed.jsonl is left out: the SDK cannot send lines that
// are not JSON-RPC messages, and it holds every request until initialize
// has succeeded; so is the transcript of the scenario that sends a
// message the schema forbids (scenario-malformed-background.jsonl). It
// needs node and npm; without them it skips unless SHELLAGENT_INTEROP=1.
func TestOfficialClientReplay(t *testing.T) {
	t.Parallel()
	dir := interop(t)
	var files []string
	for _, f := range goldenTranscripts(t) {
		if filepath.Base(filepath.Dir(f)) != "v1" && filepath.Base(f) != "malformed.jsonl" && !invalidTranscript(f) {
			files = append(files, f)
		}
	}
	cmd := exec.Command("node", append([]string{filepath.Join(dir, "replay.mjs"), binary, t.TempDir()}, files...)...)
	cmd.Env = append(os.Environ(), noRaceExitDelay)
	cmd.Stderr = testWriter{t}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("replay client: %v\n%s", err, out)
	}
	var summary struct {
		OK      bool
		Results []struct {
			File               string
			Status             any
			Stderr             string
			Received, Expected int
		}
		Problems []string
	}
	if err := json.Unmarshal(out, &summary); err != nil || !summary.OK || len(summary.Results) != len(files) {
		t.Fatalf("replay summary %q: %v", out, err)
	}
	for _, r := range summary.Results {
		if r.Status != 0.0 || r.Stderr != "" || r.Received != r.Expected || r.Expected == 0 {
			t.Errorf("%s: exit status %v, %d of %d agent lines delivered, stderr:\n%s", r.File, r.Status, r.Received, r.Expected, r.Stderr)
		}
	}
	if len(summary.Problems) > 0 {
		t.Errorf("the SDK complained:\n%s", strings.Join(summary.Problems, "\n"))
	}
}
