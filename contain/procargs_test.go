package contain

import (
	"encoding/binary"
	"testing"
)

func procargs2(argc int32, s string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(argc))
	return append(b, s...)
}

// KERN_PROCARGS2's layout, as macOS gives it (see proc_darwin.go).
func TestParseProcargs2(t *testing.T) {
	tests := []struct {
		name      string
		in        []byte
		args, env string
		ok        bool
	}{
		{"a command", procargs2(3, "/bin/sleep\x00\x00\x00\x00sleep\x00300\x00x y\x00PATH=/bin\x00SHELLAGENT_INSTANCE=0-7-9\x00\x00executable_path=/bin/sleep\x00"),
			"sleep\x00300\x00x y\x00", "PATH=/bin\x00SHELLAGENT_INSTANCE=0-7-9\x00", true},
		{"no environment", procargs2(1, "/bin/true\x00true\x00\x00ptr_munge=\x00"), "true\x00", "", true},
		{"environment to the end", procargs2(1, "/x\x00x\x00A=1\x00B=2"), "x\x00", "A=1\x00B=2", true},
		{"fewer arguments than argc", procargs2(4, "/bin/sh\x00sh\x00-c\x00"), "", "", false},
		{"short", []byte{1, 0}, "", "", false},
		{"no path", procargs2(1, "abc"), "", "", false},
	}
	for _, tt := range tests {
		args, env, ok := parseProcargs2(tt.in)
		if ok != tt.ok || string(args) != tt.args || string(env) != tt.env {
			t.Errorf("%s: parseProcargs2 = %q, %q, %v; want %q, %q, %v", tt.name, args, env, ok, tt.args, tt.env, tt.ok)
		}
	}
	env := procargs2(1, "/x\x00x\x00PATH=/bin\x00SHELLAGENT_TERMINAL=4\x00\x00SHELLAGENT_INSTANCE=apple\x00")
	_, e, _ := parseProcargs2(env)
	if v, ok := lookupEnv(e, TerminalEnv); !ok || v != "4" {
		t.Errorf("lookupEnv(%s) = %q, %v", TerminalEnv, v, ok)
	}
	if _, ok := lookupEnv(e, InstanceEnv); ok {
		t.Errorf("%s found among the apple strings", InstanceEnv)
	}
}
