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
	again := c.phase == starting && c.sess != nil // the agent has gone in the middle of the start-up
	if !c.cfg.Daemon || c.cfg.Reconnect == nil || (c.phase != running && !again) || c.sess == nil || c.taken {
		return false
	}
	recent := c.reconnectedAt[:0]
	for _, at := range c.reconnectedAt {
		if now.Sub(at) < reconnectWindow {
			recent = append(recent, at)
		}
	}
	c.reconnectedAt = recent
	if len(recent) >= maxReconnects {
		return false
	}
	c.reconnectedAt = append(c.reconnectedAt, now)
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
	c.rpc.close()
	c.agent.stop(true, startGrace, c.cfg.Interrupts, c.p.note) // Safe: now, it returns nil.
	a, err := startAgent(c.cfg)
	if err != nil {
		c.p.note("cannot start the agent again: " + err.Error())
		c.fail(err)
		c.phase = finished
		return
	}
	c.agent, c.rpc = a, newConn(a.stdout, a.stdin, c.cfg.Trace)
	c.perms.rpc = c.rpc
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
