package service

import (
	"context"
	"fmt"
	"time"
)

// ExecProbe returns the probe of an exec:CMD ready condition: each try
// runs line through run (work.Config's Probe: held as a terminal's
// processes are, so that nothing a try starts, in the background or in a
// session of its own, runs on after it), in dir with env, and succeeds
// when it exits 0; a try that fails says why ("exit status 1"). A try is
// cut short after 5*answer (its error then a *tryLimit), or when the
// probe's context ends (the service stops, or its ready_timeout runs
// out). The probe runs on the goroutine that calls it (the
// service's ready goroutine) and touches nothing of the session.
func ExecProbe(run func(ctx context.Context, line, dir string, env []string) error, line, dir string, env []string, answer time.Duration) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		try, cancel := context.WithTimeout(ctx, 5*answer)
		defer cancel()
		if err := run(try, line, dir, env); err != nil {
			if try.Err() != nil && ctx.Err() == nil {
				return "", &tryLimit{5 * answer}
			}
			return "", err
		}
		return fmt.Sprintf("exec:%s exited 0", line), nil
	}
}

// A tryLimit is the end of a try of an exec: probe that was still running
// at its limit, and was stopped.
type tryLimit struct{ limit time.Duration }

func (e *tryLimit) Error() string {
	return fmt.Sprintf("was still running after %s, its limit, and was stopped", e.limit)
}
