package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"shellagent/acp"
	"shellagent/contain"
	"shellagent/daemon"
	"shellagent/internal/jsonrpcline"
	"shellagent/internal/stack"
	"shellagent/supervisor/service"
	"shellagent/termtext"
)

// The stack's command line (SPEC "Stacks", docs/stacks.md): shellagent
// up and down run /up and /down in the daemon's session for the current
// directory (resumed if the daemon has one for it, the latest; up makes a
// new one else, starting the daemon as --daemon does). status and logs
// look at the live session without taking it: what /status and /logs say
// there (_shellagent/session/look), and with logs -f the service's output
// as it comes (_shellagent/service/read). Where no session of the
// directory is live (nor perhaps a daemon), status, logs and down say
// that nothing runs. They are an ACP client of the daemon like any
// editor: the session and its services stay when they exit.

// stackCommands are the stack's subcommands.
var stackCommands = []string{"up", "status", "logs", "down"}

// runStack runs shellagent up, status, logs or down.
func runStack(name string, args []string) int {
	fs := flag.NewFlagSet("shellagent "+name, flag.ContinueOnError)
	socket := fs.String("socket", "", "the daemon's socket `PATH` (default $"+daemon.SocketEnv+", else $XDG_RUNTIME_DIR/shellagent/daemon.sock, else /tmp/shellagent-UID/daemon.sock)")
	var stateDir string
	fs.StringVar(&stateDir, "state-dir", "", "the daemon it starts keeps service logs under `DIR` (default "+stateDirDefault+")")
	follow := false
	if name == "logs" {
		fs.BoolVar(&follow, "f", false, "after the last lines, print the service's output as it comes, until interrupted")
	}
	rest, err := stackArgs(fs, args, name == "logs")
	if errors.Is(err, flag.ErrHelp) {
		return printHelp(stackHelp(name, fs))
	}
	if err != nil {
		return commandLineError(fs.Name(), err)
	}
	if name == "logs" {
		if len(rest) == 0 || len(rest) > 2 {
			return commandLineError(fs.Name(), usageErrorf("logs needs a service name and at most a number of lines"))
		}
	}
	if name == "status" && len(rest) > 0 {
		return commandLineError(fs.Name(), unexpectedArgument(args, rest))
	}
	var daemonArgs []string
	if stateDir != "" {
		daemonArgs = append(daemonArgs, "--state-dir="+stateDir)
	}
	cwd, err := projectDir()
	if err != nil {
		fmt.Fprintf(os.Stderr, "shellagent %s: %v\n", name, err)
		return 1
	}
	// status and logs look at what runs without taking the session from
	// an editor; down stops what runs. Where nothing runs, the three start
	// no daemon and make no session live.
	mode := openOrStart
	switch name {
	case "status", "logs":
		mode = lookLive
	case "down":
		mode = takeLive
	}
	lines := service.DefaultLogLines
	if name == "logs" && len(rest) == 2 {
		if lines, err = service.ParseLogLines(rest[1]); err != nil {
			return commandLineError(fs.Name(), usageErrorf("%v", err))
		}
	}
	sc, err := dialStack(*socket, daemonArgs, cwd, mode)
	if errors.Is(err, errNothingRuns) {
		return nothingRunsHere(name, len(rest) > 0, cwd)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "shellagent %s: %v\n", name, err)
		return 1
	}
	defer func() { sc.close() }() // the last one: promptUp may move to another
	if follow {
		return sc.follow(*socket, rest[0], lines, func() (*stackClient, error) { return dialStack(*socket, daemonArgs, cwd, lookLive) })
	}
	line := "/" + strings.Join(append([]string{name}, rest...), " ")
	var said string
	switch {
	case mode == lookLive:
		said, err = sc.look(line)
	case name == "up":
		sc, said, err = promptUp(sc, line, func() (*stackClient, error) { return dialStack(*socket, daemonArgs, cwd, takeLive) })
		if errors.Is(err, errClosed) {
			if exe := newBuild(*socket, sc.c.Daemon.Pid); exe != "" {
				// /up again, as the new build: it waits for the same services.
				fmt.Fprintf(os.Stderr, "shellagent up: the daemon was upgraded in place to another build: going on with it (%s)\n", exe)
				err = syscall.Exec(exe, append([]string{exe}, os.Args[1:]...), os.Environ())
			}
		}
	default:
		said, err = sc.prompt(line)
	}
	var intr *interrupted
	if errors.As(err, &intr) {
		return intr.report(name)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "shellagent %s: %v\n", name, err)
		return 1
	}
	if name == "status" && strings.HasPrefix(said, service.NoServices) {
		said = nothingRuns(name, cwd) // the session's answer names /up
	}
	return printAnswer(name, said)
}

