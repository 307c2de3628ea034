//go:build tracefile

package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/trace"
)

// traceEnv names the file prefix of startTrace.
const traceEnv = "SHELLAGENT_TRACE"

// startTrace, in a build with -tags tracefile, writes an execution trace
// of this process (for go tool trace) to $SHELLAGENT_TRACE.PID until stop
// is called: a relay and the daemon it starts each write their own. An
// exec in place (daemon upgrade) ends the file unfinished. Without
// $SHELLAGENT_TRACE it does nothing. bench/README.md ("Profiles") says how
// the benchmark of the binary uses it.
func startTrace() (stop func()) {
	prefix := os.Getenv(traceEnv)
	if prefix == "" {
		return func() {}
	}
	name := fmt.Sprintf("%s.%d", prefix, os.Getpid())
	f, err := os.Create(name)
	if err == nil {
		if err = trace.Start(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		slog.Warn("execution trace", "file", name, "err", err)
		return func() {}
	}
	return func() {
		trace.Stop()
		if err := f.Close(); err != nil {
			slog.Warn("execution trace", "file", name, "err", err)
		}
	}
}
