package approval

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/work"
)

// A command waits for permission, announced and reported waiting before
// the request, which references its tool call; then each way it ends.
func TestApproval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		foreground bool
		noClient   bool
		then       func(a *Approval, h *fakeHost)
		allowed    bool
		status     string // the tool call's final status; "" while it waits or once allowed
		why        string // its content then
		endTurn    string // the stop reason it ended its turn with
		check      bool   // a client check was reported
	}{
		{name: "allowed in the foreground", foreground: true,
			then: func(_ *Approval, h *fakeHost) { h.answer(0, OptionAllow, nil) }, allowed: true},
		{name: "allowed in the background",
			then: func(_ *Approval, h *fakeHost) { h.answer(0, OptionAllow, nil) }, allowed: true},
		{name: "refused in the foreground", foreground: true,
			then:   func(_ *Approval, h *fakeHost) { h.answer(0, OptionReject, nil) },
			status: acp.StatusFailed, why: "Not run: permission was refused.", endTurn: acp.StopEndTurn},
		{name: "no client to ask", foreground: true, noClient: true,
			status: acp.StatusFailed, why: "Not run: no client is attached to ask for permission.", endTurn: acp.StopEndTurn},
		{name: "session/cancel of the foreground", foreground: true,
			then:   func(a *Approval, _ *fakeHost) { a.CancelTurn() },
			status: acp.StatusCancelled, why: "Cancelled by session/cancel while waiting for permission.", endTurn: acp.StopCancelled},
		{name: "session/cancel leaves background work asking, then it is answered cancelled",
			then: func(a *Approval, h *fakeHost) {
				a.SessionCancelled()
				if a.call.Final() {
					t.Error("session/cancel ended background work")
				}
				h.answer(0, "", nil)
			},
			status: acp.StatusFailed, why: "Not run: the permission request was cancelled.", endTurn: acp.StopEndTurn, check: true},
		{name: "tool_call/cancel",
			then:   func(a *Approval, _ *fakeHost) { a.Cancel() },
			status: acp.StatusCancelled, why: "Cancelled before it was allowed to run."},
		{name: "closed",
			then:   func(a *Approval, _ *fakeHost) { a.Close() },
			status: acp.StatusCancelled, why: ClosedAsking},
		{name: "unanswered for an upgrade", foreground: true,
			then:   func(a *Approval, _ *fakeHost) { a.Unanswered(errors.New("upgraded")) },
			status: acp.StatusFailed, why: "Not run: the permission request got no answer (upgraded).", endTurn: acp.StopEndTurn},
		{name: "asked again of the client that took the session; the old answer changes nothing",
			then: func(a *Approval, h *fakeHost) {
				a.Reask()
				if len(h.asked) != 2 || h.asked[0].ctx.Err() == nil {
					t.Errorf("reask: %d requests, the first withdrawn: %v", len(h.asked), h.asked[0].ctx.Err())
				}
				h.answer(0, OptionAllow, nil)
				h.answer(1, OptionReject, nil)
			},
			status: acp.StatusFailed, why: "Not run: permission was refused.", endTurn: acp.StopEndTurn},
	}
	for _, tt := range tests {
		h := &fakeHost{now: time.Unix(1000, 0), client: !tt.noClient}
		a := New(h, "make test", tt.foreground)
		c := h.call
		if c.sent != 0 || c.spec.Title != "make test" || !c.spec.Asking || c.spec.Kind != "execute" {
			t.Errorf("%s: new call %+v, sent %d", tt.name, c.spec, c.sent)
		}
		a.Ask()
		if c.sent != 1 || h.waiting != 1 {
			t.Errorf("%s: sent %d, reported waiting %d times", tt.name, c.sent, h.waiting)
		}
		if !tt.noClient {
			r := h.asked[0].req
			if r.Subject.ToolCallID != "call_1" || r.Subject.Command != "make test" || r.Subject.Cwd != "/p" || r.Title != "Run make test" {
				t.Errorf("%s: request %+v", tt.name, r)
			}
			if a.Cancellable() == tt.foreground {
				t.Errorf("%s: cancellable %v in the foreground %v", tt.name, a.Cancellable(), tt.foreground)
			}
			h.now = h.now.Add(3 * time.Second)
			if got := a.Listing(h.now); got != "call_1  command  make test  age 3s  pending, waiting for permission" {
				t.Errorf("%s: listing %q", tt.name, got)
			}
		}
		if tt.then != nil {
			tt.then(a, h)
		}
		if tt.allowed != (h.allowed == "make test") || c.status != tt.status || c.why != tt.why || h.endTurn != tt.endTurn || (h.check != "") != tt.check {
			t.Errorf("%s: allowed %q, status %q %q, turn ended %q, check %q", tt.name, h.allowed, c.status, c.why, h.endTurn, h.check)
		}
		for i, r := range h.asked {
			if r.ctx.Err() == nil {
				t.Errorf("%s: request %d left open", tt.name, i)
			}
		}
		if a.Cancellable() {
			t.Errorf("%s: cancellable once it ended", tt.name)
		}
	}
}

