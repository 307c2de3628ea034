package main

import (
	"os"
	"slices"
	"testing"
	"time"
)

func TestSizeFlag(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"1MiB", 1 << 20, true},
		{"256KiB", 256 << 10, true},
		{"64K", 64 << 10, true},
		{"2MB", 2_000_000, true},
		{"65536", 65536, true},
		{"10B", 10, true},
		{"0", 0, false},
		{"-1MiB", 0, false},
		{"lots", 0, false},
		{"1.5MiB", 0, false},
		{"9007199254740992KiB", 0, false}, // overflows int
		{"9223372036854775808", 0, false},
	}
	for _, tt := range tests {
		var s sizeFlag
		err := s.Set(tt.in)
		if (err == nil) != tt.ok || tt.ok && int(s) != tt.want {
			t.Errorf("Set(%q) = %d, %v; want %d, ok %v", tt.in, s, err, tt.want, tt.ok)
		}
	}
}

func TestSizeFlagString(t *testing.T) {
	for n, want := range map[int]string{1 << 20: "1MiB", 256 << 10: "256KiB", 3 << 30: "3GiB", 65536: "64KiB", 1000: "1000", 1: "1"} {
		s := sizeFlag(n)
		if got := s.String(); got != want {
			t.Errorf("sizeFlag(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestDurationFlag: a duration flag stores what configopt.ParseDuration
// reads (whose rules its own test checks) and passes it whether 0 is
// allowed.
func TestDurationFlag(t *testing.T) {
	tests := []struct {
		in   string
		zero bool
		want time.Duration
		err  string
	}{
		{"1m30s", false, 90 * time.Second, ""},
		{"0", true, 0, ""},
		{"0", false, 0, "must be more than 0, e.g. 3s"},
	}
	for _, tt := range tests {
		d := time.Hour
		err := (&durationFlag{p: &d, zero: tt.zero}).Set(tt.in)
		if tt.err == "" && (err != nil || d != tt.want) || tt.err != "" && (err == nil || err.Error() != tt.err) {
			t.Errorf("Set(%q) = %v, %v; want %v, %q", tt.in, d, err, tt.want, tt.err)
		}
	}
}

func TestRewordFlagError(t *testing.T) {
	for in, want := range map[string]string{
		`invalid value "5" for flag -stall-timeout: parse error`:     "--stall-timeout 5: parse error",
		`invalid boolean value "x" for -sequential-ids: parse error`: "--sequential-ids x: want true or false",
		"flag provided but not defined: -nope":                       "unknown flag --nope",
		"flag needs an argument: -shell":                             "--shell needs a value",
	} {
		if got := rewordFlagError(in); got != want {
			t.Errorf("rewordFlagError(%q) = %q, want %q", in, got, want)
		}
	}
}

// A relative --cwd is taken from the current directory: the session's
// cwd must be absolute.
func TestClientCwdIsMadeAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	opts, code, done := clientCommandLine([]string{"--cwd", "."})
	if done || opts.cwd != wd {
		t.Errorf("--cwd .: cwd %q, exit %d (done %v); want %q", opts.cwd, code, done, wd)
	}
}

// Durations are written as the docs write them, and read back the same.
func TestFormatDuration(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"}, {500 * time.Millisecond, "500ms"}, {10 * time.Second, "10s"}, {90 * time.Second, "1m30s"},
		{10 * time.Minute, "10m"}, {24 * time.Hour, "24h"}, {25*time.Hour + 30*time.Second, "25h0m30s"}, {90 * time.Minute, "1h30m"},
	} {
		got := formatDuration(tt.d)
		back, err := time.ParseDuration(got)
		if got != tt.want || tt.d != 0 && (err != nil || back != tt.d) {
			t.Errorf("formatDuration(%v) = %q (reads back as %v, %v), want %q", tt.d, got, back, err, tt.want)
		}
	}
}

// --resume takes an optional ID, before or after the other flags; it and
// --socket need --daemon, and --socket is not for a relay command of the
// user's.
func TestClientDaemonFlags(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		resume bool
		id     string
		agent  []string
		fails  bool
	}{
		{args: []string{"--daemon", "--resume"}, resume: true},
		{args: []string{"--daemon", "--resume", "sess_1"}, resume: true, id: "sess_1"},
		{args: []string{"--resume", "sess_1", "--daemon", "--socket", "/s"}, resume: true, id: "sess_1"},
		{args: []string{"--daemon", "--resume=sess_1", "--", "ssh", "h"}, resume: true, id: "sess_1", agent: []string{"ssh", "h"}},
		{args: []string{"--daemon", "--resume", "--", "ssh", "h"}, resume: true, agent: []string{"ssh", "h"}},
		{args: []string{"--daemon"}},
		{args: []string{"--resume"}, fails: true},
		{args: []string{"--socket", "/s"}, fails: true},
		{args: []string{"--daemon", "--socket", "/s", "--", "ssh", "h"}, fails: true},
		{args: []string{"--daemon", "--resume", "sess_1", "extra"}, fails: true},
	} {
		opts, code, done := clientCommandLine(tt.args)
		switch {
		case tt.fails != (done && code != 0):
			t.Errorf("%q: exit %d (done %v); want it to fail: %v", tt.args, code, done, tt.fails)
		case tt.fails:
		case opts.resume.set != tt.resume || opts.resume.id != tt.id || !slices.Equal(opts.agent, tt.agent):
			t.Errorf("%q: resume %+v, agent %q; want resume %v, id %q, agent %q", tt.args, opts.resume, opts.agent, tt.resume, tt.id, tt.agent)
		}
	}
}
