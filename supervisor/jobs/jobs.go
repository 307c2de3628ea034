// Package jobs is a kind of work of a session (package supervisor, through
// supervisor/work): a scheduled wakeup (/after) or a recurring job
// (/every). jobs.go holds the arguments, the job, its firings, and its
// frozen form for an upgrade in place; commands.go the entries of /after
// and /every in the session's command table (Commands).
package jobs

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/work"
)

// A Job is a scheduled wakeup (/after) or a recurring job (/every): a tool
// call that stays pending and listed, with no process of its own. Its
// state is its tool call's: scheduled until a wakeup fires or the job is
// cancelled, then final. When it fires, its command runs as new
// foreground work, a turn of its own (RFD "Tool call statuses for
// background work": statuses never go back to pending; the firing is not
// the tool call running). It is owned by its session's actor.
type Job struct {
	h        work.Host
	call     work.Call
	line     string
	schedule string        // "after 5m0s", "every 30s"
	every    time.Duration // 0 for a one-shot wakeup
	created  time.Time
	next     time.Time
	timer    work.Timer
	skipped  work.RunID // the run during which a firing was skipped and said so
}

// MinEvery is the shortest interval of a recurring job: a job that fires
// faster would keep the foreground busy and flood the conversation.
const MinEvery = time.Second

// Parse reads the arguments of /after, or of /every (every): a delay and
// a command line. problem, if not empty, says what is wrong with them.
func Parse(every bool, rest string) (delay time.Duration, line, problem string) {
	name := "after"
	if every {
		name = "every"
	}
	durText, cmd, _ := strings.Cut(rest, " ")
	cmd = strings.TrimSpace(cmd)
	if durText == "" || cmd == "" {
		return 0, "", fmt.Sprintf("/%s needs a duration and a command", name)
	}
	d, err := time.ParseDuration(durText)
	switch {
	case err != nil:
		return 0, "", fmt.Sprintf("/%s: %q is not a duration", name, durText)
	case d <= 0:
		return 0, "", fmt.Sprintf("/%s: the duration must be more than 0, got %s", name, durText)
	case every && d < MinEvery:
		return 0, "", fmt.Sprintf("/every: the interval must be at least %s, got %s", MinEvery, durText)
	}
	return d, cmd, ""
}

// Schedule serves /after and /every (every) in the session h: line is to
// run after delay, or every delay. The tool call is announced pending and
// cancellable, then listed. It returns the job.
func Schedule(h work.Host, line string, delay time.Duration, every bool) *Job {
	j := &Job{h: h, line: line, schedule: "after " + delay.String(), created: h.Now()}
	if every {
		j.every, j.schedule = delay, "every "+delay.String()
	}
	j.call = h.NewCall(work.CallSpec{
		Kind: "other", Title: j.schedule + ": " + line, Scheduled: true,
		Input: map[string]string{"command": line, "cwd": h.Cwd(), "schedule": j.schedule},
	}, j)
	j.call.Send()
	j.call.List()
	j.arm(delay)
	return j
}

// Call returns the job's tool call.
func (j *Job) Call() work.Call { return j.call }

// Listing implements work.Task.
func (j *Job) Listing(now time.Time) string {
	return fmt.Sprintf("%s  %s  %s  age %s  %s, next run in %s", j.call.ID(), j.schedule, j.line, work.Age(now.Sub(j.created)), j.call.Status(), work.Age(j.next.Sub(now)))
}

// Cancellable implements work.Task: a job is cancelled until it ends.
func (j *Job) Cancellable() bool { return true }

// Cancel implements work.Task: no more firings, and a firing that waits
// for the foreground is dropped.
func (j *Job) Cancel() {
	j.h.DropRuns(j)
	j.end()
}

// Close implements work.Task.
func (j *Job) Close() { j.end() }

// arm makes the job fire after d.
func (j *Job) arm(d time.Duration) {
	j.next = j.h.Now().Add(d)
	j.timer = j.h.After(d, j.fire)
}

// Fire fires the job now, if it is scheduled, in place of its next
// firing (the kit's Call.Fire). On the actor.
func (j *Job) Fire() {
	if j.call.Final() {
		return
	}
	j.timer.Stop()
	j.fire()
}

// fire runs a firing of the job as new foreground work: at once, or held
// behind the current foreground work; unless the job says it is not due
// (fired).
func (j *Job) fire() {
	if !j.h.Open() || !j.fired(j.h.RunOf(j)) {
		return
	}
	j.h.Run(j.line, j)
}

// fired serves a firing of j and reports whether its command runs now,
// as new foreground work (fire). A wakeup completes first and leaves the
// list in the same state_update that reports the new work running (or
// queued behind the current foreground work). A recurring job whose
// previous run (run) still holds or waits for the foreground skips this
// firing, and says so once per such run. A job that has ended does not
// run.
func (j *Job) fired(run work.RunID) bool {
	if j.call.Final() {
		return false
	}
	if j.every == 0 {
		j.call.End(acp.StatusCompleted)
		return true
	}
	j.arm(j.every)
	if run == work.NoRun {
		return true
	}
	if j.skipped != run {
		j.skipped = run
		j.h.Say(fmt.Sprintf("%s (%s): skipped this run; the previous run is still going. Runs are skipped silently until it ends.", j.call.Title(), j.call.ID()))
	}
	return false
}

// end ends a job: no more firings; cancelled, then unlisted. A firing of
// it that waits for the foreground is the caller's to drop.
func (j *Job) end() {
	if j.call.Final() {
		return
	}
	j.timer.Stop()
	j.call.End(acp.StatusCancelled)
}

// Frozen is a scheduled job as an upgrade in place hands it over
// (Task.HandOver): the new image arms it for the same next run. Its
// encoding is the upgrade's format: its fields are never renamed.
type Frozen struct {
	Line, Schedule string
	Every          time.Duration
	Created, Next  time.Time
}

// HandOver implements work.Task.
func (j *Job) HandOver() (kind string, frozen any) {
	return kindName, &Frozen{Line: j.line, Schedule: j.schedule, Every: j.every, Created: j.created, Next: j.next}
}

// Kind is the kind of work of a job.
var Kind = work.Kind{Name: kindName, Thaw: thaw}

// kindName is what a job's frozen form is written under.
const kindName = "Job"

// thaw makes frozen the task of tool call c again, in the new image of
// an upgrade in place, armed for its next run (at once if that has
// passed).
func thaw(h work.Host, c work.Call, frozen json.RawMessage) (work.Task, error) {
	var f Frozen
	if err := json.Unmarshal(frozen, &f); err != nil {
		return nil, fmt.Errorf("thaw job %s: %w", c.ID(), err)
	}
	j := &Job{h: h, call: c, line: f.Line, schedule: f.Schedule, every: f.Every, created: f.Created}
	if !c.Final() {
		j.arm(max(0, f.Next.Sub(h.Now())))
	}
	return j, nil
}
