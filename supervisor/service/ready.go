package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/ptyio"
	"shellagent/supervisor/wait"
	"shellagent/supervisor/work"
	"shellagent/termtext"
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
			var ts tries
			r = w.Poll(ctx, func(ctx context.Context) (string, error) {
				if err := ctx.Err(); err != nil {
					return "", err // Poll may try once more after the end: no try
				}
				start := time.Now()
				said, err := probe(ctx)
				ts.record(err, ctx.Err() != nil, time.Since(start))
				return said, err
			})
			if r.Status == acp.StatusFailed {
				r.Text = fmt.Sprintf("exec:%s did not exit 0 within %s: %s.", what, spec.Timeout, ts.said(spec.Timeout))
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

// tries is what the tries of an exec: ready condition came to, as the
// reason its service fails says.
type tries struct {
	n       int
	last    error         // how the last try that ended before the wait did ended
	running time.Duration // how long the last try ran, if the wait's end cut it short; else 0
}

// record counts a try that ended with err, after took; over: the wait
// had ended, and cut it short.
func (ts *tries) record(err error, over bool, took time.Duration) {
	ts.n++
	ts.running = 0
	switch {
	case err == nil:
	case over:
		ts.running = max(took, time.Millisecond)
	default:
		ts.last = err
	}
}

// said says what the tries came to, once the wait of d ran out: how many
// ran, and how the last ended (and the one before it, if the time ran
// out while the last ran).
func (ts *tries) said(d time.Duration) string {
	switch {
	case ts.n == 0:
		return "no try ran"
	case ts.running > 0 && ts.n == 1:
		return fmt.Sprintf("its one try was still running when the %s ran out, and was stopped", d)
	case ts.running > 0:
		text := fmt.Sprintf("%d tries; the last was still running when the %s ran out (it had run %s) and was stopped", ts.n, d, ts.running.Round(time.Millisecond))
		if ts.last != nil {
			text += "; the one before " + tryEnd(ts.last)
		}
		return text
	case ts.n == 1:
		return "its one try " + tryEnd(ts.last)
	}
	return fmt.Sprintf("%d tries; the last %s", ts.n, tryEnd(ts.last))
}

// tryEnd says how a try that ended with err ended, with the last line
// it printed, if it printed one (a ptyio.ProbeExit's Output).
func tryEnd(err error) string {
	if _, ok := err.(*tryLimit); ok {
		return err.Error()
	}
	var exit *ptyio.ProbeExit
	if errors.As(err, &exit) {
		if last, _ := termtext.LastLines(strings.TrimSpace(termtext.Plain(exit.Output)), 1); last != "" {
			return fmt.Sprintf("ended: %v, its last line: %q", err, shorten(last, 120))
		}
	}
	return fmt.Sprintf("ended: %v", err)
}
