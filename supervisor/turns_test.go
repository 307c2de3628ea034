package supervisor

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/protocol/acptest"
)

func TestTurnQueue(t *testing.T) {
	t.Parallel()
	var q turnQueue
	j := kindOrigin{&struct{}{}} // a job's, say
	a, b, firing := &turn{}, &turn{}, &turn{origin: j}
	unwatched := 0
	b.unwatch = func() bool { unwatched++; return true }

	if q.busy() || q.waiting() || q.next() != nil {
		t.Fatalf("a new queue is busy or waiting")
	}
	q.take(a, turnRunning)
	q.hold(b)
	q.hold(firing)
	if !q.busy() || !q.waiting() || a.state != turnRunning || b.state != turnHeld {
		t.Errorf("after take and hold: busy %v waiting %v, states %d %d", q.busy(), q.waiting(), a.state, b.state)
	}
	if q.next() != nil {
		t.Errorf("next while the foreground is held")
	}
	if q.runOf(j.owns) != firing {
		t.Errorf("the held firing is not the job's run")
	}
	a.timer = time.AfterFunc(time.Hour, func() { t.Error("the foreground timeout fired") })
	q.release(b) // not the foreground: nothing changes
	if q.fg != a {
		t.Fatalf("releasing a held turn released the foreground")
	}
	q.release(a)
	if q.busy() || a.state != turnOver || a.timer.Stop() {
		t.Errorf("after release: busy %v, state %d, timer still armed", q.busy(), a.state)
	}
	if got := q.next(); got != b || unwatched != 1 {
		t.Errorf("next = %p (unwatched %d), want the first held turn, no longer watched", got, unwatched)
	}
	q.take(b, turnAsking)
	if q.runOf(j.owns) != firing {
		t.Errorf("the held firing is not the job's run")
	}
	if !q.remove(firing) || q.remove(firing) || firing.state != turnOver || q.runOf(j.owns) != nil {
		t.Errorf("remove: state %d, run %v", firing.state, q.runOf(j.owns))
	}
	c, d := &turn{}, &turn{origin: j}
	q.hold(c)
	q.hold(d)
	if got := q.drop(func(t *turn) bool { return t.origin == j }); !slices.Equal(got, []*turn{d}) || len(q.held) != 1 {
		t.Errorf("drop returned %v, %d left", got, len(q.held))
	}
	if q.foreground(nil) {
		t.Errorf("no terminal is the foreground command while it asks for permission")
	}
	term := &terminal{}
	b.term = term
	if !q.foreground(term) || q.foreground(&terminal{}) {
		t.Errorf("foreground: wrong terminal")
	}
}

// TestTurnsWaitForTheSweep: until what dead agents left has been swept
// (Config.Swept), a prompt runs nothing and is not answered, while the
// session's reads answer (session/list); then it runs.
func TestTurnsWaitForTheSweep(t *testing.T) {
	t.Parallel()
	swept := make(chan struct{})
	h := newHarness(t, Config{Swept: swept})
	sid := h.newSession()
	id := h.prompt(sid, "echo ran")
	if _, err := h.c.Call("session/list", map[string]any{}); err != nil {
		t.Fatalf("session/list before the sweep: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // time for a turn that did not wait to show
	h.never(sid, "an update of the prompt's turn before the sweep", func(*acptest.Msg) bool { return true })
	for _, m := range h.c.Transcript() {
		if m.ReqMethod == "session/prompt" && string(m.ID) == strconv.FormatInt(id, 10) {
			t.Fatalf("the prompt was answered before the sweep: %s", m.Raw)
		}
	}
	close(swept)
	if m := h.c.Wait(id); m.Error != nil {
		t.Fatalf("the prompt after the sweep: %v", m.Error)
	}
	h.output(sid, "term_1", "ran")
}

func TestSessionTitle(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 150)
	tests := []struct{ line, want string }{
		{"make test", "make test"},
		{"  npm run dev  ", "npm run dev"},
		{"cat > big.go <<'EOF'\npackage big\nEOF", "cat > big.go <<'EOF' …"},
		{"\n\necho hi\n\n", "echo hi"},
		{long, long[:titleLen-1] + "…"},
		{long + "\nmore", long[:titleLen-1] + "…"},
		{"é" + long, "é" + long[:titleLen-2] + "…"}, // runes, not bytes
	}
	for _, tt := range tests {
		if got := sessionTitle(tt.line); got != tt.want {
			t.Errorf("sessionTitle(%.30q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}