// upAgain is how many upgrades in place up follows its daemon through
// while it waits.
const upAgain = 3

// promptUp runs up's prompt line on sc and returns the stackClient it
// ended on and what the prompt said. A daemon upgraded in place closes
// every connection, and the services go on in its next image: when the
// daemon closed the connection and redial finds it again with the same
// pid (upgraded), up asks /up there again, which waits for the same
// services. Another end of the connection (the daemon died) is the
// prompt's error.
func promptUp(sc *stackClient, line string, redial func() (*stackClient, error)) (*stackClient, string, error) {
	said, err := sc.prompt(line)
	for range upAgain {
		next := sc.upgraded(err, redial)
		if next == nil {
			break
		}
		sc = next
		said, err = sc.prompt(line)
	}
	return sc, said, err
}

// upgraded returns a new connection to sc's daemon, in the session of
// sc, when err says that the daemon closed sc's connection and redial
// finds it again with the same pid (an upgrade in place keeps it); it
// closes sc then. Otherwise (the daemon died, or err is another error)
// it returns nil.
func (sc *stackClient) upgraded(err error, redial func() (*stackClient, error)) *stackClient {
	if !errors.Is(err, errClosed) {
		return nil
	}
	next := redialUpgraded(redial)
	if next == nil {
		return nil
	}
	if next.c.Daemon.Pid != sc.c.Daemon.Pid {
		next.close()
		return nil
	}
	sc.close()
	return next
}

// newBuild returns the executable of the daemon at the socket that flag
// names if it is the daemon pid, upgraded in place to another build than
// this one, whose clients it alone serves; "" otherwise, or if it cannot
// be told within upgradeWait.
func newBuild(flag string, pid int) string {
	path, err := daemon.SocketPath(flag)
	if err != nil {
		return ""
	}
	st, err := statusThrough(context.Background(), path)
	if err != nil || st.Pid != pid || st.Build == buildName() {
		return ""
	}
	return executable(pid)
}

// executable returns the path of process pid's executable, "" if it
// cannot be read.
func executable(pid int) string {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return ""
	}
	return exe
}

