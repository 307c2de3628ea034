package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"shellagent/daemon"
	"shellagent/ptyio"
	"shellagent/supervisor"
)

// daemonOptions are shellagent daemon's settings: the agent's, and the
// daemon's own.
type daemonOptions struct {
	agentOptions
	detachedTTL time.Duration
	idleExit    time.Duration
	// args are the daemon's flags as given, for the new image of an
	// upgrade in place; upgradeState is the descriptor of the state that
	// the old image handed this one (--upgrade-state), or -1.
	args         []string
	upgradeState int
}

// Defaults of the daemon's own flags.
const (
	defaultDetachedTTL = 24 * time.Hour
	defaultIdleExit    = 10 * time.Minute
)

// runDaemon runs shellagent daemon, daemon status or daemon stop.
func runDaemon(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "status":
			return daemonStatus(args[1:])
		case "stop":
			return daemonStop(args[1:])
		case "upgrade":
			return daemonUpgrade(args[1:])
		}
	}
	opts := daemonOptions{agentOptions: defaultAgentOptions(), detachedTTL: defaultDetachedTTL, idleExit: defaultIdleExit, upgradeState: -1}
	// The new binary of an upgrade in place: its probe, then its image.
	// The old daemon puts either first, before its own flags.
	probe := false
	if len(args) > 0 {
		if args[0] == "--upgrade-probe" {
			probe, args = true, args[1:]
		} else if v, ok := strings.CutPrefix(args[0], "--upgrade-state="); ok {
			fd, err := strconv.Atoi(v)
			if err != nil || fd < 3 {
				return commandLineError("shellagent daemon", usageErrorf("--upgrade-state=%s: want a descriptor number", v))
			}
			opts.upgradeState, args = fd, args[1:]
		}
	}
	opts.args = slices.Clone(args)
	fs := flag.NewFlagSet("shellagent daemon", flag.ContinueOnError)
	opts.define(fs)
	fs.StringVar(&opts.socket, "socket", "", "listen on the socket `PATH` (default $"+daemon.SocketEnv+", else $XDG_RUNTIME_DIR/shellagent/daemon.sock, else /tmp/shellagent-UID/daemon.sock)")
	fs.Var(&durationFlag{p: &opts.detachedTTL, zero: true}, "detached-ttl", "close a session that has had no connection and nothing running for `DURATION`; 0 = never")
	fs.Var(&durationFlag{p: &opts.idleExit, zero: true}, "idle-exit", "exit once there has been no session and no connection for `DURATION`; 0 = never")
	if _, err := parseFlags(fs, args, false); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return printHelp(daemonHelp(fs))
		}
		return commandLineError(fs.Name(), err)
	}
	shell, err := checkShell(opts.shell)
	if err != nil {
		return commandLineError(fs.Name(), err)
	}
	opts.shell = shell
	if opts.socket, err = daemon.SocketPath(opts.socket); err != nil {
		return commandLineError(fs.Name(), err)
	}
	if probe {
		return upgradeProbe()
	}
	return serveDaemon(opts)
}

// daemonHelp returns shellagent daemon --help.
func daemonHelp(fs *flag.FlagSet) string {
	var w strings.Builder
	w.WriteString(`shellagent daemon owns one user's sessions, their commands and their
containment, and serves ACP (v2 and v1) on a unix socket to each
'shellagent --daemon' relay, which an editor starts as its agent. A relay
that goes away (the editor closed, crashed, or lost its SSH link) detaches
its sessions: their commands run on until session/close, 'shellagent daemon
stop', or --detached-ttl. The daemon logs to stderr; SIGTERM, SIGINT and
SIGQUIT stop it as 'daemon stop' does (one while the commands stop, after
another or after 'daemon stop', kills what is left at once), SIGHUP is
ignored.

Usage:
  shellagent daemon [flags]
        run the daemon in the foreground
  shellagent daemon status [--socket PATH]
        list its sessions (attached or detached, since when), their
        running terminals, and the daemon's memory
  shellagent daemon stop [--socket PATH]
        close every session as session/close does, each with its kill
        grace; print what was stopped; return once the daemon has exited
  shellagent daemon upgrade [--socket PATH] [--to PATH]
        make the running daemon exec this binary (or the one --to names)
        in place, with the same pid and socket; if the new binary does not
        answer within 10 s, the old daemon serves on and this exits 1

All three exit 1 when no daemon runs.

Flags:
`)
	printDefaults(&w, fs)
	w.WriteString(`  -h, --help
        print this help and exit
`)
	return w.String()
}

