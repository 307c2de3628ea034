package main

import "testing"

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

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"--cols", "0"},
		{"--rows", "70000"},
		{"--kill-grace", "0s"},
		{"--foreground-timeout", "-1s"},
		{"--scrollback", "nope"},
		{"--scrollback", "9999999999999999MiB"},
		{"--stall-timeout", "0s"},
		{"--no-such-flag"},
	} {
		if code := run(args); code != 2 {
			t.Errorf("run(%v) = %d, want 2", args, code)
		}
	}
}