// statusThrough asks the daemon at path for its status, and asks again
// while an upgrade in place hands the daemon over (it may close what
// connects then), for at most upgradeWait or until ctx ends. A daemon
// that is not running, and not starting, is daemon.ErrNotRunning at once.
func statusThrough(ctx context.Context, path string) (daemon.Status, error) {
	for deadline := time.Now().Add(upgradeWait); ; {
		st, err := daemon.AskStatus(path, daemonHello())
		if _, starting := inTransit(err, path); err == nil || errors.Is(err, daemon.ErrNotRunning) && !starting || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// upgradeWait is how long redialUpgraded tries: an upgrade in place
// gives up on a new image that has not taken over within 10 s, and the
// old image goes on.
const upgradeWait = 15 * time.Second

// redialUpgraded connects again with redial while the daemon, in the
// middle of an upgrade, closes what connects (before its hello, or
// after); nil if it fails otherwise (no daemon runs) or for longer than
// upgradeWait.
func redialUpgraded(redial func() (*stackClient, error)) *stackClient {
	for deadline := time.Now().Add(upgradeWait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		next, err := redial()
		if err == nil {
			return next
		}
		if !errors.Is(err, errClosed) && !errors.Is(err, daemon.ErrNoHello) {
			return nil
		}
	}
	return nil
}

// printAnswer prints what the prompt of command name said, and returns
// the exit code: 0 if it did what it was asked, else 1.
func printAnswer(name, said string) int {
	if !stackSucceeded(name, said) {
		if name == "logs" {
			fmt.Fprintln(os.Stderr, said) // stdout holds the lines only
		} else {
			printSaid(name, said)
		}
		return 1
	}
	printSaid(name, said)
	return 0
}

// stackArgs parses args with fs, whose flags may come before, between or
// after the other arguments, and returns those in order. With counts, a
// word such as -3 is an argument, not a flag: logs takes it for its count
// of lines, and service.ParseLogLines says what is wrong with it, as it
// does for 0 or x. It returns parseFlags' errors, flag.ErrHelp included.
func stackArgs(fs *flag.FlagSet, args []string, counts bool) ([]string, error) {
	var rest []string
	for more := args; len(more) > 0; {
		if counts && isNegativeNumber(more[0]) {
			rest, more = append(rest, more[0]), more[1:]
			continue
		}
		end := len(more) // the flags parsed now end before a negative number
		if i := slices.IndexFunc(more, isNegativeNumber); counts && i >= 0 {
			end = i
		}
		left, err := parseFlags(fs, more[:end], true)
		if err != nil {
			return nil, err
		}
		if len(left) == 0 {
			more = more[end:]
			continue
		}
		rest = append(rest, left[0])
		more = append(slices.Clone(left[1:]), more[end:]...)
	}
	return rest, nil
}

// isNegativeNumber reports whether s is a number with a minus sign, such
// as -3.
func isNegativeNumber(s string) bool {
	return strings.HasPrefix(s, "-") && isNumber(s)
}

// stackSucceeded tells from what the command said whether it did what it
// was asked, by the first words of the answer (package service names
// them).
func stackSucceeded(name, said string) bool {
	switch name {
	case "up":
		return strings.HasPrefix(said, service.AllReady)
	case "down":
		return strings.HasPrefix(said, service.AllStopped) || strings.HasPrefix(said, service.NothingToStop)
	case "logs":
		return !strings.HasPrefix(said, service.NoSuchService)
	}
	return true
}

// printSaid prints what the prompt of command name said as plain text:
// a block the agent fenced for an editor's Markdown (a table, a log's
// lines) is printed without its fences. The lines of logs go to stdout
// alone, their heading to stderr, so that logs NAME > FILE holds the
// service's lines only.
func printSaid(name, said string) {
	head, body, ok := termtext.Unfence(said)
	if !ok {
		fmt.Println(said)
		return
	}
	headTo := os.Stdout
	if name == "logs" {
		headTo = os.Stderr
	}
	if head != "" {
		fmt.Fprintln(headTo, head)
	}
	if body != "" {
		fmt.Println(body)
	}
}

const stateDirDefault = "$XDG_STATE_HOME/shellagent, else ~/.local/state/shellagent"

// stackHelp returns shellagent up|status|logs|down --help.
func stackHelp(name string, fs *flag.FlagSet) string {
	var w strings.Builder
	usage := map[string]string{
		"up":     "up [NAME...]\n        start the services named (default all) and what they depend on, each\n        once its dependencies are ready; exit 0 once all are ready, 1 when one\n        failed, with the reason and its last lines. Ctrl-C stops the waiting:\n        the services go on",
		"status": "status\n        one line per service: state, pid, uptime, restarts, and the memory, CPU\n        and listening ports of its processes",
		"logs":   "logs NAME [N] [-f]\n        the last N lines of its output (default 50), escapes removed; with -f,\n        the last N lines as written, then its output as it comes",
		"down":   "down [NAME...]\n        stop the services named (default all) and what depends on them,\n        dependents first. Ctrl-C stops the waiting: the stops go on",
	}[name]
	fmt.Fprintf(&w, `The project's services (shellagent.toml or Procfile in the current
directory, docs/stacks.md), run by the shellagent daemon (which up starts
if none runs) in its session for this directory: an editor that resumes
that session sees them, and they outlive this command and the editor.
status and logs (-f too) only look: the session stays with the editor
that has it.

Usage:
  shellagent %s

Flags:
`, usage)
	printDefaults(&w, fs)
	w.WriteString("  -h, --help\n        print this help and exit\n")
	return w.String()
}

// stackClient is one ACP connection to the daemon, in the session of a
// directory. What the daemon sends is read by a goroutine of its own
// (readLoop), so that a command can wait for it and for a signal at once
// (prompt); one goroutine at a time reads it (next) and writes.
type stackClient struct {
	c     *daemon.Client
	enc   *json.Encoder
	in    chan *incoming // what the daemon sends, in order; closed once the connection ends
	inErr error          // why in is closed: read it only once in is closed
	quit  chan struct{}  // closed by close: readLoop stops
	id    int
	sid   string
	// socket is the daemon's socket path, beside which up takes its
	// opening lock (daemon.LockOpening).
	socket string

	// closing makes close run once: follow's goroutine closes a
	// connection an upgrade ended while runStack's defer may close it.
	closing sync.Once
}

// How a command opens the session of its directory (dialStack).
type openMode int

const (
	// openOrStart resumes the daemon's latest session of the directory
	// (a past one made live again), else opens one, and starts a daemon
	// if none runs: up.
	openOrStart openMode = iota
	// takeLive resumes the latest live session: down.
	takeLive
	// lookLive finds the latest live session and leaves it with the
	// client that has it: status and logs look at it
	// (_shellagent/session/look, _shellagent/service/read).
	lookLive
)

// dialStack connects to the daemon, initializes, and opens the session of
// cwd as mode says. Only openOrStart starts a daemon or opens a session:
// the other modes return errNothingRuns where no daemon runs or no session
// of cwd is live.
func dialStack(socket string, args []string, cwd string, mode openMode) (*stackClient, error) {
	path, err := daemon.SocketPath(socket)
	if err != nil {
		return nil, err
	}
	var c *daemon.Client
	if mode != openOrStart {
		c, err = daemon.DialLive(path, daemonHello())
		if errors.Is(err, daemon.ErrNotRunning) {
			return nil, errNothingRuns
		}
	} else {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		c, err = daemon.Connect(path, daemonHello(), daemon.Stdio{}, func(lock *daemon.Lock) (<-chan error, error) {
			return startDaemon(log, path, args, lock)
		})
	}
	if err != nil {
		return nil, withLog(err)
	}
	if h := c.Daemon; !ourBuild(h) {
		c.Close() // Best effort: nothing was said.
		return nil, errors.New(anotherBuild(path, h))
	}
	sc := &stackClient{c: c, enc: json.NewEncoder(c.Conn), in: make(chan *incoming), quit: make(chan struct{}), socket: path}
	go sc.readLoop(jsonrpcline.NewReader(c.R, 0))
	if err := sc.open(cwd, mode); err != nil {
		sc.close()
		return nil, err
	}
	return sc, nil
}

// close closes the connection, and stops readLoop. The daemon keeps the
// session.
func (sc *stackClient) close() {
	sc.closing.Do(func() {
		close(sc.quit)
		sc.c.Close() // Best effort: the daemon keeps the session.
	})
}

// readLoop reads what the daemon sends into sc.in, a message at a time,
// until the connection ends or sc closes; then it sets sc.inErr and
// closes sc.in.
func (sc *stackClient) readLoop(r *jsonrpcline.Reader) {
	defer close(sc.in)
	for {
		m, err := readMessage(r)
		if err != nil {
			sc.inErr = err
			return
		}
		select {
		case sc.in <- m:
		case <-sc.quit:
			sc.inErr = net.ErrClosed
			return
		}
	}
}

// errNothingRuns is dialStack's error when it was to find a live session
// of the directory and there is none, nor perhaps a daemon.
var errNothingRuns = errors.New("nothing runs here")

// nothingRuns is what status or down says when no daemon session of cwd
// is live, or the live one has no services: the answer of its prompt in a
// session without services, in the command line's words.
func nothingRuns(name, cwd string) string {
	if name == "down" {
		return service.NoneRuns
	}
	return "No services run in " + cwd + ": shellagent up starts the stack of " + stack.TOMLFile + " (or the " + stack.Procfile + ") there."
}

// nothingRunsHere is status, logs and down where no session of cwd is
// live (nor perhaps a daemon). What a shellagent no longer running left in
// cwd (a daemon killed or crashed leaves its services running until an
// agent starts and sweeps them) is named, and down without names stops
// it. It returns the exit code.
func nothingRunsHere(name string, named bool, cwd string) int {
	left, err := orphansIn(cwd)
	if err != nil {
		fmt.Fprintf(os.Stderr, "shellagent %s: what a shellagent no longer running left here: %v\n", name, err)
	}
	switch {
	case len(left) == 0 && name == "logs":
		fmt.Fprintln(os.Stderr, nothingRuns(name, cwd))
		return 1
	case len(left) == 0:
		fmt.Println(nothingRuns(name, cwd))
		return 0
	case name == "down" && !named:
		if err := contain.StopOrphans(left); err != nil {
			fmt.Fprintf(os.Stderr, "shellagent down: %v\n", err)
			return 1
		}
		fmt.Printf("Stopped what a shellagent no longer running (killed or crashed) had left running in %s: %s.\n%s", cwd, processes(len(left)), orphanLines(left))
		return 0
	}
	w, code := os.Stdout, 0
	if name != "status" {
		w, code = os.Stderr, 1 // neither the lines of logs nor the services down names
	}
	fmt.Fprintf(w, "No daemon session runs the stack of %s, but a shellagent no longer running (killed or crashed) left %s running there:\n%s", cwd, processes(len(left)), orphanLines(left))
	fmt.Fprintln(w, "shellagent down (without names) stops them, as does the next shellagent up.")
	return code
}

// orphansIn returns the processes that a shellagent no longer running left
// (contain.Orphans) whose working directory is dir or below it.
func orphansIn(dir string) ([]contain.Orphan, error) {
	all, err := contain.Orphans()
	return slices.DeleteFunc(all, func(o contain.Orphan) bool {
		return o.Dir != dir && !strings.HasPrefix(o.Dir, dir+string(filepath.Separator))
	}), err
}

// orphanLines lists orphans one per line, indented: pid and command line.
func orphanLines(orphans []contain.Orphan) string {
	var b strings.Builder
	for _, o := range orphans {
		fmt.Fprintf(&b, "  %d  %s\n", o.Pid, o.Command)
	}
	return b.String()
}

// processes is "1 process" or "N processes".
func processes(n int) string {
	if n == 1 {
		return "1 process"
	}
	return strconv.Itoa(n) + " processes"
}

// projectDir returns the current directory with its symbolic links
// resolved: one name for the project's directory however it was reached
// (a cd through a symbolic link leaves the link in $PWD, which os.Getwd
// returns). The sessions the stack's commands open have it as their
// cwd, so that the directory has one stack, its services' relative
// paths and log files are the same whichever way it was reached, and a
// leftover's working directory (read from /proc, resolved) is found in
// it.
func projectDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("the current directory: %w", err)
	}
	dir, err := filepath.EvalSymlinks(wd)
	if err != nil {
		return "", fmt.Errorf("the current directory: %w", err)
	}
	return dir, nil
}