// serveDaemon runs the daemon on the socket opts.socket (a resolved path)
// until a stop request, a stop signal, or --idle-exit.
func serveDaemon(opts daemonOptions) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "shellagent daemon: %v\n", err)
		return 1
	}
	// A relay that went away must be an error on write, not a SIGPIPE
	// death; the terminal that started a foreground daemon may go.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	signal.Ignore(syscall.SIGHUP)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT)
	path := opts.socket
	var hold upgradeHold
	sock, err := takeSocket(path, opts.upgradeState, &hold)
	if err != nil {
		return fail(err)
	}
	defer sock.lock.Close() // Best effort: the exit lets go of it anyway.
	c, swept, err := openContainment(log, opts.containment)
	if err != nil {
		sock.resumed.Answer(buildName(), err)
		return fail(err)
	}
	hold.contained = time.Now()
	// Activated, the socket is systemd's; else it is this daemon's, and
	// bound again should it be removed.
	if sock.l == nil {
		bound, err := daemon.Listen(path)
		if err != nil {
			closeContainment(log, c, swept)
			return fail(err)
		}
		sock.l = bound
	}
	if bound, ok := sock.l.(*daemon.Socket); ok {
		bound.Keep(sock.lock, log)
	}
	// Commands must not become relays of their own daemon.
	os.Unsetenv(daemonEnv) // Best effort: fails only for an invalid name.

	store, err := opts.history.open(log, opts.scrollback)
	if err != nil {
		closeContainment(log, c, swept)
		return fail(err)
	}
	hold.history = time.Now()
	defer closeHistory(log, store) // after the sessions' stop: it records their close
	ptys := ptyio.NewSpare(opts.size())
	defer closeSpare(log, ptys) // after the sessions' stop: no launch can run
	end := newEnding()
	cfg := opts.supervisorConfig(log, c, swept, ptys, end)
	cfg.Detached, cfg.DetachedTTL, cfg.History = supervisor.KeepDetached, opts.detachedTTL, store
	sup := supervisor.New(cfg)
	srv := &daemon.Server{
		Supervisor: sup,
		Options:    connOptions(log, opts.agentOptions),
		Build:      buildName(),
		Socket:     path,
		Log:        log,
		IdleExit:   opts.idleExit,
		Upgrade:    &daemon.Upgrade{Args: opts.args, Lock: sock.lock, Host: sup},
	}
	// A stop signal stops the daemon as daemon stop does; a signal while
	// the commands stop (a second one, or one after daemon stop or
	// --idle-exit) kills what is left at once, as on stdio. One goroutine
	// at a time reads sigs: stopOnSignal's until the stop begins, then
	// hurryOnSignal's.
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	watched := stopOnSignal(ctx, stop, sigs)
	srv.Stop = func(context.Context) error {
		stop(nil) // Serve is stopping already, for its own cause
		<-watched
		stopped := hurryOnSignal(log, c, sigs)
		defer stopped()
		_, _, err := stopSessions(log, sup, c, end, waitsEnd(sup))
		return err
	}
	if sock.resumed != nil {
		hold.log(log, sock.resumed.Execed)
		restoreUpgrade(log, sup, sock.resumed)
	}
	log.Info("daemon serving", "socket", path, "pid", os.Getpid(), "build", buildName(), "containment", c.Mode(), "activated", sock.activated)
	why := srv.Serve(ctx, sock.l)
	log.Info("daemon exiting", "because", why.Error())
	closeContainment(log, c, swept)
	return 0
}

// serving is what a daemon serves on.
type serving struct {
	l         daemon.Listener // nil until the daemon binds its path
	lock      *daemon.Lock    // the socket's
	activated bool            // l is systemd's
	resumed   *daemon.Resumed // what the old image of an upgrade in place handed over, or nil
}

