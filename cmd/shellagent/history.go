package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"shellagent/internal/journal"
)

// history is how the agent keeps its sessions' history on disk
// (package journal): --state-dir, --history-max, --history.
type history struct {
	stateDir string
	max      int
	off      bool
	def      string // the default state directory, which stateDir is unless --state-dir names another
}

func defaultHistory() history {
	dir, _ := journal.DefaultDir() // "" without a home: --state-dir is then needed
	return history{stateDir: dir, max: journal.DefaultMax, def: dir}
}

func (h *history) define(fs *flag.FlagSet) {
	fs.StringVar(&h.stateDir, "state-dir", h.stateDir, "keep what outlives a run under `DIR`: each session's history (sessions/) and the logs of services with log = true (logs/) (default "+stateDirDefault+")")
	fs.Var((*sizeFlag)(&h.max), "history-max", "keep at most `SIZE` of history in all; the least recently updated closed sessions go first, then those whose agent died; never one live in a process")
	fs.Var((*onOff)(&h.off), "history", "`MODE` on (the default) keeps each session's history on disk (session/list lists past sessions, session/resume makes one live again); off keeps nothing")
}

// open opens the history, which keeps scrollback bytes of each
// terminal's output, as its ring does; nil with --history off.
func (h history) open(log *slog.Logger, scrollback int) (*journal.Store, error) {
	if h.off {
		return nil, nil
	}
	if h.stateDir == "" {
		// An agent without a home (a bare container, a service with no
		// environment) still serves; it keeps no history.
		log.Warn("no state directory (neither $XDG_STATE_HOME nor $HOME is set, and no --state-dir): keeping no history")
		return nil, nil
	}
	store, err := journal.Open(journal.Options{Dir: h.stateDir, Max: int64(h.max), Scrollback: scrollback, Log: log})
	if err != nil && h.stateDir == h.def {
		// The default one, on a home that is read-only (a sandbox, a
		// container) or not the user's: the agent still serves, as
		// without a home. A --state-dir named on the command line is
		// the user's choice, and its failure the agent's.
		log.Warn("the default state directory cannot be used: keeping no history (--state-dir names another, --history off keeps none without this warning)", "dir", h.stateDir, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--state-dir %s: %w", h.stateDir, err)
	}
	return store, nil
}

// closeHistory writes what is queued and closes the history.
func closeHistory(log *slog.Logger, store *journal.Store) {
	if store == nil {
		return
	}
	if err := store.Close(); err != nil {
		log.Error("history", "err", err)
	}
}

// onOff is a flag whose value is on or off; the bool it sets is true for
// off.
type onOff bool

func (o *onOff) String() string {
	if o != nil && bool(*o) {
		return "off"
	}
	return "on"
}

func (o *onOff) Set(v string) error {
	switch v {
	case "on":
		*o = false
	case "off":
		*o = true
	default:
		return errors.New("want on or off")
	}
	return nil
}