// open opens the stack's session of dir, a resolved directory
// (projectDir), as mode says (openMode); without a live session of dir,
// a mode but openOrStart returns errNothingRuns.
func (sc *stackClient) open(dir string, mode openMode) error {
	if _, err := sc.call("initialize", map[string]any{"protocolVersion": 2, "info": map[string]string{"name": "shellagent-cli", "version": version()}}, nil); err != nil {
		return err
	}
	liveOnly := mode != openOrStart
	if !liveOnly {
		// Looking for the session and opening one is one step for
		// another up of the directory started at the same time: it
		// finds the session this one opens (and takes it) instead of
		// opening one of its own, in which its /up would start every
		// service a second time.
		release, err := daemon.LockOpening(sc.socket)
		if err != nil {
			return fmt.Errorf("open the session of %s: %w", dir, err)
		}
		defer release()
	}
	latest, err := sc.latestSession(dir, liveOnly)
	switch {
	case err != nil:
		return err
	case latest == nil && liveOnly:
		return errNothingRuns
	case mode == lookLive:
		sc.sid = latest.SessionID
		return nil
	}
	if latest != nil {
		// A session is resumed with its own cwd, which may name dir
		// through a symbolic link.
		_, err := sc.call("session/resume", map[string]any{"sessionId": latest.SessionID, "cwd": latest.Cwd}, nil)
		if err == nil {
			sc.sid = latest.SessionID
			return nil
		}
		if liveOnly {
			return err
		}
	}
	var res acp.NewSessionResponse
	if _, err := sc.call("session/new", map[string]any{"cwd": dir}, &res); err != nil {
		return err
	}
	sc.sid = res.SessionID
	return nil
}

