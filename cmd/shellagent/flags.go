package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"shellagent/contain"
	"shellagent/internal/configopt"
	"shellagent/protocol"
	"shellagent/supervisor"
)

// agentOptions are the agent's settings from the command line.
type agentOptions struct {
	shell             string
	foregroundTimeout time.Duration
	killGrace         time.Duration
	scrollback        int
	cols, rows        int
	stallTimeout      time.Duration
	sequentialIDs     bool
	containment       contain.Mode
	clientChecks      bool
	scenariosInvalid  bool
	history           history // --state-dir, --history, --history-max

	// The relay's (--daemon): the daemon's socket, and the flags that
	// were set, for the daemon it starts.
	relay      bool
	socket     string
	daemonArgs []string
}

// define declares the agent's flags on fs, with o's fields as their
// defaults and destinations. Every usage string names its value in
// backquotes, which --help shows.
func (o *agentOptions) define(fs *flag.FlagSet) {
	fs.StringVar(&o.shell, "shell", o.shell, "the `PATH` of the shell that runs each command as SHELL -c CMD (default $SHELL, else /bin/sh)")
	fs.Var(&durationFlag{p: &o.foregroundTimeout, zero: true}, "foreground-timeout", "move a foreground command to the background after it has run for `DURATION`; 0 = never")
	fs.Var(&durationFlag{p: &o.killGrace}, "kill-grace", "wait `DURATION` between SIGTERM and SIGKILL when stopping a command")
	fs.Var((*sizeFlag)(&o.scrollback), "scrollback", "keep the last `SIZE` of output per terminal (1MiB, 256KiB, 2MB, or bytes)")
	fs.Var(&intFlag{p: &o.cols, min: 1, max: 65535}, "cols", "terminal width: `N` columns")
	fs.Var(&intFlag{p: &o.rows, min: 1, max: 65535}, "rows", "terminal height: `N` rows")
	fs.Var(&durationFlag{p: &o.stallTimeout}, "stall-timeout", "a client that accepts no output for `DURATION` no longer holds terminals back: their overflow is dropped, counted")
	fs.BoolVar(&o.sequentialIDs, "sequential-ids", o.sequentialIDs, "name sessions sess_1, sess_2, ... instead of random ids (reproducible transcripts)")
	fs.Var((*modeFlag)(&o.containment), "containment", "hold each terminal's processes with `MODE`: cgroup (cgroup v2), subreaper, session, or auto (Linux: cgroup where it works, else subreaper; macOS, FreeBSD: session)")
	fs.BoolVar(&o.clientChecks, "client-checks", o.clientChecks, "start every session with client_checks on: what the client does against the protocol's client-side rules is reported to it as warning notices")
	o.history.define(fs)
	fs.BoolVar(&o.scenariosInvalid, "scenarios-invalid", o.scenariosInvalid, "let /scenario play the scenario that sends a message the schema forbids (a malformed background list)")
}

// defaultAgentOptions are the defaults docs/prompts.md documents.
func defaultAgentOptions() agentOptions {
	return agentOptions{
		foregroundTimeout: supervisor.DefaultForegroundTimeout,
		killGrace:         supervisor.DefaultKillGrace,
		scrollback:        supervisor.DefaultScrollback,
		cols:              120,
		rows:              40,
		containment:       contain.Auto,
		stallTimeout:      protocol.DefaultStallTimeout,
		history:           defaultHistory(),
	}
}

// checkShell resolves the shell the agent will run commands with (the
// flag, else $SHELL, else /bin/sh) and checks that it exists and is
// executable. A name without a slash is looked up in $PATH.
func checkShell(shell string) (string, error) {
	from := "--shell"
	if shell == "" {
		shell, from = os.Getenv("SHELL"), "$SHELL"
	}
	if shell == "" {
		shell, from = "/bin/sh", "the default shell"
	}
	path, err := exec.LookPath(shell)
	if err != nil {
		var reason string
		switch {
		case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
			reason = "no such file"
		case errors.Is(err, syscall.EISDIR):
			reason = "a directory, not an executable file"
		case errors.Is(err, os.ErrPermission):
			reason = "not an executable file"
		default:
			reason = err.Error()
		}
		if from == "--shell" {
			return "", fmt.Errorf("--shell %s: %s; want the path of an executable shell, e.g. /bin/sh", shell, reason)
		}
		return "", fmt.Errorf("%s %s: %s; pick a shell with --shell, e.g. --shell /bin/sh", from, shell, reason)
	}
	return path, nil
}

// errUsage is a command line error: the caller prints it and exits 2.
type errUsage struct{ msg string }

func (e *errUsage) Error() string { return e.msg }

// usageErrorf returns an errUsage.
func usageErrorf(format string, args ...any) error {
	return &errUsage{fmt.Sprintf(format, args...)}
}

