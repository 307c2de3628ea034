package kit

import (
	"testing"

	"shellagent/acp"
	"shellagent/supervisor/work"
	"shellagent/supervisor/work/worktest"
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
		h := worktest.NewHost()
		call := h.NewCall(work.CallSpec{}, task) // call_1
		if tt.final {
			call.End(acp.StatusCompleted)
		}
		c := Call{ID: "call_1", h: h}
		if !tt.known {
			c.ID = "call_2"
		}
		c.Fire()
		c.Cancel()
		if task.cancelled != tt.want {
			t.Errorf("%s: cancelled %v, want %v", tt.name, task.cancelled, tt.want)
		}
	}
}

// fakeTask is a task that remembers its cancel.
type fakeTask struct {
	work.Task
	cancellable, cancelled bool
}

func (t *fakeTask) Cancellable() bool { return t.cancellable }
func (t *fakeTask) Cancel()           { t.cancelled = true }