// latestSession returns the session of dir, a resolved directory
// (projectDir), that the stack's commands go to, or nil: of the daemon's
// sessions of dir (a live one only if liveOnly), the most recently
// updated live one that has a stack (whose /status lists services), else
// the most recently updated one. So an editor that opens a session of its
// own in the directory after shellagent up does not hide the stack from
// status, logs and down. A session is of dir when its cwd is dir,
// written so or through symbolic links (an editor may open a session
// where a link leads, the command line of another build may have):
// session/list's cwd filter compares paths as written, so it reads the
// list unfiltered, a page at a time (sorted by update, most recent
// first), looking at most at maxStackLooks live sessions of dir.
func (sc *stackClient) latestSession(dir string, liveOnly bool) (*acp.SessionInfo, error) {
	isDir := sameDir(dir)
	params := map[string]any{}
	var latest *acp.SessionInfo
	looks := 0
	for {
		var list acp.ListSessionsResponse
		if _, err := sc.call("session/list", params, &list); err != nil {
			return nil, err
		}
		for i, s := range list.Sessions {
			live := sessionState(s) == "attached" || sessionState(s) == "detached"
			if !live && liveOnly || !isDir(s.Cwd) {
				continue
			}
			if latest == nil {
				latest = &list.Sessions[i]
			}
			if !live {
				continue
			}
			if sc.hasStack(s.SessionID) {
				return &list.Sessions[i], nil
			}
			if looks++; looks == maxStackLooks {
				return latest, nil
			}
		}
		if list.NextCursor == nil {
			return latest, nil
		}
		params = map[string]any{"cursor": *list.NextCursor}
	}
}

