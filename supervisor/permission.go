package supervisor

import (
	"context"

	"shellagent/acp"
	"shellagent/supervisor/approval"
	"shellagent/supervisor/work"
)

// In permission mode "ask" a command waits for the user's permission
// before it runs: an approval (package supervisor/approval), a kind of
// work through supervisor/work whose session is an approval.Host (host,
// below). Its tool call is callAsking meanwhile. What runs once it is
// allowed is the session's: the foreground turn's command (startForeground)
// or a background command (launch, handOff).

// ask makes line wait for the user's permission: in the foreground turn
// fg, which holds the foreground meanwhile (turnAsking), or, if fg is nil,
// as background work.
func (st *state) ask(line string, fg *turn) {
	a := approval.New(host{st}, line, fg != nil)
	if fg != nil {
		fg.call, fg.fore = a.Call().(callHandle).c, kindForeground{a} // Safe: every work.Call is a callHandle.
		st.turns.take(fg, turnAsking)
	}
	a.Ask()
}

// askers tells what becomes of the session's client to the tasks that
// wait for its answer (work.Asker: the approvals), oldest first.
func askers(st *state, tell func(work.Asker)) {
	for _, c := range st.work.unfinished() {
		if a, ok := taskOf(c).(work.Asker); ok {
			tell(a)
		}
	}
}

var _ approval.Host = host{}

func (h host) Ask(ctx context.Context, req *acp.PermissionRequest, answer func(*acp.PermissionResponse, error)) bool {
	return askClient(ctx, h.st, req, answer)
}

// askClient sends req, with the session's id, to the client the session
// reports to, and calls answer on the actor, in an entry of its own, with
// the client's answer, or with an error once ctx ends (the request is then
// withdrawn) or the connection closes. It reports false if no client is
// attached: nothing is sent, answer is never called. Every permission
// request of the session goes out here, an approval's (host.Ask) as a
// scenario's (scene.Ask), so that the client checks see every answer
// (checkAnswer).
func askClient(ctx context.Context, st *state, req *acp.PermissionRequest, answer func(*acp.PermissionResponse, error)) bool {
	client, s := st.out.client, st.s
	if client == nil {
		return false
	}
	req.SessionID = s.id
	q := st.out.asks.Open(req.Subject)
	client.RequestPermission(ctx, req, func(resp *acp.PermissionResponse, err error) {
		s.do(func(st *state) {
			checkAnswer(st, client, q, resp, err)
			answer(resp, err)
		})
	})
	return true
}

func (h host) Waiting(c work.Call) {
	st, call := h.st, c.(callHandle).c // Safe: every work.Call is a callHandle.
	if fg := st.turns.fg; fg != nil && fg.call == call {
		st.transition(acp.StateRequiresAction, "")
		return
	}
	st.list.add(listItem{call: call})
	st.reportState("") // the list changed
}

func (h host) Allowed(c work.Call, line string) {
	st, call := h.st, c.(callHandle).c // Safe: every work.Call is a callHandle.
	call.task = nil                    // a command's tool call from now on
	if fg := st.turns.fg; fg != nil && fg.call == call {
		fg.fore, fg.state = commandRun{}, turnRunning
		st.transition(acp.StateRunning, "")
		st.startForeground(fg)
		return
	}
	if t := st.launch(call, line, launchOptions{}); t != nil {
		st.list.replaceCall(call, t)
		st.handOff(t, "Started in the background.")
	}
}