type asked struct {
	ctx    context.Context
	req    *acp.PermissionRequest
	answer func(*acp.PermissionResponse, error)
}

type fakeHost struct {
	now     time.Time
	client  bool
	call    *fakeCall
	asked   []asked
	waiting int
	allowed string
	endTurn string
	check   string
}

// answer answers request i with option (none: cancelled) or err.
func (h *fakeHost) answer(i int, option string, err error) {
	var resp acp.PermissionResponse
	resp.Outcome.Outcome, resp.Outcome.OptionID = "selected", option
	if option == "" {
		resp.Outcome.Outcome = "cancelled"
	}
	h.asked[i].answer(&resp, err)
}

func (h *fakeHost) Ask(ctx context.Context, req *acp.PermissionRequest, answer func(*acp.PermissionResponse, error)) bool {
	if !h.client {
		return false
	}
	h.asked = append(h.asked, asked{ctx, req, answer})
	return true
}
func (h *fakeHost) Waiting(work.Call)                  { h.waiting++ }
func (h *fakeHost) Allowed(_ work.Call, line string)   { h.allowed = line }
func (h *fakeHost) CheckClient(rule, detail string)    { h.check = rule + ": " + detail }
func (h *fakeHost) EndTurn(_ work.Call, reason string) { h.endTurn = reason }

func (h *fakeHost) Now() time.Time                           { return h.now }
func (h *fakeHost) After(time.Duration, func()) work.Timer   { return nil }
func (h *fakeHost) Do(f func())                              { f() }
func (h *fakeHost) Open() bool                               { return true }
func (h *fakeHost) Cwd() string                              { return "/p" }
func (h *fakeHost) Say(string)                               {}
func (h *fakeHost) Slow()                                    {}
func (h *fakeHost) Terminal(string) work.Terminal            { return nil }
func (h *fakeHost) Find(string) (work.Call, work.Task, bool) { return nil, nil, false }
func (h *fakeHost) Run(string, any)                          {}
func (h *fakeHost) RunOf(any) work.RunID                     { return work.NoRun }
func (h *fakeHost) DropRuns(any)                             {}
func (h *fakeHost) NewCall(spec work.CallSpec, _ work.Task) work.Call {
	h.call = &fakeCall{spec: spec}
	return h.call
}

type fakeCall struct {
	spec   work.CallSpec
	status string
	why    string
	sent   int
}

func (c *fakeCall) ID() string    { return "call_1" }
func (c *fakeCall) Title() string { return c.spec.Title }
func (c *fakeCall) Status() string {
	if c.status == "" {
		return acp.StatusPending
	}
	return c.status
}
func (c *fakeCall) Final() bool       { return c.status != "" }
func (c *fakeCall) Send()             { c.sent++ }
func (c *fakeCall) List()             {}
func (c *fakeCall) End(status string) { c.status = status }
func (c *fakeCall) SetPaused(bool)    {}
func (c *fakeCall) SetContent(content ...acp.ToolCallContent) {
	var b strings.Builder
	for _, it := range content {
		b.WriteString(it.Content.Text)
	}
	c.why = b.String()
}
