package wait

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/outputbuf"
	"shellagent/supervisor/work"
	"shellagent/supervisor/work/worktest"
)

func TestParseWait(t *testing.T) {
	t.Parallel()
	const def = DefaultTimeout
	tests := []struct {
		line    string
		want    Spec // but Pattern
		pattern bool
	}{
		{"/wait term_1", Spec{Term: "term_1", Timeout: def}, false},
		{"/wait term_1 'ready on' --timeout 30s", Spec{Term: "term_1", Text: "ready on", Timeout: 30 * time.Second}, true},
		{"/wait term_1 ready on", Spec{Term: "term_1", Text: "ready on", Timeout: def}, true},
		{`/wait term_1 --new "say \"hi\"" --timeout=1h`, Spec{Term: "term_1", Text: `say "hi"`, Timeout: time.Hour, Fresh: true}, true},
		{`/wait term_1 \d+ms`, Spec{Term: "term_1", Text: `\d+ms`, Timeout: def}, true},
		{`/wait term_1 '--new'`, Spec{Term: "term_1", Text: "--new", Timeout: def}, true},
		{`/wait term_1 \-\-new`, Spec{Term: "term_1", Text: `\-\-new`, Timeout: def}, true}, // a regular expression for --new
		{"/wait term_1 :3000", Spec{Term: "term_1", Text: ":3000", Port: 3000, Timeout: def}, false},
		{`/wait term_1 \:3000x`, Spec{Term: "term_1", Text: `\:3000x`, Timeout: def}, true}, // a pattern that starts with ':'
		{"/wait term_1 :65535", Spec{Term: "term_1", Text: ":65535", Port: 65535, Timeout: def}, false},
		{"/wait term_1 https://[::1]:8443/x", Spec{Term: "term_1", Text: "https://[::1]:8443/x", URL: "https://[::1]:8443/x", Timeout: def}, false},
		{"/wait term_2 http://localhost:3000/ --timeout 1m", Spec{Term: "term_2", Text: "http://localhost:3000/", URL: "http://localhost:3000/", Timeout: time.Minute}, false},
	}
	for _, tt := range tests {
		spec, problem := Parse(strings.TrimPrefix(tt.line, "/wait "))
		if problem != "" {
			t.Errorf("Parse(%q): %s", tt.line, problem)
			continue
		}
		got := *spec
		if (got.Pattern != nil) != tt.pattern {
			t.Errorf("Parse(%q): pattern %v", tt.line, got.Pattern)
		}
		got.Pattern = nil
		if got != tt.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

// A wait for a terminal's exit holds its turn until the exit, then
// completes, says so and ends the turn; a wait for an unknown terminal is
// refused; a frozen wait whose terminal is gone ends failed in the new
// image, saying why.
func TestWaitForTheExitOnAFakeSession(t *testing.T) {
	t.Parallel()
	h := worktest.NewHost()
	h.AddTerminal("term_1", nil)
	turn := h.NewTurn()
	Start(h, turn, &Spec{Term: "term_9", Timeout: time.Minute})
	if !strings.Contains(turn.Refused, "no terminal") || len(h.Calls) != 0 {
		t.Fatalf("a wait for term_9: refused %q, calls %v", turn.Refused, h.Calls)
	}

	h.Said, turn = nil, h.NewTurn()
	Start(h, turn, &Spec{Term: "term_1", Timeout: time.Minute})
	c := h.Calls[0]
	if turn.Call != c || c.Spec.Title != "wait for term_1 to exit" || c.Sent != 1 || c.Final() {
		t.Fatalf("held %v, call %+v", turn.Call, c)
	}
	code := 3
	h.Exit("term_1", &acp.ExitStatus{ExitCode: &code}, true)
	if c.Status() != acp.StatusCompleted || len(h.Said) != 1 || !strings.HasPrefix(h.Said[0], "term_1 exited with code 3; waited ") || turn.Reason != acp.StopEndTurn {
		t.Errorf("after the exit: status %q, said %q, turn ended %q", c.Status(), h.Said, turn.Reason)
	}

	frozen, _ := json.Marshal(Frozen{Term: "term_2", Target: "ready", Timeout: time.Minute, Started: h.Now()})
	gone, task, err := h.Thaw(Kind, work.CallSpec{}, frozen)
	if err != nil || task != nil || gone.Status() != acp.StatusFailed {
		t.Errorf("thawed without its terminal: %v, %v, status %q", task, err, gone.Status())
	}
}

// A line that matches is reported only once the client that holds the
// ring has been sent it: the wait's end, which quotes the line, must not
// reach a client before the line. A ring that no client holds (none
// attached, or a stalled one) does not hold the wait back.
func TestWatchReportsAMatchOnceTheClientWasSentIt(t *testing.T) {
	t.Parallel()
	for _, held := range []bool{true, false} {
		spec, problem := Parse("term_1 ^ready")
		if problem != "" {
			t.Fatal(problem)
		}
		ring := outputbuf.New(1 << 16)
		f := ring.Follow(nil)
		f.Hold(held)
		ring.Write([]byte("starting\r\nready\r\n"))
		got := make(chan Result, 1)
		go func() { got <- Condition(spec, time.Now()).Watch(context.Background(), ring, 0) }()
		if held {
			select {
			case r := <-got:
				t.Fatalf("held: the wait ended (%+v) before the client was sent the line", r)
			case <-time.After(300 * time.Millisecond):
			}
			f.Taken(ring.Total())
		}
		select {
		case r := <-got:
			if r.Status != acp.StatusCompleted || !strings.HasPrefix(r.Text, `term_1 printed "ready"`) {
				t.Errorf("held %v: the wait ended %+v", held, r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("held %v: the wait did not end once the client had the line", held)
		}
	}
}
