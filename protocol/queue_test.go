package protocol

import (
	"fmt"
	"strings"
	"testing"

	"shellagent/acp"
)

// Updates for queue tests, in a notation that describe prints back.

func st(state string, ids ...string) *acp.StateUpdate {
	u := &acp.StateUpdate{SessionUpdate: acp.KindState, State: state}
	for _, id := range ids {
		if strings.HasPrefix(id, "term") {
			u.Background = append(u.Background, acp.BackgroundItem{Type: "terminal", TerminalID: id})
		} else {
			u.Background = append(u.Background, acp.BackgroundItem{Type: "tool_call", ToolCallID: id})
		}
	}
	return u
}

func tc(id, status string) *acp.ToolCallUpdate {
	return &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: id, Status: status}
}

// op is one thing queued: a session update, a terminal update (term,
// exit) or a line.
type op struct {
	update acp.Update
	term   string
	exit   bool
	line   string
}

func (o op) apply(q *controlQueue) {
	switch {
	case o.line != "":
		q.addLine([]byte(o.line))
	case o.term != "":
		u := &acp.TerminalUpdate{SessionUpdate: acp.KindTerminal, TerminalID: o.term}
		if o.exit {
			u.ExitStatus = &acp.ExitStatus{}
		}
		q.addTerminal("s", u, &stream{}, StreamOutput)
	default:
		q.addUpdate("s", o.update)
	}
}

func describe(e *entry) string {
	switch u := e.update.(type) {
	case nil:
		return string(e.line)
	case *acp.StateUpdate:
		var ids []string
		for _, b := range u.Background {
			ids = append(ids, b.TerminalID+b.ToolCallID)
		}
		return fmt.Sprintf("%s%v", u.State, ids)
	case *acp.ToolCallUpdate:
		return u.ToolCallID + ":" + u.Status
	case *acp.TerminalUpdate:
		if u.ExitStatus != nil {
			return u.TerminalID + ":exit"
		}
		return u.TerminalID
	case *acp.Message:
		return "message"
	case *acp.Notice:
		return "notice:" + u.Title
	}
	return "?"
}

func describeAll(es []*entry) string {
	var out []string
	for _, e := range es {
		out = append(out, describe(e))
	}
	return strings.Join(out, " ")
}

