package jobs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/supervisor/work"
	"shellagent/supervisor/work/worktest"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		every   bool
		rest    string
		delay   time.Duration
		line    string
		problem string
	}{
		{false, "5m make test", 5 * time.Minute, "make test", ""},
		{true, "30s  git fetch ", 30 * time.Second, "git fetch", ""},
		{false, "5m", 0, "", "/after needs a duration and a command"},
		{false, "soon echo", 0, "", `/after: "soon" is not a duration`},
		{false, "-1s echo", 0, "", "/after: the duration must be more than 0, got -1s"},
		{true, "500ms echo", 0, "", "/every: the interval must be at least 1s, got 500ms"},
	}
	for _, tt := range tests {
		d, line, problem := Parse(tt.every, tt.rest)
		if d != tt.delay || line != tt.line || problem != tt.problem {
			t.Errorf("Parse(%v, %q) = %v, %q, %q; want %v, %q, %q", tt.every, tt.rest, d, line, problem, tt.delay, tt.line, tt.problem)
		}
	}
}

// A recurring job runs at each firing unless its previous run still holds
// or waits for the foreground: then it skips, saying so once per run;
// cancelled, it fires no more, and its waiting run is dropped. Its frozen
// form thaws into a job armed for the same next run.
func TestEverySkipsOncePerRunAndThaws(t *testing.T) {
	t.Parallel()
	h := worktest.NewHost()
	h.Clock.Set(time.Unix(1000, 0))
	j := Schedule(h, "make", 30*time.Second, true)
	c := h.Calls[0]
	if c.Spec.Title != "every 30s: make" || !c.Spec.Scheduled || !c.Listed || c.Sent != 1 || h.Clock.Timers[0].D != 30*time.Second {
		t.Fatalf("scheduled as %+v, timers %v", c, h.Clock.Timers)
	}
	h.Clock.Timers[0].Fire()
	if len(h.Ran) != 1 || h.Ran[0].Line != "make" {
		t.Fatalf("the first firing ran %v", h.Ran)
	}
	// Its run still goes: it holds the foreground.
	h.Clock.Timers[1].Fire()
	h.Clock.Timers[2].Fire()
	if len(h.Ran) != 1 || len(h.Said) != 1 || !strings.Contains(h.Said[0], "skipped") {
		t.Errorf("firings during a run: ran %v, said %q; want one skip said", h.Ran, h.Said)
	}
	kind, frozen := j.HandOver()
	data, err := json.Marshal(frozen)
	if err != nil || kind != "Job" {
		t.Fatalf("HandOver: %s, %v", kind, err)
	}
	j.Cancel()
	if c.Status() != acp.StatusCancelled || h.Drops != 1 || !h.Clock.Timers[3].Stopped {
		t.Errorf("cancel: status %q, dropped %d", c.Status(), h.Drops)
	}

	h2 := worktest.NewHost()
	h2.Clock.Set(time.Unix(1010, 0))
	_, task, err := h2.Thaw(Kind, work.CallSpec{Scheduled: true}, data)
	if err != nil || task.Listing(h2.Now()) != "call_1  every 30s  make  age 10s  pending, next run in 20s" || len(h2.Clock.Timers) != 1 || h2.Clock.Timers[0].D != 20*time.Second {
		t.Errorf("thawed: %v, %q", err, task.Listing(h2.Now()))
	}
}
