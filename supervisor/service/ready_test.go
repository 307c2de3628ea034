package service

import (
	"context"
	"errors"
	"testing"
	"time"
)

// What the reason of a service whose exec: ready condition did not hold
// says of its tries: how many ran, and how the last ended, plainly.
// Before, a try stopped at its 5 s limit said only "still running after
// 5s", and a try that the ready_timeout cut short was not mentioned.
func TestTriesSaid(t *testing.T) {
	t.Parallel()
	limit := &tryLimit{5 * time.Second}
	exit := errors.New("exit status 7")
	type try struct {
		err  error
		over bool
		took time.Duration
	}
	for _, tt := range []struct {
		name  string
		tries []try
		want  string
	}{
		{"none", nil, "no try ran"},
		{"one that failed", []try{{exit, false, 0}}, "its one try ended: exit status 7"},
		{"failures", []try{{exit, false, 0}, {exit, false, 0}, {exit, false, 0}}, "3 tries; the last ended: exit status 7"},
		{"one cut by the timeout", []try{{context.DeadlineExceeded, true, 900 * time.Millisecond}},
			"its one try was still running when the 1s ran out, and was stopped"},
		{"at its limit", []try{{limit, false, 5 * time.Second}},
			"its one try was still running after 5s, its limit, and was stopped"},
		{"at its limit, then cut by the timeout", []try{{limit, false, 5 * time.Second}, {context.DeadlineExceeded, true, 750 * time.Millisecond}},
			"2 tries; the last was still running when the 1s ran out (it had run 750ms) and was stopped; the one before was still running after 5s, its limit, and was stopped"},
		{"failed, then cut by the timeout", []try{{exit, false, 0}, {context.DeadlineExceeded, true, 20 * time.Millisecond}},
			"2 tries; the last was still running when the 1s ran out (it had run 20ms) and was stopped; the one before ended: exit status 7"},
	} {
		var ts tries
		for _, tr := range tt.tries {
			ts.record(tr.err, tr.over, tr.took)
		}
		if got := ts.said(time.Second); got != tt.want {
			t.Errorf("%s: said %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A try of ExecProbe that runs past its limit is cut short, and its
// error says so; one that exits non-zero says how it exited.
func TestExecProbeLimit(t *testing.T) {
	t.Parallel()
	run := func(ctx context.Context, line, _ string, _ []string) error {
		if line == "fail" {
			return errors.New("exit status 1")
		}
		<-ctx.Done()
		return ctx.Err()
	}
	_, err := ExecProbe(run, "hang", "", nil, time.Millisecond)(context.Background())
	if want := "was still running after 5ms, its limit, and was stopped"; err == nil || err.Error() != want {
		t.Errorf("a try past its limit: %v, want %q", err, want)
	}
	if _, err := ExecProbe(run, "fail", "", nil, time.Millisecond)(context.Background()); err == nil || err.Error() != "exit status 1" {
		t.Errorf("a try that failed: %v, want exit status 1", err)
	}
}
