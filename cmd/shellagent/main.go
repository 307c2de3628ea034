// Command shellagent is an ACP v2 agent on stdio that runs each prompt as a
// shell command in a PTY, with foreground and background work as the v2
// Background Work RFD describes.
//
// Usage:
//
//	shellagent [--shell PATH] [--foreground-timeout 10s] [--kill-grace 3s]
//	           [--scrollback 1MiB] [--cols 120] [--rows 40] [--stall-timeout 1s]
//	           [--sequential-ids]
//
// It reads newline-delimited JSON-RPC from stdin, writes it to stdout and
// logs to stderr. Stdin EOF, SIGTERM or SIGINT stop every command and exit.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"shellagent/protocol"
	"shellagent/ptyio"
	"shellagent/supervisor"
)

var version = "0.1.0"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("shellagent", flag.ContinueOnError)
	shell := fs.String("shell", "", "shell to run commands with (default $SHELL, else /bin/sh)")
	fgTimeout := fs.Duration("foreground-timeout", supervisor.DefaultForegroundTimeout, "move a foreground command to the background after this long (0 = never)")
	killGrace := fs.Duration("kill-grace", supervisor.DefaultKillGrace, "time between SIGTERM and SIGKILL when stopping a command")
	scrollback := sizeFlag(supervisor.DefaultScrollback)
	fs.Var(&scrollback, "scrollback", "output kept per terminal (e.g. 1MiB, 256KiB, 65536)")
	cols := fs.Uint("cols", 120, "terminal columns")
	rows := fs.Uint("rows", 40, "terminal rows")
	stall := fs.Duration("stall-timeout", protocol.DefaultStallTimeout, "a client that accepts no output for this long no longer holds terminals back: their overflow is dropped, counted")
	sequential := fs.Bool("sequential-ids", false, "name sessions sess_1, sess_2, ... instead of random ids (reproducible transcripts)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(os.Stderr, "shellagent", version)
		return 0
	}
	if *cols < 1 || *cols > 65535 || *rows < 1 || *rows > 65535 || *killGrace <= 0 || *fgTimeout < 0 || *stall <= 0 {
		fmt.Fprintln(os.Stderr, "shellagent: --cols and --rows must be 1..65535, --kill-grace and --stall-timeout more than 0, --foreground-timeout 0 or more")
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	// A closed stdout must be an error on write, not a SIGPIPE death.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	sup := supervisor.New(supervisor.Config{
		Shell:             *shell,
		ForegroundTimeout: *fgTimeout,
		KillGrace:         *killGrace,
		Scrollback:        int(scrollback),
		Size:              ptyio.Size{Cols: uint16(*cols), Rows: uint16(*rows)},
		Version:           version,
		Log:               log,
		SequentialIDs:     *sequential,
	})
	conn := protocol.NewConn(os.Stdin, os.Stdout, sup, protocol.Options{Log: log, StallTimeout: *stall})
	select {
	case <-conn.Done():
	case sig := <-stop:
		log.Info("stopping", "signal", sig)
	}
	return shutdown(log, sup, conn, *killGrace)
}

// shutdown closes every session and flushes the connection within the kill
// grace plus one second.
func shutdown(log *slog.Logger, sup *supervisor.Supervisor, conn *protocol.Conn, grace time.Duration) int {
	deadline := time.Now().Add(grace + 900*time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := sup.Shutdown(ctx); err != nil {
		log.Error("processes did not stop in time", "err", err)
	}
	flushed := make(chan struct{})
	go func() { conn.Close(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(time.Until(deadline) + 50*time.Millisecond):
		log.Warn("client is not reading; exiting without flushing")
	}
	return 0
}

// sizeFlag is a byte size flag: a number with an optional KiB/MiB/KB/MB/K/M
// suffix.
type sizeFlag int

func (s *sizeFlag) String() string { return strconv.Itoa(int(*s)) }

func (s *sizeFlag) Set(v string) error {
	units := []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}}
	mult := 1
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.mult
			break
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 || n > math.MaxInt/mult {
		return fmt.Errorf("want a positive size such as 1MiB, got %q", v)
	}
	*s = sizeFlag(n * mult)
	return nil
}
