package daemon

import (
	"context"
	"fmt"
	"os"

	"shellagent/supervisor"
)

// IdleHost is the Host of a daemon whose supervisor cannot yet hand its
// sessions over: it freezes only a daemon that holds no session, and
// refuses, before anything is stopped, to upgrade one that does, so that
// an upgrade never loses work.
type IdleHost struct {
	Supervisor *supervisor.Supervisor
}

// Precheck refuses while the supervisor holds a session.
func (h IdleHost) Precheck() error {
	sessions := h.Supervisor.Sessions()
	if len(sessions) == 0 {
		return nil
	}
	live := 0
	for _, s := range sessions {
		if len(s.Terminals) > 0 {
			live++
		}
	}
	return fmt.Errorf("%w: this daemon holds %d sessions (%d with live terminals); sessions with live terminals cannot be upgraded yet, and this build carries no session across an upgrade: close them (session/close) or stop the daemon (shellagent daemon stop), then start the new build", ErrCannotFreeze, len(sessions), live)
}

// Freeze freezes nothing: it checks again, now that no connection is
// served, that there is no session.
func (h IdleHost) Freeze(context.Context) ([]byte, []*os.File, func(), error) {
	if err := h.Precheck(); err != nil {
		return nil, nil, nil, err
	}
	return nil, nil, func() {}, nil
}