// takeSocket takes the listener and the lock that the old image of an
// upgrade in place hands over on the descriptor state, as they are; with
// no upgrade (state < 0), systemd's listener if it activated this
// process, and the socket's lock (daemonLock).
func takeSocket(path string, state int, hold *upgradeHold) (serving, error) {
	if state < 0 {
		a, err := daemon.Activated()
		if err != nil {
			return serving{}, err
		}
		lock, err := daemonLock(path)
		if err != nil {
			return serving{}, err
		}
		sock := serving{lock: lock}
		if a != nil {
			sock.l, sock.activated = a, true
		}
		return sock, nil
	}
	hold.main = time.Now()
	resumed, err := daemon.Resume(state)
	if err != nil {
		resumed.Answer(buildName(), err)
		return serving{}, err
	}
	hold.resumed = time.Now()
	return serving{l: resumed.Listener, lock: resumed.Lock, activated: resumed.Activated, resumed: resumed}, nil
}

// stopOnSignal calls stop with the name of the first signal on sigs,
// unless ctx ends first. The channel it returns is closed once it no
// longer reads sigs.
func stopOnSignal(ctx context.Context, stop context.CancelCauseFunc, sigs <-chan os.Signal) <-chan struct{} {
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case sig := <-sigs:
			stop(fmt.Errorf("%v", sig))
		case <-ctx.Done():
		}
	}()
	return watched
}

// restoreUpgrade gives sup, in the new image of an upgrade in place, the
// sessions that the old image froze, then answers the upgrade's requester.
// Work this build cannot take is logged: the daemon serves the rest.
func restoreUpgrade(log *slog.Logger, sup *supervisor.Supervisor, resumed *daemon.Resumed) {
	if err := sup.Restore(resumed.State, resumed.Files, resumed.Ended); err != nil {
		log.Error("upgrade in place: the old daemon handed over work this build cannot take", "err", err)
	}
	log.Info("upgraded in place", "from", resumed.From, "to", buildName())
	resumed.Answer(buildName(), nil)
}

// daemonLock takes the socket's lock: the one the relay that started this
// daemon handed over, else a new one; it is an error when another daemon
// holds it.
func daemonLock(path string) (*daemon.Lock, error) {
	if lock := daemon.InheritedLock(path); lock != nil {
		return lock, nil
	}
	if err := daemon.PrepareDir(path); err != nil {
		return nil, err
	}
	lock, ok, err := daemon.TryLock(path)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("another daemon is running or starting for %s (it holds %s.lock); 'shellagent daemon status' shows it", path, path)
	}
	return lock, nil
}

// daemonHello is what status, stop and the relay say first.
func daemonHello() daemon.Hello {
	return daemon.Hello{Shellagent: daemon.RelayVersion, Build: buildName(), Pid: os.Getpid()}
}

// daemonSocket parses the --socket flag of daemon status and daemon stop
// and returns the socket path; done reports that the process should exit
// with code.
func daemonSocket(name string, args []string) (path string, code int, done bool) {
	fs := flag.NewFlagSet("shellagent daemon "+name, flag.ContinueOnError)
	socket := fs.String("socket", "", "the daemon's socket `PATH`")
	if _, err := parseFlags(fs, args, false); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", printHelp("Usage: shellagent daemon " + name + " [--socket PATH]\n"), true
		}
		return "", commandLineError(fs.Name(), err), true
	}
	path, err := daemon.SocketPath(*socket)
	if err != nil {
		return "", commandLineError(fs.Name(), err), true
	}
	return path, 0, false
}

// notRunning prints the one line for a daemon that does not run, or any
// other failure to reach it, and returns exit code 1.
func notRunning(err error, path string) int {
	if errors.Is(err, daemon.ErrNotRunning) {
		fmt.Fprintf(os.Stderr, "shellagent: no daemon is running at %s\n", path)
	} else {
		fmt.Fprintf(os.Stderr, "shellagent: %v\n", err)
	}
	return 1
}

