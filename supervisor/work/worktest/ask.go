package worktest

import (
	"context"

	"shellagent/acp"
	"shellagent/supervisor/work"
)

// Permissions is what a fake session adds to its Host when its commands
// wait for the user's permission: the methods supervisor/approval's Host
// adds to work.Host. It keeps each request for permission, which the
// test answers (Request.Answer), and what the session would have done
// with the approval's tool call. A test gives the kind both, in a type
// of its own that embeds a *Host and a *Permissions (Host keeps at most
// 25 methods). Make it with NewPermissions; its methods run on the
// test's goroutine.
type Permissions struct {
	NoClient bool        // no client is attached: Ask sends nothing
	Requests []*Request  // every request Ask sent, in order
	Waits    []work.Call // every call reported Waiting, in order
	// Allows is the command line of every Allowed, in order.
	Allows []string
	h      *Host
}

// NewPermissions returns the Permissions of h, with a client attached.
func NewPermissions(h *Host) *Permissions { return &Permissions{h: h} }

// A Request is a request for permission that Permissions.Ask sent.
type Request struct {
	Ctx    context.Context // it is withdrawn once Ctx ends
	Req    *acp.PermissionRequest
	answer func(*acp.PermissionResponse, error)
}

// Answer answers it, as the client would, with option selected, or
// cancelled if option is "", or with err, the error of a request that
// got no answer.
func (r *Request) Answer(option string, err error) {
	var resp acp.PermissionResponse
	resp.Outcome.Outcome, resp.Outcome.OptionID = "selected", option
	if option == "" {
		resp.Outcome.Outcome = "cancelled"
	}
	r.answer(&resp, err)
}

// Ask keeps req in Requests, and reports true, unless NoClient: then it
// keeps nothing and reports false.
func (p *Permissions) Ask(ctx context.Context, req *acp.PermissionRequest, answer func(*acp.PermissionResponse, error)) bool {
	if p.NoClient {
		return false
	}
	p.Requests = append(p.Requests, &Request{Ctx: ctx, Req: req, answer: answer})
	return true
}

// Waiting keeps c in Waits, and lists it unless its work holds a turn
// (Turn.Hold) on the Host, as the session does.
func (p *Permissions) Waiting(c work.Call) {
	p.Waits = append(p.Waits, c)
	for _, t := range p.h.turns {
		if t.Call == c && t.Holds() {
			return
		}
	}
	c.List()
}

// Allowed keeps line in Allows; c, a Call of the Host, is a command's
// from then on: its Task is nil.
func (p *Permissions) Allowed(c work.Call, line string) {
	p.Allows = append(p.Allows, line)
	if c, ok := c.(*Call); ok {
		c.Task = nil
	}
}

// Askers calls tell with each task that waits for the client's answer
// (work.Asker) of a call not final, the oldest first, as the session
// does on a resume from another connection (Reask) and on an upgrade in
// place (Unanswered).
func (p *Permissions) Askers(tell func(work.Asker)) {
	for _, c := range p.h.Calls {
		if a, ok := c.Task.(work.Asker); ok && !c.Final() {
			tell(a)
		}
	}
}
