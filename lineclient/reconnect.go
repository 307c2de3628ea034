package lineclient

import (
	"context"
	"fmt"
	"time"
)

// Reconnecting: with a daemon, the end of the agent's output while the
// session runs is most often the daemon's upgrade in place, which closes
// every connection while the session's work runs on in the new image.
// The client then asks Config.Reconnect whether the daemon still has the
// session live; if it does, it starts the agent again, resumes the
// session (what its terminals wrote meanwhile is shown, the rest was
// shown before) and goes on; if not, it ends as when the agent exited.

// Bounds of reconnecting: at most maxReconnects within reconnectWindow,
// so that an agent that keeps failing is not started again and again.
const (
	maxReconnects   = 3
	reconnectWindow = time.Minute
)

// mayReconnect reports whether the client may reconnect now (the session
// runs, or the start-up has named it: a reconnect starting it again, or
// the first start reattaching to it or setting its options; and no other
// client took it), and if so counts the reconnect.
func (c *client) mayReconnect(now time.Time) bool {
	return c.reconnectable() && c.reconnects.take(now)
}

// reconnectable reports whether the client would reconnect but for the
// bound on how often.
func (c *client) reconnectable() bool {
	again := c.phase == starting && c.sess != nil // the agent has gone in the middle of the start-up
	return c.cfg.Daemon && c.cfg.Reconnect != nil && (c.phase == running || again) && c.sess != nil && !c.taken
}

// limitNote is what the client says when the bound on reconnects keeps
// it from reconnecting to session id: the session may well run on.
func limitNote(id string) string {
	return fmt.Sprintf("the connection to the daemon ended again, after %d reconnects within %s: not reconnecting; %s may run on in the daemon (shellagent client --daemon --resume %s)",
		maxReconnects, reconnectWindow, id, id)
}

// reconnects holds when the client reconnected lately.
type reconnects []time.Time

// take reports whether a reconnect now stays within maxReconnects in
// reconnectWindow, and if so counts it.
func (r *reconnects) take(now time.Time) bool {
	recent := (*r)[:0]
	for _, at := range *r {
		if now.Sub(at) < reconnectWindow {
			recent = append(recent, at)
		}
	}
	*r = recent
	if len(recent) >= maxReconnects {
		return false
	}
	*r = append(*r, now)
	return true
}

// startReconnect asks Config.Reconnect, from a goroutine of its own,
// whether the daemon still has the session live. Until it answers the
// client is starting again: input waits, and an interrupt ends it.
func (c *client) startReconnect(ctx context.Context) {
	c.p.note("the connection to the daemon ended (an upgrade in place ends it): reconnecting to " + c.sess.ID)
	c.phase = starting
	c.boot.timer = nil // a start-up request of the agent that went is not late
	answer := make(chan reconnectAnswer, 1)
	c.reconnect = answer
	id := c.sess.ID
	go func() {
		agent, err := c.cfg.Reconnect(ctx, id)
		answer <- reconnectAnswer{agent, err}
	}()
}

// reconnectAnswer is what Config.Reconnect returned.
type reconnectAnswer struct {
	agent []string
	err   error
}

// reconnected takes Reconnect's answer: it starts the agent again and
// resumes the session, or ends the client.
func (c *client) reconnected(answer reconnectAnswer) {
	c.reconnect = nil
	if answer.err != nil {
		c.p.note(answer.err.Error())
		c.fail(ErrAgentExited)
		c.phase = finished
		return
	}
	// The command Run was given, unless Reconnect names another: a daemon
	// upgraded to another build and back is this client's build again.
	c.cfg.Agent = c.ownAgent
	if answer.agent != nil {
		c.cfg.Agent = answer.agent
	}
	if !c.boot.newAgent() {
		return
	}
	if n := len(c.perms.open); n > 0 {
		c.perms.open = nil // the agent answered them as unanswered
		c.p.note(fmt.Sprintf("%d permission request(s) went with the connection", n))
	}
	if w := c.wait; w != nil && !w.ended {
		c.p.note(fmt.Sprintf("the end of %q went with the connection: going on", w.line))
		c.wait = nil
	}
	c.boot.again = true
	c.boot.start()
}

// mayStartOver reports whether the client may start the agent again
// from its first request, its first start-up having ended before it named
// the session (initialize, session/list or session/new unanswered), and
// if so counts it as a reconnect. A session/new unanswered opened no
// session: the daemon answers every request it has read before an
// upgrade closes the connection (docs/daemon.md), so it was never read.
func (s *startup) mayStartOver(now time.Time) bool {
	c := s.c
	if !c.cfg.Daemon || c.cfg.Reconnect == nil || c.phase != starting || c.sess != nil || s.again ||
		s.method != "initialize" && s.method != "session/list" && s.method != "session/new" {
		return false
	}
	return c.reconnects.take(now)
}

// startOver starts the agent again and the start-up from its first
// request, once the first start-up ended before it named the session
// (mayStartOver). The agent is the one Run was given: with no session
// named, Config.Reconnect has none to look for.
func (s *startup) startOver() {
	s.c.p.note("the connection to the daemon ended while the client started (an upgrade in place ends it): starting again")
	s.timer = nil // a start-up request of the agent that went is not late
	if s.newAgent() {
		s.start()
	}
}

// newAgent ends the agent that went and starts it again, with a
// connection of its own; if it cannot, it says why and the client ends.
func (s *startup) newAgent() bool {
	c := s.c
	c.rpc.close()
	c.agent.stop(true, startGrace, c.cfg.Interrupts, c.p.note) // Safe: now, it returns nil.
	a, err := startAgent(c.cfg)
	if err != nil {
		c.p.note("cannot start the agent again: " + err.Error())
		c.fail(err)
		c.phase = finished
		return false
	}
	c.agent, c.rpc = a, newConn(a.stdout, a.stdin, c.cfg.Trace)
	c.perms.rpc = c.rpc
	return true
}