// inTransit reports whether err says that no daemon answers at path
// while a process holds its lock (a daemon starting or stopping), and
// which (see daemon.LockHolder).
func inTransit(err error, path string) (holder int, ok bool) {
	if !errors.Is(err, daemon.ErrNotRunning) {
		return 0, false
	}
	holder, held, herr := daemon.LockHolder(path)
	return holder, herr == nil && held
}

// transitLine is what status and stop say of a daemon in transit.
func transitLine(path string) string {
	return fmt.Sprintf("shellagent: a daemon is starting or stopping at %s: it holds %s.lock and does not answer yet", path, path)
}

// daemonStatus runs shellagent daemon status.
func daemonStatus(args []string) int {
	path, code, done := daemonSocket("status", args)
	if done {
		return code
	}
	st, err := daemon.AskStatus(path, daemonHello())
	if _, ok := inTransit(err, path); ok {
		fmt.Fprintln(os.Stderr, transitLine(path))
		return 1
	}
	if err != nil {
		return notRunning(withLog(err), path)
	}
	var w strings.Builder
	printStatus(&w, st, time.Now())
	return printHelp(w.String())
}

// printStatus writes the status as daemon status shows it.
func printStatus(w io.Writer, st daemon.Status, now time.Time) {
	conns := "connections"
	if st.Connections == 1 {
		conns = "connection"
	}
	rss := "RSS unknown" // where there is no /proc/self/status
	if st.RSS >= 0 {
		rss = fmt.Sprintf("RSS %.1f MiB", float64(st.RSS)/(1<<20))
	}
	procs := ""
	if st.Procs > 0 {
		procs = fmt.Sprintf(", Go on %d of %d CPUs", st.Procs, st.CPUs)
	}
	fmt.Fprintf(w, "daemon pid %d, build %s, up %s, %s%s, %d %s\nsocket %s\n",
		st.Pid, st.Build, ago(now.Sub(st.Started)), rss, procs, st.Connections, conns, st.Socket)
	if len(st.Sessions) == 0 {
		fmt.Fprintln(w, "no sessions")
	}
	for _, s := range st.Sessions {
		attach := "detached"
		if s.Attached {
			attach = "attached"
		}
		fmt.Fprintf(w, "%s  %s since %s (%s ago)  %s\n", s.ID, attach, s.Since.Local().Format(time.DateTime), ago(now.Sub(s.Since)), s.Cwd)
		for _, t := range s.Terminals {
			where := "background"
			if t.Foreground {
				where = "foreground"
			}
			if t.Stopping {
				where += ", stopping"
			}
			fmt.Fprintf(w, "  %s  %s  up %s  %s%s\n", t.ID, where, ago(now.Sub(t.Started)), t.Command, pids(t.Pids))
		}
		if len(s.Terminals) == 0 {
			fmt.Fprintln(w, "  no running terminals")
		}
		if s.Scheduled > 0 {
			fmt.Fprintf(w, "  %d scheduled jobs\n", s.Scheduled)
		}
	}
}

