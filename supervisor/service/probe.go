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
// try is killed, with what it started (its process group), after
// 5*answer or when the probe's context ends, and its output is waited
// for answer more. The probe runs on the goroutine that calls it (the
// service's ready goroutine) and touches nothing of the session.
func ExecProbe(shell, line, dir string, env []string, answer time.Duration) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*answer)
		defer cancel()
		cmd := exec.CommandContext(ctx, shell, "-c", line)
		cmd.Dir, cmd.Env = dir, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = answer
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("exec:%s: %w", line, err)
		}
		return fmt.Sprintf("exec:%s exited 0", line), nil
	}
}
