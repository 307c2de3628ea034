package worktest

import (
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/ptyio"
	"shellagent/supervisor/work"
)

// A Terminal is a terminal of a Host (Host.AddTerminal): a work.Terminal
// with no process. Its command runs (Launched) unless Unstarted, until
// Host.Exit gives it its ExitStatus. What is typed into it is kept;
// nothing reads it. Set its fields before it is used.
type Terminal struct {
	ExitStatus *acp.ExitStatus // its exitStatus (Host.Exit); nil while it runs
	Unstarted  bool            // its command waits for its permission: not launched
	Gone       bool            // the session retired it: Host.Terminal no longer finds it
	// InputCap, if more than 0, is what its input buffer takes of one
	// Write: a longer one is cut there and fails with ptyio.ErrInputFull.
	InputCap int
	Typed    []byte           // what Write took, in order
	Size     acp.TerminalSize // as Resize last set it
	id       string
	ring     *outputbuf.Ring
}

var _ work.Terminal = (*Terminal)(nil)

// ID is its id.
func (t *Terminal) ID() string { return t.id }

// Output is its ring, which the test may write to (1 KiB unless it was
// set when added).
func (t *Terminal) Output() *outputbuf.Ring { return t.ring }

// Exited reports whether Host.Exit ended it.
func (t *Terminal) Exited() bool { return t.ExitStatus != nil }

// Exit is its ExitStatus.
func (t *Terminal) Exit() *acp.ExitStatus { return t.ExitStatus }

// Launched reports whether it is not Unstarted.
func (t *Terminal) Launched() bool { return !t.Unstarted }

// Write keeps data in Typed, up to InputCap.
func (t *Terminal) Write(data []byte) (int, error) {
	if t.InputCap > 0 && len(data) > t.InputCap {
		t.Typed = append(t.Typed, data[:t.InputCap]...)
		return t.InputCap, ptyio.ErrInputFull
	}
	t.Typed = append(t.Typed, data...)
	return len(data), nil
}

// Resize sets Size.
func (t *Terminal) Resize(size acp.TerminalSize) error {
	t.Size = size
	return nil
}

// A Run is a terminal that a kind launched for its tool call
// (Host.Launch): a work.Run with no process. It runs until Host.Exit
// ends it; Stop only marks it stopped (the test makes the exit that
// follows).
type Run struct {
	*Terminal
	Call    work.Call       // the tool call it was launched for
	Spec    work.LaunchSpec // as Launch was given it
	Start   time.Time       // when it started, on the Host's clock
	Stopped bool            // Stop was called
	Listed  bool            // List was called, and it has not exited since
	PID     int             // Pid's answer
	PIDs    []int           // Members' answer
}

var _ work.Run = (*Run)(nil)

// Started is Start.
func (r *Run) Started() time.Time { return r.Start }

// Running reports whether it was launched, has not exited and was not
// stopped.
func (r *Run) Running() bool { return r.Launched() && !r.Exited() && !r.Stopped }

// Retired reports whether it is Gone.
func (r *Run) Retired() bool { return r.Gone }

// Stop marks it Stopped.
func (r *Run) Stop() { r.Stopped = true }

// Pid is PID.
func (r *Run) Pid() int { return r.PID }

// Members is PIDs.
func (r *Run) Members() []int { return r.PIDs }

// List lists it, if it has not exited.
func (r *Run) List() { r.Listed = r.Listed || !r.Exited() }
