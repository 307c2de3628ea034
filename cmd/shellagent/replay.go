package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"shellagent/replay"
)

// replayHelp returns "shellagent replay --help".
func replayHelp() string {
	return `Usage: shellagent replay FILE

An agent on stdio that plays the transcript in FILE to the client: each of
the client's messages is matched with the transcript's next client line (by
kind and method, in order), and answered with the agent lines that followed
it in FILE, responses under the client's ids. FILE is in the format of
'shellagent client --trace FILE' and testdata/transcripts: one
{"client":MSG} or {"agent":MSG} object a line. Capture an exchange with any
agent, then replay it without that agent:

  shellagent client --trace bug.jsonl -- ANY-AGENT
  shellagent replay bug.jsonl      # as the agent command of the client

Departures from the transcript are reported on stderr as FILE:LINE: what
differs: a message of another method than the transcript's, different
contents (compared as JSON; ids, the client's name and the directory aside),
a message the transcript does not have (answered with an error), lines
never sent when stdin ends. The transcript's directory (/cwd in the golden
transcripts) stands for the client's. FILE may hold at most 64 MiB, 1,048,576
lines, and 32 MiB a line; the client's lines are read as the agent reads them
(16 MiB at most).

Exit status: 0 when the client followed the transcript, 1 when it departed
from it (or stopped reading), 2 for a command line error or a file that is
not a transcript.
`
}

// runReplay runs "shellagent replay" and returns the exit code.
func runReplay(args []string) int {
	fs := flag.NewFlagSet("shellagent replay", flag.ContinueOnError)
	rest, err := parseFlags(fs, args, true)
	if errors.Is(err, flag.ErrHelp) {
		return printHelp(replayHelp())
	}
	if err != nil {
		return commandLineError(fs.Name(), err)
	}
	if len(rest) != 1 {
		return commandLineError(fs.Name(), usageErrorf("replay: want one transcript FILE, e.g. shellagent replay testdata/transcripts/bg.jsonl"))
	}
	file := rest[0]
	t, err := replay.ReadFile(file)
	if err != nil {
		return commandLineError(fs.Name(), fmt.Errorf("replay: %w", err))
	}

	// A closed stdout must be an error on write, not a SIGPIPE death.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	out := newOutput(slog.New(slog.NewTextHandler(os.Stderr, nil)), os.Stdout)
	defer out.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-out.gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	departures, err := replay.Play(ctx, t, os.Stdin, out, replay.Options{Report: func(d replay.Departure) {
		fmt.Fprintf(os.Stderr, "%s:%d: %s\n", file, d.Line, d.What)
	}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "shellagent %v\n", err)
	}
	if len(departures) > 0 {
		why := ""
		if ctx.Err() != nil { // only out.gone cancels it before we return
			why = " (the client closed stdout)"
		}
		fmt.Fprintf(os.Stderr, "shellagent replay: %s from %s%s\n", plural(len(departures), "departure"), file, why)
	}
	if len(departures) > 0 || err != nil {
		return 1
	}
	return 0
}

// plural returns "1 departure", "2 departures".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprint(n) + " " + noun + "s"
}
