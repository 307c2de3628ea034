package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shellagent/acp"
	"shellagent/daemon"
	"shellagent/internal/jsonrpcline"
)

// relay is shellagent --daemon: it connects to the daemon, starting one
// if none runs, and lasts until the daemon has answered what stdin held
// and closed the connection, stdout is closed, a stop signal arrives or
// the daemon goes away. None of these
// stops any work: the daemon detaches this connection's sessions. When
// stdout and stdin are pipes or sockets (an editor's, sshd's), the relay
// hands them to the daemon, as tmux's client hands its terminal to the
// server: the daemon writes the output to stdout and reads the requests
// from stdin directly, so that neither costs a copy and a hop through the
// relay, which only waits for the end of the connection. Otherwise the
// relay copies the output from the connection to stdout, and stdin to
// the connection.
func relay(opts agentOptions) int {
	defer keepFlags(os.Stdin, os.Stdout, os.Stderr)()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	path, err := daemon.SocketPath(opts.socket)
	if err != nil {
		return commandLineError("shellagent", err)
	}
	c, err := daemon.Connect(path, daemonHello(), daemon.Stdio{In: os.Stdin, Out: os.Stdout}, func(lock *daemon.Lock) (<-chan error, error) {
		return startDaemon(log, path, opts.daemonArgs, lock)
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "shellagent --daemon: %v\n", withLog(err))
		return 1
	}
	if h := c.Daemon; !ourBuild(h) {
		// Such a daemon closes a handed stdin unread: refuse reads it.
		c.Close() // Best effort: the daemon closes it too.
		return refuse(log, path, h)
	}

	out := newOutput(log, os.Stdout)
	down := make(chan error, 1)
	go func() { down <- copyDown(os.Stdout, c) }()
	up := copyUp(c)
	select {
	case err := <-up:
		if err != nil {
			// A read of stdin or a write to the daemon: err says which.
			log.Info("relaying the client's input to the daemon failed", "err", err)
			return 1
		}
		// The client is done: tell the daemon, and pass on its answers to
		// what was sent until it closes the connection, as when it reads
		// the stdin itself. No timer bounds that: the daemon closes once
		// it has read the end and answered what came before (within a
		// few seconds of reading it, see daemon.Server), but it reads the
		// requests only as fast as it answers them and the client takes
		// the answers, and no timer here could tell that from a hung
		// daemon (a fixed second cut off the answers of a busy one). A
		// stop signal or a closed stdout still ends the relay at once.
		c.Conn.CloseWrite() // Best effort: the exit closes the connection anyway.
		select {
		case <-down:
		case <-out.gone:
		case sig := <-sigs:
			log.Info("relay stopping; the daemon keeps the sessions", "because", sig.String())
		}
		return 0
	case err := <-down:
		if errors.Is(err, syscall.EPIPE) {
			return 0 // stdout's reader left: only a write to it fails so
		}
		if c.HandedStdin && inputEnded(0) {
			// The daemon read the end of stdin, answered what came
			// before it, and closed the connection.
			return 0
		}
		log.Info("the daemon closed the connection", "err", err)
		return 1
	case <-out.gone:
		return 0
	case sig := <-sigs:
		log.Info("relay stopping; the daemon keeps the sessions", "because", sig.String())
		return 0
	}
}

// keepFlags returns a function that gives each of files back the
// O_NONBLOCK it has now. The daemon makes the stdout and stdin it is handed
// non-blocking, and that flag belongs to the open file, which the relay
// shares with whoever else writes to the pipe or socket (the shell that
// ran it, the next command): left set, their writes fail with EAGAIN
// once the reader is slow. Where it can, Dial hands the daemon an open
// file of its own (Linux, a pipe); this covers the rest, on every way out
// of relay.
func keepFlags(files ...*os.File) (restore func()) {
	flags := make([]int, len(files))
	for i, f := range files {
		flags[i] = -1
		control(f, func(fd int) {
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
				flags[i] = fl
			}
		})
	}
	return func() {
		for i, f := range files {
			if flags[i] < 0 {
				continue
			}
			was := flags[i]&unix.O_NONBLOCK != 0
			control(f, func(fd int) {
				if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil && (fl&unix.O_NONBLOCK != 0) != was {
					unix.SetNonblock(fd, was) // Best effort: the relay is exiting.
				}
			})
		}
	}
}

// control runs fn on f's descriptor. Never File.Fd: on a file the runtime
// made non-blocking itself (as os.Pipe does; os.NewFile, which makes
// os.Stdin, leaves the flag as it finds it) it clears O_NONBLOCK, for
// everyone who shares the open file (TestKeepFlags).
func control(f *os.File, fn func(fd int)) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) { fn(int(fd)) }) // Best effort: a closed file has no flags to keep.
}

// copyUp copies stdin to the connection, and delivers the copy's end;
// where the daemon reads stdin itself (Client.HandedStdin) it copies
// nothing and returns nil, which never delivers.
func copyUp(c *daemon.Client) <-chan error {
	if c.HandedStdin {
		return nil
	}
	up := make(chan error, 1)
	go func() {
		_, err := io.Copy(c.Conn, os.Stdin)
		up <- err
	}()
	return up
}

// copyDown copies what the daemon sends on the connection to stdout (all
// of its output when stdout was not handed over; else nothing, and the
// end): what the hello left buffered, then the rest, which *os.File's
// ReadFrom splices.
func copyDown(stdout *os.File, c *daemon.Client) error {
	if n := c.R.Buffered(); n > 0 {
		b, _ := c.R.Peek(n) // Safe: n bytes are buffered.
		if _, err := stdout.Write(b); err != nil {
			return err
		}
	}
	_, err := io.Copy(stdout, c.Conn)
	return err
}