// maxStackLooks bounds the live sessions of a directory latestSession
// asks whether they have a stack.
const maxStackLooks = 16

// hasStack reports whether the live session sid has a stack: services
// that run or ran, which its /status lists. A session that cannot be
// looked at (closed since the list) has none; a connection that ended
// fails the call that follows.
func (sc *stackClient) hasStack(sid string) bool {
	var res acp.LookSessionResponse
	if _, err := sc.call(acp.MethodLookSession, acp.LookSessionRequest{SessionID: sid, Command: "/status"}, &res); err != nil {
		return false
	}
	return !strings.HasPrefix(res.Text, service.NoServices)
}

// sameDir returns a test of whether a path names dir, a resolved
// directory: as written, or once its symbolic links are resolved. A
// path that does not resolve (a past session's removed directory) names
// dir only as written. It resolves each path once.
func sameDir(dir string) func(path string) bool {
	resolved := make(map[string]string)
	return func(path string) bool {
		path = filepath.Clean(path)
		if path == dir {
			return true
		}
		r, ok := resolved[path]
		if !ok {
			r, _ = filepath.EvalSymlinks(path) // Best effort: "" names no directory.
			resolved[path] = r
		}
		return r == dir
	}
}

// sessionState is a session/list entry's _meta.shellagent.state.
func sessionState(s acp.SessionInfo) string {
	meta, _ := s.Meta["shellagent"].(map[string]any)
	state, _ := meta["state"].(string)
	return state
}