func TestControlQueue(t *testing.T) {
	t.Parallel()
	msg := &acp.Message{SessionUpdate: acp.KindAgentMessage}
	tests := []struct {
		name    string
		stalled bool
		sent    []op // queued and taken first: what the client has
		ops     []op
		want    string
	}{
		{
			name: "a client that keeps up gets every update",
			ops:  []op{{update: st("running")}, {update: st("idle")}, {update: st("running")}},
			want: "running[] idle[] running[]",
		},
		{
			name:    "a state_update replaces the pending one",
			stalled: true,
			ops:     []op{{update: st("running")}, {update: st("idle")}, {update: st("running")}},
			want:    "running[]",
		},
		{
			name:    "nothing moves across a message or a line",
			stalled: true,
			ops: []op{
				{update: st("running")}, {update: msg}, {update: st("idle")},
				{update: tc("c1", "pending")}, {update: tc("c1", "in_progress")}, {line: "response"}, {update: tc("c1", "completed")},
			},
			want: "running[] message idle[] c1:pending c1:in_progress response c1:completed",
		},
		{
			name:    "an item's first update stays, later ones merge at the end",
			stalled: true,
			ops: []op{
				{update: tc("c1", "in_progress")}, {term: "term_1"}, {update: st("running", "term_1")},
				{term: "term_1", exit: true}, {update: tc("c1", "completed")}, {update: st("idle")},
			},
			want: "c1:in_progress term_1 term_1:exit c1:completed idle[]",
		},
		{
			name:    "patches of one item merge",
			stalled: true,
			sent:    []op{{update: tc("c1", "pending")}},
			ops:     []op{{update: tc("c1", "in_progress")}, {update: st("running", "c1")}, {update: tc("c1", "failed")}},
			want:    "running[c1] c1:failed",
		},
		{
			name:    "a removal reported with running is not moved into idle []",
			stalled: true,
			sent:    []op{{update: tc("w", "pending")}, {update: st("idle", "w")}},
			ops: []op{
				{update: tc("w", "completed")}, {update: st("running")},
				{update: tc("c2", "in_progress")}, {update: tc("c2", "completed")}, {update: st("idle")},
				{update: st("running")},
			},
			want: "w:completed running[] c2:in_progress c2:completed running[]",
		},
		{
			name:    "idle [] that removed nothing merges",
			stalled: true,
			sent:    []op{{update: st("idle")}},
			ops:     []op{{update: st("running")}, {update: st("idle")}},
			want:    "idle[]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newControlQueue()
			for _, o := range tt.sent {
				o.apply(&q)
			}
			q.take(nil)
			q.stalled = tt.stalled
			for _, o := range tt.ops {
				o.apply(&q)
			}
			if got := describeAll(q.take(nil)); got != tt.want {
				t.Errorf("taken\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

func TestControlQueueMergesPatchFields(t *testing.T) {
	t.Parallel()
	q := newControlQueue()
	q.stalled = true
	caller := &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "c1", Status: acp.StatusInProgress, Content: []acp.ToolCallContent{acp.TerminalContent("term_1")}}
	q.addUpdate("s", &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "c1", Title: "t", Kind: "execute", Status: acp.StatusPending})
	q.addUpdate("s", caller)
	q.addUpdate("s", &acp.ToolCallUpdate{SessionUpdate: acp.KindToolCall, ToolCallID: "c1", Status: acp.StatusCompleted, RawOutput: 0, Capabilities: acp.CapsNone})
	es := q.take(nil)
	if len(es) != 2 {
		t.Fatalf("taken %s", describeAll(es))
	}
	got := es[1].update.(*acp.ToolCallUpdate)
	if got.Status != acp.StatusCompleted || len(got.Content) != 1 || got.RawOutput == nil || string(got.Capabilities) != "null" || got.Title != "" {
		t.Errorf("merged patch %+v", got)
	}
	if caller.Status != acp.StatusInProgress || caller.RawOutput != nil {
		t.Errorf("the caller's update was changed: %+v", caller)
	}
}

// firing queues what one run of a scheduled job reports.
func firing(q *controlQueue, n int) {
	call, term := fmt.Sprintf("call_%d", n), fmt.Sprintf("term_%d", n)
	for _, o := range []op{
		{update: st("running", "job")}, {update: tc(call, "in_progress")}, {term: term},
		{term: term, exit: true}, {update: tc(call, "completed")}, {update: st("idle", "job")},
	} {
		o.apply(q)
	}
}

func TestStalledQueueIsBoundedByLiveItems(t *testing.T) {
	t.Parallel()
	q := newControlQueue()
	q.addUpdate("s", tc("job", "pending"))
	q.addLine([]byte("response"))
	q.take(nil)
	q.stalled = true
	for n := range 10000 {
		firing(&q, n)
		q.dropFinished()
	}
	live := len(q.entries) - q.holes
	// Per finished item kept: its first update and its final one.
	if max := 4*keepFinished + 10; live > max || len(q.items) > 2*keepFinished+10 {
		t.Errorf("after 10000 firings: %d entries, %d items; want at most %d", live, len(q.items), max)
	}
	if len(q.entries) > 2*live+64 {
		t.Errorf("%d slots for %d entries", len(q.entries), live)
	}
	got := describeAll(q.take(nil))
	if !strings.HasSuffix(got, "term_9999 term_9999:exit call_9999:completed idle[job]") {
		t.Errorf("the last firing is not what the client gets last: …%s", got[max(0, len(got)-200):])
	}
	if strings.Count(got, "idle[job]")+strings.Count(got, "running[job]") != 1 {
		t.Errorf("more than one state_update: %s", got[:200])
	}
}

// A client that keeps up gets every notice in its place; a stalled one
// gets only the last keepNotices, and state_updates coalesce across them
// (a notice is not fixed).
func TestNoticesAreKeptInOrderOrDroppedWhenStalled(t *testing.T) {
	t.Parallel()
	notice := func(n int) *acp.Notice {
		return &acp.Notice{SessionUpdate: acp.KindNotice, Severity: acp.NoticeInfo, Title: fmt.Sprint(n)}
	}
	q := newControlQueue()
	q.addUpdate("s", st("running"))
	q.addUpdate("s", notice(1))
	q.addUpdate("s", st("idle"))
	if got, want := describeAll(q.take(nil)), "running[] notice:1 idle[]"; got != want {
		t.Errorf("keeping up: %s, want %s", got, want)
	}

	q.stalled = true
	for n := range 1000 {
		q.addUpdate("s", notice(n))
		q.addUpdate("s", st("idle", fmt.Sprint("term_", n)))
	}
	got := describeAll(q.take(nil))
	if strings.Count(got, "notice:") != keepNotices || !strings.HasPrefix(got, fmt.Sprint("notice:", 1000-keepNotices, " ")) ||
		!strings.HasSuffix(got, "notice:999 idle[term_999]") || strings.Count(got, "idle[") != 1 {
		t.Errorf("stalled: %s", got)
	}
	if len(q.notices) != 0 {
		t.Errorf("take left %d notices pending", len(q.notices))
	}
}

func TestWorkThatSomethingFixedRefersToIsKept(t *testing.T) {
	t.Parallel()
	q := newControlQueue()
	q.stalled = true
	q.addUpdate("s", tc("asked", "pending"))
	q.addLine([]byte("permission request"))
	q.addUpdate("s", tc("asked", "failed"))
	for n := range 2 * keepFinished {
		firing(&q, n)
		q.dropFinished()
	}
	got := describeAll(q.take(nil))
	if !strings.HasPrefix(got, "asked:pending permission request asked:failed") {
		t.Errorf("taken %s…", got[:100])
	}
}

// A session keeps an entry only while its last state_update lists work
// (which the rule on removals needs) or one is pending: 10,000 sessions
// that ran and ended cost the queue nothing.
func TestControlQueueForgetsSessionsThatEnded(t *testing.T) {
	t.Parallel()
	q := newControlQueue()
	for n := range 10000 {
		q.addUpdate(fmt.Sprintf("s%d", n), st("running", "term_1"))
	}
	q.take(nil)
	for n := range 10000 {
		q.addUpdate(fmt.Sprintf("s%d", n), st("idle"))
	}
	if len(q.sessions) != 10000 || len(q.touched) != 10000 {
		t.Fatalf("%d sessions, %d with pending state_updates; want 10000", len(q.sessions), len(q.touched))
	}
	q.take(nil)
	if len(q.sessions) != 0 || len(q.touched) != 0 {
		t.Errorf("%d sessions kept, %d touched, after every session reported an empty list", len(q.sessions), len(q.touched))
	}

	// Released while something is pending: forgotten once it is taken.
	q.addUpdate("live", st("running", "term_1"))
	q.addUpdate("gone", st("running", "term_1"))
	q.forget("gone")
	if q.sessions["gone"] == nil {
		t.Fatal("a released session's pending state_update lost its entry")
	}
	q.take(nil)
	if q.sessions["gone"] != nil || q.sessions["live"] == nil {
		t.Errorf("after take: gone %v, live %v; want only live", q.sessions["gone"], q.sessions["live"])
	}
	q.forget("live")
	if len(q.sessions) != 0 {
		t.Errorf("%d sessions after forgetting the last", len(q.sessions))
	}
}