// ourBuild reports whether the daemon that said d is of this binary's
// build: only such a daemon is served by a relay or asked by up, status,
// logs and down.
func ourBuild(d daemon.Hello) bool {
	return d.Shellagent == daemon.RelayVersion && d.Build == buildName()
}

// anotherBuild says that the daemon at path, which said d, is of another
// build, and the two ways out: the upgrade in place, which keeps its
// work, and the stop, which does not.
func anotherBuild(path string, d daemon.Hello) string {
	return fmt.Sprintf("the shellagent daemon at %s is build %s (relay protocol %d), this shellagent is build %s (relay protocol %d): "+
		"move it to this build in place with 'shellagent daemon upgrade' (its commands run on), or stop it with 'shellagent daemon stop' (that stops them)",
		path, d.Build, d.Shellagent, buildName(), daemon.RelayVersion)
}

// refuse serves the editor when the daemon is of another build: every
// request is answered with an error that names both builds and the way
// out, and a line the agent refuses (not JSON-RPC, too long) as the agent
// answers it, until stdin ends. Nothing is relayed.
func refuse(log *slog.Logger, path string, d daemon.Hello) int {
	msg := anotherBuild(path, d) + ", then start the agent again"
	log.Error(msg)
	data := map[string]any{"daemonBuild": d.Build, "relayBuild": buildName(), "fix": "shellagent daemon upgrade"}
	r := jsonrpcline.NewReader(os.Stdin, 0) // lines as the agent reads them
	for {
		m, err := r.Next()
		if err != nil {
			return 1
		}
		resp := m.Refusal
		if resp == nil && m.Kind == jsonrpcline.Request && m.Method != "" {
			resp = jsonrpcline.ErrorResponse(m.ID, &acp.Error{Code: acp.CodeInternalError, Message: msg, Data: data})
		}
		if resp == nil {
			continue // a notification, or a response
		}
		if _, err := os.Stdout.Write(append(resp, '\n')); err != nil {
			return 1
		}
	}
}

// startDaemon starts shellagent daemon for the socket at path, with args
// (the relay's own flags), in a session of its own (setsid), its stdin and
// stdout on /dev/null and its log in daemonLog (or on the relay's stderr,
// where daemonLog has no place), holding lock. Where a
// systemd user manager answers, the daemon runs in a transient scope of
// its own, so that it outlives the editor's scope. The channel delivers
// the daemon's end.
func startDaemon(log *slog.Logger, path string, args []string, lock *daemon.Lock) (<-chan error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logPath, err := daemonLog()
	if err != nil {
		return nil, err
	}
	logf := os.Stderr
	if logPath != "" {
		if logf, err = os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			return nil, fmt.Errorf("daemon log: %w", err)
		}
		defer logf.Close() // Best effort: the daemon has its own copy.
	} else {
		logPath = "the relay's stderr (neither $XDG_STATE_HOME nor $HOME is set)"
	}
	argv := append([]string{exe, "daemon", "--socket", path}, args...)
	if scoped := inScope(argv); scoped != nil {
		argv = scoped
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Stderr = logf // stdin and stdout: /dev/null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	lock.HandOver(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	log.Info("started the daemon", "pid", cmd.Process.Pid, "socket", path, "log", logPath)
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait() // reaps it, should it end while the relay runs
		exited <- fmt.Errorf("%v; its log is %s", err, logPath)
	}()
	return exited, nil
}

// withLog returns err with where the daemon's log is, if it is a
// *daemon.NoAnswerError (a daemon that took the connection and did not
// answer): the file a relay starts a daemon with, or the journal of
// systemd's unit, which may have started it instead.
func withLog(err error) error {
	e, ok := errors.AsType[*daemon.NoAnswerError](err)
	if !ok {
		return err
	}
	switch path, perr := daemonLog(); {
	case perr != nil || path == "":
		e.Log = "its log: the stderr of the relay that started it, or 'journalctl --user -u shellagent' if systemd did"
	default:
		e.Log = path + ", or 'journalctl --user -u shellagent' if systemd started it"
	}
	return err
}

// daemonLog returns the path of the log of a daemon started on demand,
// $XDG_STATE_HOME/shellagent/daemon.log or
// ~/.local/state/shellagent/daemon.log, creating its directory; or ""
// when neither $XDG_STATE_HOME nor $HOME is set: the daemon then logs to
// the relay's stderr, which it inherits.
func daemonLog() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", nil
		}
		dir = filepath.Join(home, ".local", "state")
	}
	dir = filepath.Join(dir, "shellagent")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("daemon log: %w", err)
	}
	return filepath.Join(dir, "daemon.log"), nil
}

// inScope returns argv run by systemd-run in a transient scope of its
// own, with cgroup delegation so that cgroup containment works inside it,
// or nil where no systemd user manager answers. systemd-run --scope
// execs the command itself: the daemon keeps its pid, descriptors and
// session.
func inScope(argv []string) []string {
	run, err := exec.LookPath("systemd-run")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if exec.CommandContext(ctx, "systemctl", "--user", "show-environment").Run() != nil {
		return nil
	}
	return append([]string{run, "--user", "--scope", "--quiet", "--collect", "--property=Delegate=yes",
		"--description=shellagent daemon", "--"}, argv...)
}
