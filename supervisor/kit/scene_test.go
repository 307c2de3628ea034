package kit

import (
	"testing"

	"shellagent/supervisor/work"
)

// Call.Cancel cancels the task of a tool call the kit started, as an
// accepted tool_call/cancel does, only while the call is not final and
// its task is cancellable; Call.Fire leaves what is not a job alone.
func TestCallCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		known       bool
		final       bool
		cancellable bool
		want        bool
	}{
		{"running", true, false, true, true},
		{"final", true, true, true, false},
		{"not cancellable", true, false, false, false},
		{"unknown", false, false, true, false},
	}
	for _, tt := range tests {
		task := &fakeTask{cancellable: tt.cancellable}
		h := &fakeWork{id: "call_1", call: fakeCall{final: tt.final}, task: task}
		if !tt.known {
			h.id = "call_2"
		}
		c := Call{ID: "call_1", h: h}
		c.Fire()
		c.Cancel()
		if task.cancelled != tt.want {
			t.Errorf("%s: cancelled %v, want %v", tt.name, task.cancelled, tt.want)
		}
	}
}

// fakeWork is a session as a kind of work sees it, which knows one tool
// call; it serves Find alone.
type fakeWork struct {
	work.Host
	id   string
	call fakeCall
	task work.Task
}

func (h *fakeWork) Find(id string) (work.Call, work.Task, bool) {
	if id != h.id {
		return nil, nil, false
	}
	return h.call, h.task, false
}

// fakeCall is a tool call that says only whether it is final.
type fakeCall struct {
	work.Call
	final bool
}

func (c fakeCall) Final() bool { return c.final }

// fakeTask is a task that remembers its cancel.
type fakeTask struct {
	work.Task
	cancellable, cancelled bool
}

func (t *fakeTask) Cancellable() bool { return t.cancellable }
func (t *fakeTask) Cancel()           { t.cancelled = true }
