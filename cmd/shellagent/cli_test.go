package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"shellagent/protocol/acptest"
)

// runBinary runs the binary with args and env added, and returns its
// stdout, stderr and exit code.
func runBinary(t *testing.T, stdin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), noRaceExitDelay), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--help", "-h", "-help"} {
		stdout, stderr, code := runBinary(t, "", nil, arg)
		if code != 0 || stderr != "" {
			t.Errorf("%s: exit %d, stderr %q; want 0 and nothing", arg, code, stderr)
		}
		words := strings.Join(strings.Fields(stdout), " ") // unwrapped
		for _, want := range []string{
			"Agent Client Protocol (ACP) v2 agent on stdio",
			"Usage: shellagent [flags]",
			"shellagent client [flags] [-- AGENT COMMAND...]",
			"Subcommands: client ",
			"shellagent replay FILE an agent that plays the transcript in FILE",
			"replay play a transcript as the agent",
			"--foreground-timeout DURATION move",
			"(default 10s)", "(default 3s)", "(default 1MiB)", "(default 120)", "(default 40)", "(default 1s)",
			"(default $SHELL, else /bin/sh)",
			"0 = never",
			"--version print the version",
		} {
			if !strings.Contains(words, want) {
				t.Errorf("%s does not say %q:\n%s", arg, want, stdout)
			}
		}
		// Every flag is documented with the name of its value.
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		opts := defaultAgentOptions()
		opts.define(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if !regexp.MustCompile(`(?m)^  --` + f.Name + `( [A-Z]+)?\n        \S`).MatchString(stdout) {
				t.Errorf("%s does not document --%s", arg, f.Name)
			}
		})
		for line := range strings.SplitSeq(stdout, "\n") {
			if len(line) > 80 {
				t.Errorf("%s: line over 80 columns: %q", arg, line)
			}
		}
	}
	stdout, stderr, code := runBinary(t, "", nil, "client", "--help")
	if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage: shellagent client [flags] [-- AGENT COMMAND...]") ||
		!strings.Contains(stdout, "--trace FILE") || !strings.Contains(stdout, "--permissions ask") {
		t.Errorf("client --help: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	stdout, stderr, code = runBinary(t, "", nil, "replay", "--help")
	if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage: shellagent replay FILE") ||
		!strings.Contains(stdout, "shellagent client --trace bug.jsonl -- ANY-AGENT") || !strings.Contains(stdout, "Exit status: 0 when the client followed") {
		t.Errorf("replay --help: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	// A one-letter flag is shown as it is written: logs -f, not --f.
	stdout, stderr, code = runBinary(t, "", nil, "logs", "--help")
	if code != 0 || stderr != "" || !strings.Contains(stdout, "\n  -f\n        after the last lines") || !strings.Contains(stdout, "\n  --socket PATH\n") {
		t.Errorf("logs --help: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
}

// "shellagent help" prints the help, as --help does, and "shellagent help
// COMMAND" the command's. Issue 23: "shellagent help" was an error.
func TestHelpCommand(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ help, same []string }{
		{[]string{"help"}, []string{"--help"}},
		{[]string{"help", "client"}, []string{"client", "--help"}},
		{[]string{"help", "replay"}, []string{"replay", "--help"}},
		{[]string{"help", "daemon"}, []string{"daemon", "--help"}},
		{[]string{"help", "daemon", "stop"}, []string{"daemon", "stop", "--help"}},
		{[]string{"help", "up"}, []string{"up", "--help"}},
		{[]string{"help", "logs"}, []string{"logs", "--help"}},
	} {
		stdout, stderr, code := runBinary(t, "", nil, tt.help...)
		want, _, _ := runBinary(t, "", nil, tt.same...)
		if code != 0 || stderr != "" || stdout != want || want == "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %.80q; want 0 and what %v prints", tt.help, code, stderr, stdout, tt.same)
		}
	}
	stdout, stderr, code := runBinary(t, "", nil, "help", "nope")
	if want := "shellagent: help nope: want shellagent help [client | replay | daemon [status | stop | upgrade] | up | status | logs | down]\nRun 'shellagent --help' for usage.\n"; code != 2 || stdout != "" || stderr != want {
		t.Errorf("help nope: exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, want)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := runBinary(t, "", nil, "--version")
	if code != 0 || stderr != "" {
		t.Errorf("--version: exit %d, stderr %q", code, stderr)
	}
	// The version is the one the build info records (go version -m reads
	// it from the binary), or "devel" for a build without one.
	info, err := exec.Command("go", "version", "-m", binary).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\tmod\tshellagent\t(\S+)`).FindSubmatch(info)
	if m == nil {
		t.Fatalf("go version -m shows no main module:\n%s", info)
	}
	want := "shellagent " + string(m[1]) + "\n"
	if string(m[1]) == "(devel)" {
		want = "shellagent devel"
		if rev := regexp.MustCompile(`(?m)^\tbuild\tvcs.revision=(\w{12})`).FindSubmatch(info); rev != nil {
			want += "-" + string(rev[1])
		}
		if !strings.HasPrefix(stdout, want) || !strings.HasSuffix(stdout, "\n") || strings.Count(stdout, "\n") != 1 {
			t.Errorf("--version printed %q, want %q…", stdout, want)
		}
		return
	}
	if stdout != want {
		t.Errorf("--version printed %q, want %q", stdout, want)
	}
}

func TestCommandLineErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		env  []string
		says string
	}{
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{[]string{"--scrollback", "1", "MiB"}, nil, `unexpected argument "MiB" after --scrollback 1: write a value and its unit together, e.g. --scrollback 1MiB`},
		{[]string{"--foreground-timeout", "5"}, nil, "--foreground-timeout 5: missing unit, e.g. 5s"},
		{[]string{"--foreground-timeout=-1s"}, nil, "--foreground-timeout -1s: must not be negative"},
		{[]string{"--kill-grace", "0"}, nil, "--kill-grace 0: must be more than 0"},
		{[]string{"--kill-grace", "soon"}, nil, "--kill-grace soon: want a duration such as 10s, 500ms or 1m30s"},
		{[]string{"--stall-timeout", "0s"}, nil, "--stall-timeout 0s: must be more than 0"},
		{[]string{"--scrollback", "9007199254740992KiB"}, nil, "--scrollback 9007199254740992KiB: want a positive size"},
		{[]string{"--cols", "0"}, nil, "--cols 0: want a whole number from 1 to 65535"},
		{[]string{"--rows", "70000"}, nil, "--rows 70000: want a whole number from 1 to 65535"},
		{[]string{"--scrollback", "lots"}, nil, "--scrollback lots: want a positive size such as 1MiB"},
		{[]string{"--sequential-ids=maybe"}, nil, "--sequential-ids maybe: want true or false"},
		{[]string{"--no-such-flag"}, nil, "unknown flag --no-such-flag"},
		{[]string{"--shell"}, nil, "--shell needs a value"},
		{[]string{"--shell", "/no/such/shell"}, nil, "--shell /no/such/shell: no such file; want the path of an executable shell"},
		{[]string{"--shell", notExec}, nil, "--shell " + notExec + ": not an executable file"},
		{[]string{"--shell", dir}, nil, "--shell " + dir + ": a directory, not an executable file"},
		{nil, []string{"SHELL=/no/such/shell"}, "$SHELL /no/such/shell: no such file; pick a shell with --shell"},
		{[]string{"client", "extra"}, nil, `unexpected argument "extra"`},
		{[]string{"client", "--bogus"}, nil, "unknown flag --bogus"},
		{[]string{"client", "--permissions", "maybe"}, nil, "--permissions maybe: want ask, allow or reject"},
		{[]string{"client", "--set", "foreground_timeout"}, nil, "--set foreground_timeout: want ID=VALUE"},
		{[]string{"client", "--cwd", "/no/such/dir"}, nil, "--cwd /no/such/dir: not a directory"},
		{[]string{"replay"}, nil, "replay: want one transcript FILE"},
		{[]string{"replay", "a.jsonl", "b.jsonl"}, nil, "replay: want one transcript FILE"},
		{[]string{"replay", "/no/such/file"}, nil, "replay: open /no/such/file: no such file or directory"},
		{[]string{"replay", notExec}, nil, "replay: " + notExec + `:1: want {"client":MSG} or {"agent":MSG}`},
		{[]string{"--socket", "/run/x.sock"}, nil, "--socket is for --daemon (or shellagent daemon)"},
		{[]string{"--idle-exit", "1m"}, nil, "--idle-exit is for --daemon"},
		{nil, []string{"SHELLAGENT_DAEMON=maybe"}, "$SHELLAGENT_DAEMON=maybe: want 1 or 0"},
		{[]string{"--daemon", "--socket", "/" + strings.Repeat("s", 110)}, nil, "a unix socket path holds at most 107 on Linux"},
		{[]string{"daemon", "--idle-exit", "5"}, nil, "--idle-exit 5: missing unit, e.g. 5s"},
		{[]string{"daemon", "--daemon"}, nil, "unknown flag --daemon"},
		{[]string{"daemon", "--socket", "/" + strings.Repeat("s", 110)}, nil, "a unix socket path holds at most 107 on Linux"},
		{[]string{"daemon", "status", "extra"}, nil, `unexpected argument "extra"`},
		{[]string{"daemon", "stop", "--now"}, nil, "unknown flag --now"},
		{[]string{"logs", "web", "0"}, nil, `"0" is not a number of lines from 1 to 1000`},
		{[]string{"logs", "web", "-3"}, nil, `"-3" is not a number of lines from 1 to 1000`},
		{[]string{"logs", "-f", "web", "-3"}, nil, `"-3" is not a number of lines from 1 to 1000`},
		{[]string{"logs", "web", "-3", "-f"}, nil, `"-3" is not a number of lines from 1 to 1000`},
		{[]string{"logs", "web", "many"}, nil, `"many" is not a number of lines from 1 to 1000`},
		{[]string{"logs", "web", "--lines"}, nil, "unknown flag --lines"},
		{[]string{"up", "-3"}, nil, "unknown flag --3"},
	}
	for _, tt := range tests {
		stdout, stderr, code := runBinary(t, "", tt.env, tt.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tt.says) || !strings.HasPrefix(stderr, "shellagent: ") {
			t.Errorf("%v %v: exit %d, stdout %q, stderr %q; want exit 2 and an error saying %q", tt.env, tt.args, code, stdout, stderr, tt.says)
		}
		// The way to the help of the command at fault. Issue 23:
		// "client --bogus" pointed to "shellagent --help".
		command := "shellagent"
		if len(tt.args) > 0 && slices.Contains([]string{"client", "replay", "daemon", "up", "logs"}, tt.args[0]) {
			command += " " + tt.args[0]
			if len(tt.args) > 1 && tt.args[0] == "daemon" && (tt.args[1] == "status" || tt.args[1] == "stop") {
				command += " " + tt.args[1]
			}
		}
		if want := "\nRun '" + command + " --help' for usage.\n"; !strings.HasSuffix(stderr, want) {
			t.Errorf("%v: stderr %q, want it to end %q", tt.args, stderr, want)
		}
	}
}

// A shell named without a path is looked up in $PATH and works.
func TestShellFromPath(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--shell", "sh")
	sid := a.session()
	a.prompt(sid, "echo found")
	a.c.WaitFor("output", func(m *acptest.Msg) bool { return strings.Contains(string(a.c.Output(sid, "term_1")), "found") })
}
