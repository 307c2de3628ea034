package service

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// ExecProbe returns the probe of an exec:CMD ready condition: it runs
// line with shell in dir, with env, and succeeds when it exits 0. Each
// try runs in a session and process group of its own, and once it is
// over, whatever its outcome, that group is killed: nothing it started
// in the background (CMD &) runs on after the try, nor after the service
// that it probes. A try is cut short, with its group, after 5*answer or
// when the probe's context ends (the service stops), and waited for
// answer more. The probe runs on the goroutine that calls it (the
// service's ready goroutine) and touches nothing of the session.
//
// What leaves the group (setsid, setpgid) is not held: a probe runs
// outside the service's containment.
func ExecProbe(shell, line, dir string, env []string, answer time.Duration) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*answer)
		defer cancel()
		cmd := exec.CommandContext(ctx, shell, "-c", line)
		cmd.Dir, cmd.Env = dir, env
		// A session of its own, not only a group: in the agent's
		// session, its orphans re-parented to the agent (a subreaper)
		// would be left unreaped (contain's reaper, rule 2).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
		cmd.WaitDelay = answer
		if err := runAlone(cmd); err != nil {
			return "", fmt.Errorf("exec:%s: %w", line, err)
		}
		return fmt.Sprintf("exec:%s exited 0", line), nil
	}
}

// runAlone runs cmd, whose process leads a group of its own, and kills
// that group once the process has exited. Where it can (awaitExit), it
// kills before it reaps: the unreaped process keeps its pid, the group's
// id, from naming anyone else's. Elsewhere it reaps first: the id stays
// the group's while any member lives, and the kill then finds none.
func runAlone(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	if awaitExit(pid) {
		killGroup(pid) // Best effort: ESRCH when nothing is left.
		return cmd.Wait()
	}
	err := cmd.Wait()
	killGroup(pid) // Best effort: ESRCH when nothing is left.
	return err
}

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) error {
	return syscall.Kill(-pgid, syscall.SIGKILL)
}
