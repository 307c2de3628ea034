package service

import (
	"encoding/json"
	"fmt"

	"shellagent/supervisor/work"
)

// Kind is a service as a kind of work (work.Kind): its frozen form is a
// Frozen, written under "Service" (Service.HandOver). Its Thaw is given
// a Host: the service goes on in the session's stack, to which the
// session then restores the stack itself (Stack.Restore).
var Kind = work.Kind{Name: kindName, Thaw: thaw}

// kindName is what a service's frozen form is written under.
const kindName = "Service"

// A Host is the session a service is thawed in (Kind): a work.RunHost
// that holds the session's stack.
type Host interface {
	work.RunHost
	// Stack is the session's stack, made on first use.
	Stack() *Stack
}

// thaw makes frozen the service of tool call c again, in the stack of
// session h (a Host).
func thaw(h work.Host, c work.Call, frozen json.RawMessage) (work.Task, error) {
	sh, ok := h.(Host)
	if !ok {
		return nil, fmt.Errorf("thaw service %s: its session holds no stack", c.ID())
	}
	var f Frozen
	if err := json.Unmarshal(frozen, &f); err != nil {
		return nil, err
	}
	return Thaw(sh, sh.Stack(), c, &f), nil
}
