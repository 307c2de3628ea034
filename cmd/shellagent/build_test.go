package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"shellagent/internal/testloop"
)

// The build ID as a Mach-O binary holds it at the start of its text
// segment, read by findBuildID as cmd/go's buildid reads it.
func TestFindBuildID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"\x00\x00\xff Go build ID: \"act/content/x/y\"\n \xff\x00", "act/content/x/y"},
		{"\xff Go build ID: \"unterminated", ""},
		{"no id here", ""},
	}
	for _, tt := range tests {
		if got := string(findBuildID([]byte(tt.in))); got != tt.want {
			t.Errorf("findBuildID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A macOS binary's build ID is where findBuildID looks: in its first
// 32 KiB, and the same as go tool buildid reads. (The ELF one of this
// machine's binaries is read from its note, by goBuildID.)
//
// Long: building the standard library for darwin takes minutes on a cold
// cache. TestFindBuildID checks findBuildID on a made-up binary.
func TestFindBuildIDInAMacOSBinary(t *testing.T) {
	testloop.Long(t, "builds the agent for darwin/arm64")
	exe := filepath.Join(t.TempDir(), "shellagent-darwin")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build for darwin: %v\n%s", err, out)
	}
	want, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(findBuildID(b[:min(len(b), 32<<10)])); got+"\n" != string(want) {
		t.Errorf("findBuildID = %q, want %q", got, want)
	}
}
