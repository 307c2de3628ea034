package stack

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"shellagent/internal/waitfor"
)

// FuzzParse reads arbitrary bytes as a shellagent.toml and as a Procfile.
// The daemon reads the stack file of whatever project /up is run in, so
// no file may panic it, and the package's promises hold for every file
// it accepts: each service as Service documents it, the file's order,
// and Up and Down placing every dependency before its dependents. A
// refused file is an *Error at the file, at a line it has.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		chain,
		"web: npm run dev\nworker: ./worker --queue default\n# a comment\n\n",
		"[services.a]\ncommand = \"x\"\ndepends_on = [\"b\"]\n[services.b]\ncommand = \"y\"\ndepends_on = [\"a\"]\n",
		"[services.a]\ncommand = \"x\"\nenv = { B = 1, A = true, C = 1.5 }\nports = [1, 65535, 1]\n",
		"[services.a]\ncommand = \"x\"\nready_timeout = 9.2e9\nbackoff = \"1h\"\nmax_restarts = 0\nrestart = \"always\"\n",
		"[services]\na = { command = \"x\", cwd = \"/abs\" }\n",
		"[services.a]\ncommand = \"\\u0000\"\n",
		"a:\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range []string{TOMLFile, Procfile} {
			path := filepath.Join("/project", name)
			st, err := parse(path, "/project", data)
			if err != nil {
				checkRefusal(t, name, path, data, err)
				continue
			}
			checkStack(t, name, data, st)
		}
	})
}

// checkRefusal checks that err is an *Error at path, at a line of data.
func checkRefusal(t *testing.T, name, path string, data []byte, err error) {
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %v is a %T, not an *Error", name, err, err)
	}
	if e.File != path || e.Line < 0 || e.Line > lineCount(data) || e.Reason == "" {
		t.Fatalf("%s: refused with %#v: the file is %s, of %d lines", name, e, path, lineCount(data))
	}
}

// checkStack checks an accepted stack against the promises of Stack,
// Service, Up and Down.
func checkStack(t *testing.T, name string, data []byte, st *Stack) {
	if len(st.Services) == 0 {
		t.Fatalf("%s: accepted with no services", name)
	}
	seen := map[string]bool{}
	last := 0
	for _, s := range st.Services {
		switch {
		case !validName(s.Name) || seen[s.Name]:
			t.Fatalf("%s: service name %q invalid or repeated", name, s.Name)
		case strings.TrimSpace(s.Command) == "" || strings.Contains(s.Command, "\x00"):
			t.Fatalf("%s: service %s: command %q", name, s.Name, s.Command)
		case !filepath.IsAbs(s.Dir) || strings.Contains(s.Dir, "\x00"):
			t.Fatalf("%s: service %s: dir %q", name, s.Name, s.Dir)
		case s.ReadyTimeout <= 0 || s.MaxRestarts < 0 || s.Backoff < 0:
			t.Fatalf("%s: service %s: ready_timeout %v, max_restarts %d, backoff %v", name, s.Name, s.ReadyTimeout, s.MaxRestarts, s.Backoff)
		case s.Restart != RestartNo && s.Restart != RestartOnFailure && s.Restart != RestartAlways:
			t.Fatalf("%s: service %s: restart %q", name, s.Name, s.Restart)
		case s.Line < 1 || s.Line > lineCount(data) || s.Line < last:
			t.Fatalf("%s: service %s at line %d, after line %d, in %d lines", name, s.Name, s.Line, last, lineCount(data))
		case s.Env != nil && !slices.IsSortedFunc(s.Env, func(a, b EnvVar) int { return strings.Compare(a.Key, b.Key) }):
			t.Fatalf("%s: service %s: env not sorted: %v", name, s.Name, s.Env)
		}
		for _, e := range s.Env {
			if e.Key == "" || strings.ContainsAny(e.Key, "=\x00") || strings.Contains(e.Value, "\x00") {
				t.Fatalf("%s: service %s: env %q=%q", name, s.Name, e.Key, e.Value)
			}
		}
		if _, err := waitfor.ParseReady(s.Ready); s.Ready != "" && err != nil {
			t.Fatalf("%s: service %s: ready %q: %v", name, s.Name, s.Ready, err)
		}
		for _, p := range s.Ports {
			if p < 1 || p > 65535 {
				t.Fatalf("%s: service %s: port %d", name, s.Name, p)
			}
		}
		if slices.Contains(s.DependsOn, s.Name) || len(slices.Compact(slices.Sorted(slices.Values(s.DependsOn)))) != len(s.DependsOn) {
			t.Fatalf("%s: service %s depends on %v", name, s.Name, s.DependsOn)
		}
		seen[s.Name] = true
		last = s.Line
	}
	up, err := st.Up()
	if err != nil {
		t.Fatalf("%s: Up: %v", name, err)
	}
	down, err := st.Down()
	if err != nil {
		t.Fatalf("%s: Down: %v", name, err)
	}
	reversed := slices.Clone(up)
	slices.Reverse(reversed)
	if len(up) != len(st.Services) || !slices.Equal(down, reversed) {
		t.Fatalf("%s: Up %v, Down %v, of %d services", name, up, down, len(st.Services))
	}
	placed := map[string]bool{}
	for _, n := range up {
		s := st.Service(n)
		if s == nil || placed[n] {
			t.Fatalf("%s: Up %v: %q unknown or repeated", name, up, n)
		}
		for _, d := range s.DependsOn {
			if !placed[d] {
				t.Fatalf("%s: Up %v starts %s before %s, which it depends on", name, up, n, d)
			}
		}
		placed[n] = true
	}
}

// lineCount is the number of lines of data, a last line without its
// newline included.
func lineCount(data []byte) int { return bytes.Count(data, []byte("\n")) + 1 }
