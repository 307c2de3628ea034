package ptyio

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The argument vectors of a command line: a line of LongLine bytes or
// more goes to a shell of the Bourne family in a script, quoted byte for
// byte; any other is in the arguments, as a line to any other shell is.
func TestShellArgv(t *testing.T) {
	long := strings.Repeat("x", LongLine-len("it's\n\n")) + "it's\n\n"
	short := long[1:]
	for _, tt := range []struct {
		name        string
		argv        func(Command) ([]string, string)
		shell, line string
		want        []string
		script      string
	}{
		{"short", shellArgv, "/bin/bash", short, []string{"/bin/bash", "-c", hupTrap + short}, ""},
		{"long", shellArgv, "/bin/bash", long, []string{"/bin/bash", "-c", hupTrap + readLine}, "set -- '" + long[:LongLine-6] + `it'\''s` + "\n\n'"},
		{"long, sh", shellArgv, "/usr/local/bin/sh", long, []string{"/usr/local/bin/sh", "-c", hupTrap + readLine}, "set -- '" + long[:LongLine-6] + `it'\''s` + "\n\n'"},
		{"long, other shell", shellArgv, "/usr/bin/fish", long, []string{"/bin/sh", "-c", hupWrapper, "/usr/bin/fish", long}, ""},
		{"probe, short", probeArgv, "/bin/sh", short, []string{"/bin/sh", "-c", short}, ""},
		{"probe, long", probeArgv, "/bin/sh", long, []string{"/bin/sh", "-c", readLine}, "set -- '" + long[:LongLine-6] + `it'\''s` + "\n\n'"},
		{"probe, long, other shell", probeArgv, "/usr/bin/fish", long, []string{"/usr/bin/fish", "-c", long}, ""},
		{"only quotes", shellArgv, "/bin/dash", strings.Repeat("'", LongLine), []string{"/bin/dash", "-c", hupTrap + readLine}, "set -- '" + strings.Repeat(`'\''`, LongLine) + "'"},
	} {
		argv, script := tt.argv(Command{Shell: tt.shell, Line: tt.line})
		if !slices.Equal(argv, tt.want) {
			t.Errorf("%s: argv %.100q, want %.100q", tt.name, argv, tt.want)
		}
		if script != tt.script {
			t.Errorf("%s: script of %d bytes, want %d", tt.name, len(script), len(tt.script))
		}
	}
}

// longLine returns a command line of about n bytes that writes content
// to the file f with a heredoc, then runs line.
func longLine(content, line string) string {
	return "cat > f <<'EOF'\n" + content + "EOF\n" + line
}

// longContent is about n bytes of text with quotes, dollars, backslashes
// and newlines at its end.
func longContent(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString("it's \"$HOME\" `pwd` \\ $(true) '\\'' \\\n")
	}
	b.WriteString("\n\n")
	return b.String()
}

// A line longer than the kernel takes in one argument runs in each
// shell of the Bourne family as a shorter one does: its text arrives
// byte for byte, $0 and $# are the shell's and 0, the exit status is
// the line's, and neither the shell nor what it starts holds the
// descriptor it was read from. Before, the start failed: "fork/exec
// /bin/sh: argument list too long".
func TestLongLine(t *testing.T) {
	content := longContent(300 << 10)
	line := longLine(content, `echo "0=$0 #=$#"
[ -e /proc/$$/fd/3 ] && echo shell-holds-3
readlink /proc/self/fd/3 2>/dev/null || echo child-has-no-3
exit 3`)
	for _, shell := range []string{"/bin/sh", "/bin/dash", "/bin/bash", "/bin/zsh", "/usr/bin/zsh"} {
		t.Run(shell, func(t *testing.T) {
			t.Parallel()
			if _, err := os.Stat(shell); err != nil {
				t.Skip(err)
			}
			_, rec := launchShell(t, shell, line)
			e := rec.wait(t)
			if e.Shell != (Status{Exited: true, Code: 3}) || e.Err != nil {
				t.Errorf("exit %+v, want code 3", e)
			}
			if out, want := rec.output(), "0="+shell+" #=0\r\nchild-has-no-3\r\n"; out != want {
				t.Errorf("output %q, want %q", out, want)
			}
			got, err := os.ReadFile(filepath.Join(rec.dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != content {
				t.Errorf("the heredoc wrote %d bytes, want its %d", len(got), len(content))
			}
		})
	}
}

// A probe's long line runs as a launch's does.
func TestProbeLongLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	content := longContent(300 << 10)
	cmd := Command{Shell: "/bin/sh", Line: longLine(content, `echo "$#"; exit 4`), Dir: dir, Env: append(os.Environ(), marker)}
	var exit *ProbeExit
	if err := launcher.Probe(context.Background(), cmd); !errors.As(err, &exit) || exit.Status.ExitStatus() != 4 || string(exit.Output) != "0\n" {
		t.Fatalf("probe: %v (printed %q), want exit status 4 after 0", err, exit)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(got) != content {
		t.Errorf("the heredoc wrote %d bytes (%v), want its %d", len(got), err, len(content))
	}
}
