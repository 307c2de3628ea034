package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"shellagent/acp"
	"shellagent/supervisor/wait"
	"shellagent/supervisor/work"
)

// A service's readiness (see Service): once a run has started, its ready
// condition is watched off the session's actor, as /wait watches (a
// wait's watch of the run's output, or its poll of a port, a URL or an
// exec: command), until ready_timeout after the run started; the outcome
// comes back through Host.Do and makes the service Ready or fails it,
// unless the run or the service changed meanwhile.

// watchReady watches the run t for the service's ready condition, as a
// /wait does (wait.Condition's Watch, Poll), until ready_timeout after
// the run started, on a goroutine that reports through Host.Do.
func (svc *Service) watchReady(t work.Run, gen int) {
	ctx, cancel := context.WithDeadline(context.Background(), t.Started().Add(svc.def.ReadyTimeout))
	svc.cancelReady = cancel
	var spec wait.Spec
	if svc.ready != nil {
		spec = *svc.ready
	}
	spec.Term, spec.Timeout = t.ID(), svc.def.ReadyTimeout
	w := wait.Condition(&spec, t.Started())
	var probe func(context.Context) (string, error)
	if svc.execReady != "" {
		cfg := svc.h.Config()
		probe = ExecProbe(cfg.Probe, svc.execReady, svc.def.Dir, append(slices.Clip(cfg.Env), svc.def.Environ()...), wait.AnswerTimeout)
	}
	h, ring, what := svc.h, t.Output(), svc.execReady
	go func() {
		defer cancel()
		var r wait.Result
		if probe != nil {
			var last error // the last try that its end did not cut short
			r = w.Poll(ctx, func(ctx context.Context) (string, error) {
				said, err := probe(ctx)
				if err != nil && ctx.Err() == nil {
					last = err
				}
				return said, err
			})
			if r.Status == acp.StatusFailed {
				r.Text = fmt.Sprintf("exec:%s did not exit 0 within %s%s.", what, spec.Timeout, lastTry(last))
			}
		} else {
			r = w.Watch(ctx, ring, 0)
		}
		if r.Status != "" {
			h.Do(func() { svc.readyResult(gen, r) })
		}
	}()
}

// readyResult serves the outcome of a run's ready condition.
func (svc *Service) readyResult(gen int, r wait.Result) {
	if gen != svc.gen || svc.state != Starting {
		return // a run that ended, or a service stopped meanwhile
	}
	if r.Status == acp.StatusCompleted {
		svc.markReady(strings.TrimSuffix(r.Text, "."))
	} else {
		svc.Fail("not ready: "+strings.TrimSuffix(r.Text, "."), true)
	}
	svc.stack.Progress()
}

func (svc *Service) markReady(how string) {
	svc.state, svc.why, svc.everReady = Ready, how, true
	svc.say("Ready: " + how + ".")
}

// lastTry says how the last try of an exec: condition that ended ended,
// or nothing if none did (a loaded machine, a short ready_timeout).
func lastTry(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf(" (the last try: %v)", err)
}