// incoming is any message of the daemon.
type incoming struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		SessionID string         `json:"sessionId"`
		Update    map[string]any `json:"update"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *acp.Error      `json:"error"`
}

// call sends a request and reads until its answer, serving what comes
// meanwhile (handle); the result goes into out, if not nil.
func (sc *stackClient) call(method string, params, out any) (*incoming, error) {
	sc.id++
	id := sc.id
	if err := sc.enc.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		return nil, fmt.Errorf("%s: %w", method, closedConn(err))
	}
	for {
		m, err := sc.next()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if m.Method != "" || string(m.ID) != fmt.Sprint(id) {
			sc.handle(m, nil)
			continue
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				return nil, fmt.Errorf("%s: %w", method, err)
			}
		}
		return m, nil
	}
}

// errClosed is the error of a connection the daemon closed (it stopped,
// or died), in the user's words rather than the socket's.
var errClosed = errors.New("the daemon closed the connection")

// closedConn returns errClosed for an error that says the daemon closed
// the connection, and err for any other.
func closedConn(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
		return errClosed
	}
	return err
}

// next returns the next message of the daemon, or why there is none.
func (sc *stackClient) next() (*incoming, error) {
	m, ok := <-sc.in
	if !ok {
		return nil, sc.inErr
	}
	return m, nil
}

// readMessage reads a message of the daemon from r.
func readMessage(r *jsonrpcline.Reader) (*incoming, error) {
	line, err := r.Next()
	if err != nil {
		return nil, closedConn(err)
	}
	m := new(incoming)
	if err := json.Unmarshal(line.Line, m); err != nil {
		return nil, fmt.Errorf("a line from the daemon: %w", err)
	}
	return m, nil
}

// handle serves a message that is not the answer awaited: a request
// (none is expected: it is refused), or a session update: a service's
// warning goes to stderr. Agent messages of the prompt turn are gathered
// in said.
func (sc *stackClient) handle(m *incoming, said *[]string) {
	if m.Method != "session/update" {
		if len(m.ID) > 0 && m.Method != "" {
			sc.enc.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "shellagent " + "up/down/status/logs answers no requests"}}) // Best effort.
		}
		return
	}
	u := m.Params.Update
	switch u["sessionUpdate"] {
	case acp.KindAgentMessage:
		if said != nil {
			*said = append(*said, contentText(u["content"]))
		}
	case acp.KindNotice:
		title, _ := u["title"].(string)
		desc, _ := u["description"].(string)
		fmt.Fprintln(os.Stderr, noticeText(title, desc))
	}
}

// noticeText is a notice as the command line prints it: its title,
// unless the description's first line says the same (a service's notices
// do: "Service api failed: …."), then the description, with the last
// lines it holds unfenced.
func noticeText(title, desc string) string {
	var lines []string
	first, _, _ := strings.Cut(desc, "\n")
	if !strings.EqualFold(strings.TrimSuffix(first, "."), title) {
		lines = append(lines, title)
	}
	if head, body, ok := termtext.Unfence(desc); ok {
		lines = append(lines, head, body)
	} else {
		lines = append(lines, desc)
	}
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return l == "" }), "\n")
}

func contentText(c any) string {
	switch c := c.(type) {
	case map[string]any:
		s, _ := c["text"].(string)
		return s
	case []any:
		var b strings.Builder
		for _, x := range c {
			b.WriteString(contentText(x))
		}
		return b.String()
	}
	return ""
}

// look returns what line, a slash command that only reads, says in the
// session, which stays with the client that has it.
func (sc *stackClient) look(line string) (string, error) {
	var res acp.LookSessionResponse
	if _, err := sc.call(acp.MethodLookSession, acp.LookSessionRequest{SessionID: sc.sid, Command: line}, &res); err != nil {
		return "", err
	}
	return res.Text, nil
}

// errTaken is prompt's error when another client takes the session
// before the turn is over: the turn goes on there, and this client hears
// no more of it.
var errTaken = errors.New("another client took the session (another shellagent up or down, or an editor) before this command was over; it goes on there: shellagent status shows where it stands")

// taken reports whether m is the notice that another client took the
// session (terminput.TakenNotice).
func (sc *stackClient) taken(m *incoming) bool {
	if m.Method != "session/update" || m.Params.SessionID != sc.sid || m.Params.Update["sessionUpdate"] != acp.KindNotice {
		return false
	}
	meta, _ := m.Params.Update["_meta"].(map[string]any)
	ours, _ := meta["shellagent"].(map[string]any)
	return ours["event"] == acp.EventSessionTaken
}

// followPoll is how often follow asks for more of a quiet service's
// output.
const followPoll = 200 * time.Millisecond

// follow prints the output of service name from its last lines on, as it
// comes, across its restarts, until interrupted or the session or the
// daemon goes. It reads it (_shellagent/service/read) as any client may,
// and so leaves the session with the client that has it. The output goes
// to stdout as the service wrote it, escapes and all; which run it is,
// how a run ended and bytes the service wrote faster than they were
// read go to stderr. For a name that no service of the session has, it
// says what logs without -f says (the answer of /logs), and returns 1.
func (sc *stackClient) follow(socket, name string, lines int, redial func() (*stackClient, error)) int {
	said, err := sc.look("/logs " + name + " 1")
	if err != nil {
		fmt.Fprintf(os.Stderr, "shellagent logs: %v\n", err)
		return 1
	}
	if strings.HasPrefix(said, service.NoSuchService) {
		fmt.Fprintln(os.Stderr, said)
		return 1
	}
	from := followFrom()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	type ended struct {
		at  followPos
		err error
	}
	errs := make(chan ended, 1)
	go func() {
		at, err := followRuns(sc, name, lines, from, redial)
		errs <- ended{at, err}
	}()
	select {
	case <-sigs:
		return 0
	case e := <-errs:
		if !errors.Is(e.err, errClosed) {
			fmt.Fprintf(os.Stderr, "shellagent logs: %v\n", e.err)
			return 1
		}
		exe := newBuild(socket, sc.c.Daemon.Pid)
		if exe == "" {
			fmt.Fprintf(os.Stderr, "shellagent logs: %v\n", e.err)
			return 1
		}
		// Only the new build's client is served: go on as it, from the
		// byte that was next.
		fmt.Fprintf(os.Stderr, "shellagent logs: the daemon was upgraded in place to another build: going on with it (%s)\n", exe)
		os.Setenv(logsFromEnv, e.at.String()) // Best effort: without it, the new build starts at the last lines.
		err := syscall.Exec(exe, append([]string{exe}, os.Args[1:]...), os.Environ())
		fmt.Fprintf(os.Stderr, "shellagent logs: the daemon was upgraded in place to another build, which only its own client follows: %s logs %s -f (%v)\n", exe, name, err)
		return 1
	}
}

// logsFromEnv carries, across the exec of logs -f as the build its
// daemon was upgraded to, where it was: the terminal, the offset of its
// next byte, and whether its end was printed.
const logsFromEnv = "SHELLAGENT_LOGS_FROM"

// followPos is where logs -f is in a service's output: the terminal of
// the run it prints and the offset of the next byte, and whether that
// run's end was printed. The zero value is the last lines of the latest
// run.
type followPos struct {
	term  string
	next  int64
	ended bool
}

func (p followPos) String() string { return fmt.Sprintf("%s %d %t", p.term, p.next, p.ended) }

// followFrom returns where an earlier image of this logs -f was, as
// logsFromEnv says, and unsets it; the zero followPos without it.
func followFrom() followPos {
	v, ok := os.LookupEnv(logsFromEnv)
	if !ok {
		return followPos{}
	}
	os.Unsetenv(logsFromEnv) // Best effort: read once.
	var p followPos
	if _, err := fmt.Sscanf(v, "%s %d %t", &p.term, &p.next, &p.ended); err != nil || p.next < 0 {
		slog.Warn("logs -f: ignoring "+logsFromEnv, "value", v, "err", err)
		return followPos{}
	}
	return p
}

// followRuns is follow's loop on sc, from the last lines of the latest
// run, or from where from says: it returns only with an error, and where
// it was. An upgrade in place of the daemon ends the connection: the
// loop goes on on a new one (upgraded) from where it was, the new image's
// rings holding the same bytes at the same offsets; to another build,
// which serves only its own clients, it returns errClosed and where it
// was, for that build to go on from.
func followRuns(sc *stackClient, name string, lines int, from followPos, redial func() (*stackClient, error)) (followPos, error) {
	req := acp.ReadServiceRequest{SessionID: sc.sid, Name: name, Lines: lines}
	shown, ended := "", "" // the terminal whose output is printed, and whose end
	if from.term != "" {
		req = acp.ReadServiceRequest{SessionID: sc.sid, Name: name, TerminalID: from.term, Offset: from.next}
		shown = from.term
		if from.ended {
			ended = from.term
		}
	}
	for {
		var res acp.ReadServiceResponse
		if _, err := sc.call(acp.MethodReadService, req, &res); err != nil {
			at := followPos{term: req.TerminalID, next: req.Offset, ended: ended != "" && ended == req.TerminalID}
			if sc = sc.upgraded(err, redial); sc == nil {
				return at, err
			}
			req.SessionID = sc.sid
			continue
		}
		data, err := base64.StdEncoding.DecodeString(res.Data)
		if err != nil {
			return followPos{}, fmt.Errorf("%s: %w", acp.MethodReadService, err)
		}
		switch {
		case res.TerminalID == "": // no run yet: ask again as first
			time.Sleep(followPoll)
			continue
		case res.TerminalID != shown:
			fmt.Fprintf(os.Stderr, "Service %s, in %s:\n", name, res.TerminalID)
			shown = res.TerminalID
		}
		if res.TerminalID == req.TerminalID && res.Offset > req.Offset {
			fmt.Fprintf(os.Stderr, "[%d bytes of %s were overwritten before they were read]\n", res.Offset-req.Offset, res.TerminalID)
		}
		os.Stdout.Write(data) // Best effort: a closed stdout ends nothing here.
		if res.Ended != "" && ended != res.TerminalID {
			fmt.Fprintf(os.Stderr, "[%s ended: %s]\n", res.TerminalID, res.Ended)
			ended = res.TerminalID
		}
		req = acp.ReadServiceRequest{SessionID: sc.sid, Name: name, TerminalID: res.TerminalID, Offset: res.Next}
		switch {
		case res.NextTerminalID != "":
			req.TerminalID, req.Offset = res.NextTerminalID, 0
		case len(data) == 0:
			time.Sleep(followPoll)
		}
	}
}