// parseFlags parses args with fs (whose output it silences) and returns a
// command line error that names the flag and the expected form. It returns
// flag.ErrHelp for -h and --help. Positional arguments are errors unless
// positional is true; the arguments left are returned.
func parseFlags(fs *flag.FlagSet, args []string, positional bool) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, &errUsage{rewordFlagError(err.Error())}
	}
	rest := fs.Args()
	if len(rest) > 0 && !positional {
		return nil, unexpectedArgument(args, rest)
	}
	return rest, nil
}

// flagErrorPattern matches the flag package's message for a bad value.
var flagErrorPattern = regexp.MustCompile(`^invalid (boolean )?value "(.*)" for (?:flag )?-([^:]+): (.*)$`)

// rewordFlagError turns the flag package's messages into the form
// "--name value: reason".
func rewordFlagError(msg string) string {
	if m := flagErrorPattern.FindStringSubmatch(msg); m != nil {
		reason := m[4]
		if m[1] != "" {
			reason = "want true or false"
		}
		return fmt.Sprintf("--%s %s: %s", m[3], m[2], reason)
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("unknown flag --%s", strings.TrimLeft(name, "-"))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("--%s needs a value", strings.TrimLeft(name, "-"))
	}
	return msg
}

// unexpectedArgument describes the first of rest, the arguments left after
// the flags of args, with a hint when it looks like the unit of the value
// before it ("--scrollback 1 MiB").
func unexpectedArgument(args, rest []string) error {
	word := rest[0]
	i := len(args) - len(rest)
	if i >= 2 && strings.HasPrefix(args[i-2], "-") && isNumber(args[i-1]) && isUnit(word) {
		return usageErrorf("unexpected argument %q after %s %s: write a value and its unit together, e.g. %s %s%s",
			word, args[i-2], args[i-1], args[i-2], args[i-1], word)
	}
	return usageErrorf("unexpected argument %q", word)
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

func isUnit(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZµ") == ""
}

// durationFlag is a time.Duration flag that says what is wrong with a
// value: a missing unit, or a value out of range (negative, or 0 unless
// zero is allowed).
type durationFlag struct {
	p    *time.Duration
	zero bool // 0 is allowed
}

func (d *durationFlag) String() string {
	if d.p == nil {
		return ""
	}
	return formatDuration(*d.p)
}

// Set reads v as configopt.ParseDuration does, which is also how
// session/set_config_option takes the duration settings.
func (d *durationFlag) Set(v string) error {
	n, err := configopt.ParseDuration(v, d.zero)
	if err != nil {
		return err
	}
	*d.p = n
	return nil
}

// formatDuration writes d as the docs do: 10s, 3s, 0.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s") // 10m0s: 10m
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m") // 24h0m: 24h
	}
	return s
}

// intFlag is an integer flag with an inclusive range.
type intFlag struct {
	p        *int
	min, max int
}

func (f *intFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strconv.Itoa(*f.p)
}

func (f *intFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < f.min || n > f.max {
		return fmt.Errorf("want a whole number from %d to %d", f.min, f.max)
	}
	*f.p = n
	return nil
}

// sizeFlag is a byte size flag: a number with an optional KiB/MiB/GiB,
// KB/MB, K/M or B suffix.
type sizeFlag int

func (s *sizeFlag) String() string {
	if s == nil {
		return ""
	}
	n := int(*s)
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.Itoa(n/u.mult) + u.suffix
		}
	}
	return strconv.Itoa(n)
}

func (s *sizeFlag) Set(v string) error {
	units := []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}}
	num, mult := v, 1
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n <= 0 || n > (1<<40)/mult {
		return errors.New("want a positive size such as 1MiB, 256KiB, 2MB or 65536 (bytes)")
	}
	*s = sizeFlag(n * mult)
	return nil
}

// printDefaults writes fs's flags, sorted by name, as --help shows them:
// the flag with the name of its value, then its usage and its default in
// the docs' notation, wrapped to 80 columns.
func printDefaults(w *strings.Builder, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		if name == "value" { // a flag.Value without a `NAME` in its usage
			name = ""
		}
		head := "  --" + f.Name
		if len(f.Name) == 1 {
			head = "  -" + f.Name // as one-letter flags are written: logs -f
		}
		if name != "" {
			head += " " + name
		}
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); !isBool && f.DefValue != "" && !strings.Contains(usage, "(default") {
			usage += " (default " + f.DefValue + ")"
		}
		w.WriteString(head + "\n")
		for _, line := range wrap(usage, 80-8) {
			w.WriteString("        " + line + "\n")
		}
	})
}

// wrap splits text into lines of at most width bytes, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for word := range strings.FieldsSeq(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// linkedVersion, when the linker sets it (-ldflags "-X
// main.linkedVersion=v1.2.3"), is shellagent's version.
var linkedVersion string

// version is shellagent's version: linkedVersion if set, else the main
// module's version from the build info when it has one, else "devel"
// with the VCS revision if the build recorded it.
func version() string {
	if linkedVersion != "" {
		return linkedVersion
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel-" + rev[:min(len(rev), 12)] + modified
}
