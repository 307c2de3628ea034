package approval

import (
	"errors"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/work"
	"shellagent/supervisor/work/worktest"
)

// host is the fake session an approval is given: worktest's Host, with
// Permissions.
type host struct {
	*worktest.Host
	*worktest.Permissions
}

// A command waits for permission, announced and reported waiting before
// the request, which references its tool call; then each way it ends.
func TestApproval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		foreground bool
		noClient   bool
		then       func(a *Approval, p *worktest.Permissions)
		allowed    bool
		status     string // the tool call's final status; "" while it waits or once allowed
		why        string // its content then
		endTurn    string // the stop reason it ended its foreground turn with
	}{
		{name: "allowed in the foreground", foreground: true,
			then: func(_ *Approval, p *worktest.Permissions) { p.Requests[0].Answer(OptionAllow, nil) }, allowed: true},
		{name: "allowed in the background",
			then: func(_ *Approval, p *worktest.Permissions) { p.Requests[0].Answer(OptionAllow, nil) }, allowed: true},
		{name: "refused in the foreground", foreground: true,
			then:   func(_ *Approval, p *worktest.Permissions) { p.Requests[0].Answer(OptionReject, nil) },
			status: acp.StatusFailed, why: "Not run: permission was refused.", endTurn: acp.StopEndTurn},
		{name: "no client to ask", foreground: true, noClient: true,
			status: acp.StatusFailed, why: "Not run: no client is attached to ask for permission.", endTurn: acp.StopEndTurn},
		{name: "session/cancel of the foreground", foreground: true,
			then:   func(a *Approval, _ *worktest.Permissions) { a.CancelTurn() },
			status: acp.StatusCancelled, why: "Cancelled by session/cancel while waiting for permission.", endTurn: acp.StopCancelled},
		{name: "answered cancelled in the background",
			then:   func(_ *Approval, p *worktest.Permissions) { p.Requests[0].Answer("", nil) },
			status: acp.StatusFailed, why: "Not run: the permission request was cancelled."},
		{name: "tool_call/cancel",
			then:   func(a *Approval, _ *worktest.Permissions) { a.Cancel() },
			status: acp.StatusCancelled, why: "Cancelled before it was allowed to run."},
		{name: "closed",
			then:   func(a *Approval, _ *worktest.Permissions) { a.Close() },
			status: acp.StatusCancelled, why: ClosedAsking},
		{name: "unanswered for an upgrade", foreground: true,
			then: func(_ *Approval, p *worktest.Permissions) {
				p.Askers(func(a work.Asker) { a.Unanswered(errors.New("upgraded")) })
			},
			status: acp.StatusFailed, why: "Not run: the permission request got no answer (upgraded).", endTurn: acp.StopEndTurn},
		{name: "asked again of the client that took the session; the old answer changes nothing",
			then: func(_ *Approval, p *worktest.Permissions) {
				p.Askers(work.Asker.Reask)
				if len(p.Requests) != 2 || p.Requests[0].Ctx.Err() == nil {
					t.Errorf("reask: %d requests, the first withdrawn: %v", len(p.Requests), p.Requests[0].Ctx.Err())
				}
				p.Requests[0].Answer(OptionAllow, nil)
				p.Requests[1].Answer(OptionReject, nil)
			},
			status: acp.StatusFailed, why: "Not run: permission was refused."},
	}
	for _, tt := range tests {
		h := worktest.NewHost()
		p := worktest.NewPermissions(h)
		p.NoClient = tt.noClient
		a := New(host{h, p}, "make test", tt.foreground)
		c := h.Calls[0]
		if c.Sent != 0 || c.Spec.Title != "make test" || !c.Spec.Asking || c.Spec.Kind != "execute" || c.Task != a {
			t.Errorf("%s: new call %+v, sent %d", tt.name, c.Spec, c.Sent)
		}
		turn := h.NewTurn() // the session's foreground turn, which the approval holds in the foreground
		if tt.foreground {
			turn.Hold(c, a)
		}
		a.Ask()
		sent := 1 // its pending state
		if tt.noClient {
			sent++ // and its end
		}
		if c.Sent != sent || len(p.Waits) != 1 || p.Waits[0] != c || c.Listed == tt.foreground {
			t.Errorf("%s: sent %d, reported waiting %d times, listed %v", tt.name, c.Sent, len(p.Waits), c.Listed)
		}
		if !tt.noClient {
			r := p.Requests[0].Req
			if r.Subject.ToolCallID != "call_1" || r.Subject.Command != "make test" || r.Subject.Cwd != "/p" || r.Title != "Run make test" {
				t.Errorf("%s: request %+v", tt.name, r)
			}
			if a.Cancellable() == tt.foreground {
				t.Errorf("%s: cancellable %v in the foreground %v", tt.name, a.Cancellable(), tt.foreground)
			}
			h.Clock.Advance(3 * time.Second)
			if got := a.Listing(h.Now()); got != "call_1  command  make test  age 3s  pending, waiting for permission" {
				t.Errorf("%s: listing %q", tt.name, got)
			}
		}
		if tt.then != nil {
			tt.then(a, p)
		}
		allowed := len(p.Allows) == 1 && p.Allows[0] == "make test"
		var why strings.Builder
		for _, it := range c.Content {
			why.WriteString(it.Content.Text)
		}
		status := c.Status()
		if !c.Final() {
			status = ""
		}
		if tt.allowed != allowed || status != tt.status || why.String() != tt.why || turn.Reason != tt.endTurn {
			t.Errorf("%s: allowed %q, status %q %q, turn ended %q", tt.name, p.Allows, status, why.String(), turn.Reason)
		}
		for i, r := range p.Requests {
			if r.Ctx.Err() == nil {
				t.Errorf("%s: request %d left open", tt.name, i)
			}
		}
		if a.Cancellable() {
			t.Errorf("%s: cancellable once it ended", tt.name)
		}
	}
}
