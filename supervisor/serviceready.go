package supervisor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"shellagent/acp"
	"shellagent/supervisor/wait"
	"shellagent/supervisor/service"
)

// A service's readiness (see service): once a run has started, its ready
// condition is watched off the session's actor, as /wait watches (a
// wait's watch of the run's output, or its poll of a port, a URL or an
// exec: command), until ready_timeout after the run started; the outcome
// comes back through Session.do and makes the service service.Ready or fails
// it, unless the run or the service changed meanwhile.

// watchReady watches the run t for the service's ready condition, as a
// /wait does (wait.Wait.Watch, Poll), until ready_timeout after the
// run started, on a goroutine that reports through Session.do.
func (svc *stackService) watchReady(st *state, t *terminal, gen int) {
	ctx, cancel := context.WithDeadline(context.Background(), t.started.Add(svc.def.ReadyTimeout))
	svc.cancelReady = cancel
	var spec wait.Spec
	if svc.ready != nil {
		spec = *svc.ready
	}
	spec.Term, spec.Timeout = t.id, svc.def.ReadyTimeout
	w := wait.Condition(&spec, t.started)
	var probe func(context.Context) (string, error)
	if svc.execReady != "" {
		probe = service.ExecProbe(st.s.sv.cfg.Shell, svc.execReady, svc.def.Dir, append(slices.Clip(st.s.sv.env), svc.def.Environ()...), wait.AnswerTimeout)
	}
	s, ring, what := st.s, t.ring, svc.execReady
	go func() {
		defer cancel()
		var r wait.Result
		if probe != nil {
			r = w.Poll(ctx, probe)
			if r.Status == acp.StatusFailed {
				r.Text = fmt.Sprintf("exec:%s did not exit 0 within %s.", what, spec.Timeout)
			}
		} else {
			r = w.Watch(ctx, ring, 0)
		}
		if r.Status != "" {
			s.do(func(st *state) { svc.readyResult(st, gen, r) })
		}
	}()
}

// readyResult serves the outcome of a run's ready condition.
func (svc *stackService) readyResult(st *state, gen int, r wait.Result) {
	if gen != svc.gen || svc.state != service.Starting {
		return // a run that ended, or a service stopped meanwhile
	}
	if r.Status == acp.StatusCompleted {
		svc.markReady(st, strings.TrimSuffix(r.Text, "."))
	} else {
		svc.fail(st, "not ready: "+strings.TrimSuffix(r.Text, "."), true)
	}
	st.stack.progress(st)
}

func (svc *stackService) markReady(st *state, how string) {
	svc.state, svc.why, svc.everReady = service.Ready, how, true
	svc.say(st, "Ready: "+how+".")
}
