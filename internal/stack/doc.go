// Package stack holds the parts of a project's stack that need no
// process: reading its stack file, the order of /up and /down, the
// restart policy, the capped log file, and what /proc says about a port's
// holder and a process tree. The supervisor runs the services; this
// package only decides and measures. The manual is docs/stacks.md.
//
// Files: file.go (Load, Stack, Service, the checks across services),
// toml.go (shellagent.toml, with go-toml), procfile.go, order.go (Up,
// Down), restart.go (Restarter), log.go (Log, LogPath), port.go
// (PortHolder; the /proc side in port_linux.go, with ListenPorts), stats_linux.go
// (TreeStats); *_other.go for systems without /proc.
//
// # The stack file
//
// Load reads shellagent.toml in the project's directory, else its
// Procfile. shellagent.toml has one table per service and nothing else:
//
//	[services.NAME]
//	command       = "…"       # required: the shell command line
//	cwd           = "dir"     # working directory, relative to the file (default: its directory)
//	env           = { K = "v" } # added to the session's environment (numbers and booleans as written)
//	depends_on    = ["other"] # started (and ready) before this one; stopped after it
//	ready         = ":8080"   # when it is ready, in /wait's language: REGEX, :PORT, http://…, exec:CMD
//	                          # (default: as soon as it has started)
//	ready_timeout = "60s"     # how long ready may take before the service fails (default 60s)
//	restart       = "no"      # no | on-failure (non-zero exit or signal) | always (default no)
//	max_restarts  = 5         # restarts in a row after runs under 10s, then it gives up (default 5)
//	backoff       = "1s"      # delay of the first restart, doubling to at most 30s (default 1s)
//	ports         = [8080]    # ports it listens on: a taken one fails it before it runs
//	log           = false     # keep its output in STATE/logs/PROJECT/NAME.log (default false)
//
// Durations are Go's ("500ms", "2s", "1m30s") or a number of seconds.
// NAME is letters, digits, '_', '-' and '.' (not first). Load refuses,
// with an *Error naming the file, the line and the reason, and returns
// no Stack: a key or table not listed here, a value of the wrong type or
// out of range, a ready condition /wait would refuse (package
// internal/waitfor), a service without command, a dependency on a
// service that does not exist, a cycle in depends_on, a file without
// services. A key's fault is at the key's line, not its table's. A file
// far larger than one written by hand is refused before it is parsed:
// more than 256 KiB (maxFileSize), more than 4096 keys, tables and array
// items (maxItems, counted by tomlItems), more than 256 services
// (maxServices).
//
// A Procfile has one service a line, "NAME: command", as foreman reads
// it; blank lines and lines starting with '#' are skipped. Its services
// take every default above, except log, which is true.
//
// # Order
//
// Up lists the services to start, dependencies first; Down the ones to
// stop, dependents first. Both break ties by the file's order.
//
// # Restarts
//
// A Restarter is fed each run of a service as it ends (start, end, exit)
// and decides: restart after a delay, or not. Under on-failure a clean
// exit (code 0) ends the service; under always nothing does. A run under
// QuickRun (10s) counts toward max_restarts; once max_restarts restarts
// in a row each followed such a run, the next quick end gives up
// (max_restarts = 2: one run and two restarts). A longer run resets the
// count and the delay.
//
// # Logs
//
// A Log is NAME.log capped at MaxLogSize (10 MiB), rotated once to
// NAME.log.1: at most 20 MiB a service. LogPath places it under
// STATE/logs/PROJECT, PROJECT being the directory's base name and a hash
// of its absolute path (Project).
package stack