func pids(ps []int) string {
	if len(ps) == 0 {
		return ""
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return "  (pids " + strings.Join(s, " ") + ")"
}

// ago writes d to the second, or to the tenth of a second under 10 s.
func ago(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// daemonStop runs shellagent daemon stop.
func daemonStop(args []string) int {
	path, code, done := daemonSocket("stop", args)
	if done {
		return code
	}
	st, hello, err := daemon.AskStop(path, daemonHello())
	if holder, ok := inTransit(err, path); ok {
		fmt.Fprintln(os.Stderr, transitLine(path)+"; waiting for it")
		st, hello, err = stopInTransit(path, holder)
		if errors.Is(err, errExited) {
			fmt.Printf("the daemon at %s has exited\n", path)
			return 0
		}
	}
	if err != nil {
		return notRunning(withLog(err), path)
	}
	var w strings.Builder
	for _, s := range st.Sessions {
		var terms []string
		for _, t := range s.Terminals {
			terms = append(terms, t.ID+" "+t.Command)
		}
		if len(terms) == 0 {
			terms = []string{"nothing was running"}
		}
		fmt.Fprintf(&w, "closed %s (%s): %s\n", s.ID, s.Cwd, strings.Join(terms, ", "))
	}
	if len(st.Sessions) == 0 {
		w.WriteString("no sessions were open\n")
	}
	if st.Error != "" {
		fmt.Fprintf(&w, "not everything stopped within its kill grace and was killed: %s\n", st.Error)
	}
	if !daemon.WaitExit(hello.Pid, 10*time.Second) {
		fmt.Fprintf(os.Stderr, "shellagent: the daemon (pid %d) stopped its sessions but has not exited\n", hello.Pid)
		printHelp(w.String())
		return 1
	}
	fmt.Fprintf(&w, "daemon pid %d exited\n", hello.Pid)
	return printHelp(w.String())
}

// stopInTransit waits, with no bound of its own, for a daemon that is
// starting or stopping at path, its lock held by holder: it returns
// errExited once that hold has ended (a daemon another client starts
// meanwhile is left alone, where the system tells one hold from the
// next), or stops the daemon once it answers, as AskStop does.
func stopInTransit(path string, holder int) (daemon.Stopped, daemon.Hello, error) {
	for {
		time.Sleep(50 * time.Millisecond)
		now, held, err := daemon.LockHolder(path)
		switch {
		case err != nil:
			return daemon.Stopped{}, daemon.Hello{}, err
		case !held || now != holder:
			return daemon.Stopped{}, daemon.Hello{}, errExited
		}
		st, hello, err := daemon.AskStop(path, daemonHello())
		if !errors.Is(err, daemon.ErrNotRunning) {
			return st, hello, err
		}
	}
}

// errExited is stopInTransit's error for a daemon that has exited.
var errExited = errors.New("the daemon has exited")

// daemonUpgrade runs shellagent daemon upgrade.
func daemonUpgrade(args []string) int {
	fs := flag.NewFlagSet("shellagent daemon upgrade", flag.ContinueOnError)
	socket := fs.String("socket", "", "the daemon's socket `PATH`")
	to := fs.String("to", "", "upgrade to the shellagent binary at `PATH` (default: this one)")
	if _, err := parseFlags(fs, args, false); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return printHelp("Usage: shellagent daemon upgrade [--socket PATH] [--to PATH]\n")
		}
		return commandLineError(fs.Name(), err)
	}
	path, err := daemon.SocketPath(*socket)
	if err != nil {
		return commandLineError(fs.Name(), err)
	}
	exe := *to
	if exe == "" {
		exe, err = os.Executable()
	} else {
		exe, err = filepath.Abs(exe)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "shellagent: the binary to upgrade to: %v\n", err)
		return 1
	}
	up, hello, err := daemon.AskUpgrade(path, daemonHello(), exe)
	if err != nil {
		return notRunning(err, path)
	}
	if up.Error != "" {
		fmt.Fprintf(os.Stderr, "shellagent: the daemon (pid %d) was not upgraded and serves on as build %s: %s\n", up.Pid, up.Build, up.Error)
		return 1
	}
	return printHelp(fmt.Sprintf("daemon pid %d upgraded in place from build %s to %s\n", up.Pid, hello.Build, up.Build))
}

// upgradeProbe answers shellagent daemon --upgrade-probe FLAGS, once the
// flags have been checked: the old image of an upgrade runs it to check
// that this binary can take over with its flags.
func upgradeProbe() int {
	if err := daemon.WriteProbe(os.Stdout, buildName()); err != nil {
		fmt.Fprintf(os.Stderr, "shellagent daemon --upgrade-probe: %v\n", err)
		return 1
	}
	return 0
}

// upgradeHold is when the new image of an upgrade in place got through
// each step of its start, for the log: with the old image's exec and
// supervisor.Restore's line, where the time no PTY is read went.
type upgradeHold struct {
	main, resumed, contained, history time.Time
}

// log logs the steps from execed, when the old image was about to exec
// this one, to now, just before the sessions are restored.
func (h upgradeHold) log(log *slog.Logger, execed time.Time) {
	log.Info("upgrade in place: the new image's start", "exec", h.main.Sub(execed), "resume", h.resumed.Sub(h.main),
		"containment", h.contained.Sub(h.resumed), "history", h.history.Sub(h.contained), "supervisor", time.Since(h.history))
}
