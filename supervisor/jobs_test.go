package supervisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/protocol/acptest"
)

func TestAfterFiresAsNewForegroundWork(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "/after 300ms echo woke")
	pending := h.update(nil, sid, acp.KindToolCall, "wakeup announced", nil)
	if pending.Status() != "pending" || pending.Update["kind"] != "other" || pending.Update["title"] != "after 300ms: echo woke" ||
		mustJSON(pending.Update["capabilities"]) != `{"cancel":{}}` {
		t.Errorf("wakeup announced as %s", pending.Raw)
	}
	call := pending.ToolCallID()
	listed := h.idle(pending, sid, "end_turn")
	if !sameIDs(listed.Background(), []string{call}) || listed.Background()[0].Type != "tool_call" {
		t.Fatalf("after /after the list is %v", listed.Background())
	}

	done := h.toolStatus(listed, sid, call, "completed")
	if !done.HasKey("capabilities") || done.Update["capabilities"] != nil {
		t.Errorf("fired wakeup %s: capabilities must be cleared", done.Raw)
	}
	// The state_update that removes the wakeup reports the new work running.
	removal := h.update(done, sid, acp.KindState, "removal", nil)
	if removal.State() != "running" || len(removal.Background()) != 0 {
		t.Errorf("removal state_update %s: want running with an empty list", removal.Raw)
	}
	cmd := h.update(removal, sid, acp.KindToolCall, "command", func(m *acptest.Msg) bool { return m.ToolCallID() != call })
	if cmd.Update["kind"] != "execute" || cmd.Status() != "in_progress" {
		t.Errorf("fired command %s", cmd.Raw)
	}
	term := h.update(cmd, sid, acp.KindTerminal, "terminal", nil).TerminalID()
	h.idle(h.exit(cmd, sid, term), sid, "end_turn")
	if got := string(h.c.Output(sid, term)); got != "woke\r\n" {
		t.Errorf("output %q", got)
	}
	h.never(sid, "a firing inserted a user message", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindUserMessage && m.Seq > listed.Seq
	})
}

func TestAfterFiringWhileBusyIsQueued(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	// The busy command starts well within the second (on a loaded machine
	// too) and runs past the firing.
	h.run(sid, "/after 1s echo queued")
	h.idle(nil, sid, "end_turn")
	h.run(sid, "echo busy; sleep 2")
	h.output(sid, "term_1", "busy")
	done := h.toolStatus(nil, sid, "call_1", "completed")
	removal := h.update(done, sid, acp.KindState, "removal", nil)
	if removal.State() != "running" || len(removal.Background()) != 0 {
		t.Errorf("removal while busy %s", removal.Raw)
	}
	first := h.idle(done, sid, "end_turn")
	exit1 := h.exit(nil, sid, "term_1")
	if first.Seq < exit1.Seq {
		t.Fatalf("the foreground turn ended before its command")
	}
	h.idle(h.exit(first, sid, "term_2"), sid, "end_turn")
	if got := string(h.c.Output(sid, "term_2")); got != "queued\r\n" {
		t.Errorf("queued firing printed %q", got)
	}
}

// A recurring job fires every period, each firing its own foreground
// command, until it is cancelled; then it never fires again. On a clock
// the test moves: a period passes when the test says so.
func TestEveryRunsUntilCancelled(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	h := newHarness(t, Config{clock: clk})
	sid := h.newSession()
	h.run(sid, "/every 1m echo tick")
	job := h.update(nil, sid, acp.KindToolCall, "job", nil).ToolCallID()
	h.idle(nil, sid, "end_turn")
	// Two firings, each its own foreground command; the job stays listed.
	for _, term := range []string{"term_1", "term_2"} {
		clk.advance(59 * time.Second)
		h.inspect(sid, func(st *state) {
			if st.work.terminals[term] != nil {
				t.Errorf("%s started before the minute was up", term)
			}
		})
		clk.advance(time.Second)
		exit := h.exit(nil, sid, term)
		idle := h.idle(exit, sid, "end_turn")
		if !sameIDs(idle.Background(), []string{job}) {
			t.Errorf("after %s the list is %v", term, idle.Background())
		}
	}
	raw, err := h.c.Call("tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": job})
	if err != nil || string(raw) != "{}" {
		t.Fatalf("tool_call/cancel: %s, %v", raw, err)
	}
	resp := h.c.Transcript()
	var answer *acptest.Msg
	for _, m := range resp {
		if m.IsResponse() && string(m.Result) == "{}" && m.ReqMethod == "tool_call/cancel" {
			answer = m
		}
	}
	cancelled := h.toolStatus(nil, sid, job, "cancelled")
	if answer == nil || cancelled.Seq < answer.Seq {
		t.Errorf("the final status came before the acceptance")
	}
	h.listed(cancelled, sid)
	// Cancelled means cancelled: no timer left, no firing an hour on, and
	// a second cancel is an error.
	if n := clk.armed(); n != 0 {
		t.Errorf("%d timers armed after the cancel", n)
	}
	clk.advance(time.Hour)
	h.inspect(sid, func(st *state) {
		if st.work.terminals["term_3"] != nil {
			t.Error("the job fired after its cancel")
		}
	})
	h.never(sid, "job fired after cancel", func(m *acptest.Msg) bool {
		return m.Seq > cancelled.Seq && m.Kind == acp.KindTerminal && m.HasKey("command")
	})
	if err := h.callErr("tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": job}); err == nil || err.Code != -32602 {
		t.Errorf("second cancel: %v", err)
	}
}

func TestEverySkipsWhileThePreviousRunIsInTheForeground(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	// The first run (from 1s to 3.3s) outlasts two firings (2s and 3s).
	h.run(sid, "/every 1s sleep 2.3")
	job := h.update(nil, sid, acp.KindToolCall, "job", nil).ToolCallID()
	skip := h.update(nil, sid, acp.KindAgentMessage, "skip notice", nil)
	if !strings.Contains(skip.Text(), "skipped") || !strings.Contains(skip.Text(), job) {
		t.Errorf("skip notice %q", skip.Text())
	}
	exit1 := h.exit(nil, sid, "term_1")
	// Skipped firings are not stacked: the next run starts at a later
	// firing, after the first one ended.
	start2 := h.update(exit1, sid, acp.KindTerminal, "term_2 starts", func(m *acptest.Msg) bool { return m.TerminalID() == "term_2" })
	h.c.Send("session/prompt", map[string]any{"sessionId": sid, "prompt": text("/stop " + job)})
	h.toolStatus(start2, sid, job, "cancelled")
	h.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	h.exit(nil, sid, "term_2")
	notices := 0
	for _, m := range h.c.Updates(sid) {
		if m.Kind == acp.KindTerminal && m.HasKey("command") && m.Seq < exit1.Seq && m.TerminalID() != "term_1" {
			t.Errorf("a run started while the previous one was in the foreground: %s", m.Raw)
		}
		if m.Kind == acp.KindAgentMessage && strings.Contains(m.Text(), "skipped") && m.Seq < exit1.Seq {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d skip notices during one run that blocked two firings, want 1", notices)
	}
}

// /ps names the processes that run, not a shell that has returned.
func TestPsListsTheLiveProcesses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "/bg sleep 30 & exit 0")
	h.idle(nil, sid, "end_turn")
	var text string
	for deadline := time.Now().Add(10 * time.Second); ; {
		h.run(sid, "/ps")
		msgs := h.c.Updates(sid)
		text = ""
		for _, m := range msgs {
			if m.Kind == acp.KindAgentMessage {
				text = m.Text()
			}
		}
		if strings.Count(text, ", pid ") == 1 && strings.HasSuffix(text, " sleep 30") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the shell is still on its way out, or sleep not yet exec'd
	}
	if !strings.Contains(text, "term_1  terminal  sleep 30 & exit 0") || !strings.HasSuffix(text, " sleep 30") || strings.Count(text, ", pid ") != 1 {
		t.Errorf("/ps:\n%s", text)
	}
}

func TestStopAndPs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "/bg sleep 30")
	h.run(sid, "/every 1h make test")
	h.run(sid, "/after 90s echo later")
	h.run(sid, "/ps")
	ps := h.update(nil, sid, acp.KindAgentMessage, "/ps", nil)
	lines := strings.Split(ps.Text(), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "term_1  terminal  sleep 30") || !strings.Contains(lines[1], "pid ") ||
		!strings.Contains(lines[2], "call_2  every 1h0m0s  make test") || !strings.Contains(lines[2], "pending") ||
		!strings.Contains(lines[3], "call_3  after 1m30s  echo later") {
		t.Errorf("/ps:\n%s", ps.Text())
	}
	tests := []struct {
		id, says string
	}{
		{"call_3", "Cancelling call_3"},
		{"call_3", "Cannot stop call_3: toolCallId: call_3 is already cancelled"},
		{"term_1", "Stopping term_1"},
		{"call_1", "Cannot stop call_1: toolCallId: call_1 is already completed"},
		{"term_9", "Cannot stop term_9"},
	}
	last := ps
	for _, tt := range tests {
		h.run(sid, "/stop "+tt.id)
		msg := h.update(last, sid, acp.KindAgentMessage, "/stop "+tt.id, nil)
		if !strings.HasPrefix(msg.Text(), tt.says) {
			t.Errorf("/stop %s said %q, want %q", tt.id, msg.Text(), tt.says)
		}
		last = h.idle(msg, sid, "end_turn")
	}
	h.exit(nil, sid, "term_1")
	h.listed(nil, sid, "call_2")
}

func TestToolCallOfAnotherSessionIsUnknown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	a, b := h.newSession(), h.newSession()
	h.run(a, "/every 1h true")
	job := h.update(nil, a, acp.KindToolCall, "job", nil).ToolCallID()
	err := h.callErr("tool_call/cancel", map[string]string{"sessionId": b, "toolCallId": job})
	if err == nil || err.Code != -32602 || !strings.Contains(err.Message, "no tool call") {
		t.Errorf("cancel from another session: %v", err)
	}
	h.run(b, "/stop "+job)
	if msg := h.update(nil, b, acp.KindAgentMessage, "/stop", nil); !strings.Contains(msg.Text(), "Cannot stop") {
		t.Errorf("/stop from another session: %q", msg.Text())
	}
	h.listed(nil, a, job)
}

func TestBadSlashCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	tests := []struct{ prompt, says string }{
		{"/after x y", `"x" is not a duration. Write it as /after DUR CMD`},
		{"/after 5m", "needs a duration and a command"},
		{"/every 0s true", "must be more than 0, got 0s. Write it as /every DUR CMD"},
		{"/every -1s true", "must be more than 0"},
		{"/every 999ms true", "the interval must be at least 1s, got 999ms"},
		{"/stop", "needs exactly one terminal or tool call id. Write it as /stop ID"},
		{"/stop a b", "needs exactly one"},
		{"/ps now", "takes no arguments"},
		{"/nope", "Unknown command /nope"},
	}
	var last *acptest.Msg
	for _, tt := range tests {
		h.run(sid, tt.prompt)
		msg := h.update(last, sid, acp.KindAgentMessage, tt.prompt, nil)
		if !strings.Contains(msg.Text(), tt.says) {
			t.Errorf("%s: %q, want %q", tt.prompt, msg.Text(), tt.says)
		}
		last = h.idle(msg, sid, "end_turn")
	}
	h.never(sid, "a bad command started something", func(m *acptest.Msg) bool {
		return m.Kind == acp.KindToolCall || m.Kind == acp.KindTerminal
	})
}

func TestCloseCancelsJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "/every 1h true")
	h.run(sid, "/after 1h true")
	h.listed(nil, sid, "call_1", "call_2")
	h.c.MustCall("session/close", map[string]string{"sessionId": sid}, nil)
	c1 := h.toolStatus(nil, sid, "call_1", "cancelled")
	c2 := h.toolStatus(nil, sid, "call_2", "cancelled")
	updates := h.c.Updates(sid)
	last := updates[len(updates)-1]
	if last.State() != "idle" || len(last.Background()) != 0 || last.Seq < max(c1.Seq, c2.Seq) {
		t.Errorf("last update %s: want the final idle state_update with an empty list, after the cancellations", last.Raw)
	}
}

// permission answers with the given option, records the requests.
type permissions struct {
	answer string // optionId, or "" to leave the request open
	seen   chan *acptest.Msg
}

func (p *permissions) handle(m acptest.Msg) any {
	p.seen <- &m
	if p.answer == "" {
		return nil
	}
	return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": p.answer}}
}

func askHarness(t *testing.T, answer string) (*harness, string, *permissions) {
	p := &permissions{answer: answer, seen: make(chan *acptest.Msg, 10)}
	h := newHarness(t, Config{}, acptest.WithPermissionHandler(p.handle))
	sid := h.newSession()
	h.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "permission", "type": "id", "value": "ask"}, nil)
	return h, sid, p
}

func subject(t *testing.T, req *acptest.Msg) map[string]any {
	var p struct {
		Subject map[string]any `json:"subject"`
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
		} `json:"options"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Options) != 2 || p.Options[0].Kind != "allow_once" || p.Options[1].Kind != "reject_once" {
		t.Errorf("options %+v", p.Options)
	}
	return p.Subject
}

func TestPermissionAllow(t *testing.T) {
	t.Parallel()
	h, sid, p := askHarness(t, "allow")
	h.run(sid, "echo allowed")
	req := <-p.seen
	sub := subject(t, req)
	if sub["type"] != "command" || sub["command"] != "echo allowed" || sub["cwd"] != h.cwd || sub["toolCallId"] != "call_1" {
		t.Errorf("subject %v", sub)
	}
	blocked := h.update(nil, sid, acp.KindState, "requires_action", func(m *acptest.Msg) bool { return m.State() == "requires_action" })
	if req.Seq < blocked.Seq {
		t.Errorf("request before requires_action")
	}
	pending := h.toolStatus(nil, sid, "call_1", "pending")
	if pending.Seq > blocked.Seq {
		t.Errorf("tool call announced after requires_action")
	}
	running := h.update(blocked, sid, acp.KindState, "running", func(m *acptest.Msg) bool { return m.State() == "running" })
	h.toolStatus(running, sid, "call_1", "in_progress")
	h.idle(h.exit(running, sid, "term_1"), sid, "end_turn")
	if got := string(h.c.Output(sid, "term_1")); got != "allowed\r\n" {
		t.Errorf("output %q", got)
	}
}

func TestPermissionReject(t *testing.T) {
	t.Parallel()
	h, sid, p := askHarness(t, "reject")
	h.run(sid, "touch should-not-exist")
	<-p.seen
	failed := h.toolStatus(nil, sid, "call_1", "failed")
	if !strings.Contains(failed.Text(), "refused") {
		t.Errorf("rejected tool call says %q", failed.Text())
	}
	h.idle(failed, sid, "end_turn")
	h.never(sid, "a rejected command got a terminal", func(m *acptest.Msg) bool { return m.Kind == acp.KindTerminal })
}

// TestPermissionAnswersThatAreNoApproval: an optionId the request did not
// offer, and an outcome the agent does not know, are not approval (the
// schema's RequestPermissionOutcome: "the agent MUST treat the request as
// not approved", "MUST NOT treat it as approval"): the command does not
// run, as when it is refused.
func TestPermissionAnswersThatAreNoApproval(t *testing.T) {
	t.Parallel()
	for _, outcome := range []map[string]any{
		{"outcome": "selected", "optionId": "allow_always"},
		{"outcome": "_later", "optionId": "allow"},
	} {
		h := newHarness(t, Config{}, acptest.WithPermissionHandler(func(acptest.Msg) any { return map[string]any{"outcome": outcome} }))
		sid := h.newSession()
		h.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "permission", "type": "id", "value": "ask"}, nil)
		h.run(sid, "touch ran")
		h.idle(h.toolStatus(nil, sid, "call_1", "failed"), sid, "end_turn")
		h.never(sid, fmt.Sprintf("the command ran after the answer %v", outcome), func(m *acptest.Msg) bool { return m.Kind == acp.KindTerminal })
		if _, err := os.Stat(filepath.Join(h.cwd, "ran")); err == nil {
			t.Errorf("the answer %v ran the command", outcome)
		}
	}
}

func TestPermissionWithdrawnBySessionCancel(t *testing.T) {
	t.Parallel()
	h, sid, p := askHarness(t, "")
	// Background work waiting for permission: listed before its request.
	h.run(sid, "/bg echo bg-allowed")
	bgReq := <-p.seen
	if sub := subject(t, bgReq); sub["toolCallId"] != "call_1" {
		t.Errorf("background request subject %v", sub)
	}
	listedBefore := false
	for _, m := range h.c.Transcript() {
		if m.Seq < bgReq.Seq && m.Kind == acp.KindState && sameIDs(m.Background(), []string{"call_1"}) {
			listedBefore = true
		}
	}
	if !listedBefore {
		t.Errorf("the background request came before a state_update listing its work")
	}
	h.idle(nil, sid, "end_turn")

	// Foreground work waiting for permission, then session/cancel.
	h.run(sid, "echo fg")
	fgReq := <-p.seen
	h.update(nil, sid, acp.KindState, "requires_action", func(m *acptest.Msg) bool { return m.State() == "requires_action" })
	h.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	withdrawn := h.c.WaitFor("$/cancel_request", func(m *acptest.Msg) bool { return m.Method == "$/cancel_request" })
	if !strings.Contains(string(withdrawn.Params), string(fgReq.ID)) {
		t.Errorf("withdrew %s, want request %s", withdrawn.Params, fgReq.ID)
	}
	h.toolStatus(nil, sid, "call_2", "cancelled")
	idle := h.idle(nil, sid, "cancelled")
	if !sameIDs(idle.Background(), []string{"call_1"}) {
		t.Errorf("after session/cancel the list is %v", idle.Background())
	}
	h.c.Respond(fgReq.ID, map[string]any{"outcome": map[string]any{"outcome": "cancelled"}})

	// The background request stayed open: allowing it now runs the command,
	// listed as its terminal in place of its tool call.
	h.c.Respond(bgReq.ID, map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "allow"}})
	swap := h.listed(idle, sid, "term_1")
	if swap.State() != "idle" {
		t.Errorf("swap state_update %s", swap.Raw)
	}
	h.output(sid, "term_1", "bg-allowed")
	h.exit(nil, sid, "term_1")
	if strings.Contains(string(h.c.Output(sid, "term_1")), "fg") {
		t.Errorf("the withdrawn command ran")
	}
}

// session/close withdraws every request for permission of the session,
// the foreground's and a listed command's, and its answer comes after
// their $/cancel_request: nothing for a session follows its close's
// answer (the schema's CloseSessionRequest). The withdrawals were sent by
// goroutines of their own, after the answer. session/delete of the live
// session closes it the same way, and its answer too came before the
// withdrawals.
func TestPermissionWithdrawnBeforeTheCloseAnswer(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"session/close", "session/delete"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			h, sid, p := askHarness(t, "")
			h.run(sid, "/bg echo listed")
			listed := <-p.seen
			h.idle(nil, sid, "end_turn")
			h.run(sid, "echo foreground")
			fg := <-p.seen
			h.update(nil, sid, acp.KindState, "requires_action", func(m *acptest.Msg) bool { return m.State() == "requires_action" })
			closed := h.c.Wait(h.c.Send(method, map[string]string{"sessionId": sid}))
			if closed.Error != nil {
				t.Fatalf("%s: %s", method, closed.Raw)
			}
			for _, req := range []*acptest.Msg{listed, fg} {
				withdrawn := h.c.WaitFor("$/cancel_request of "+string(req.ID), func(m *acptest.Msg) bool {
					return m.Method == "$/cancel_request" && strings.Contains(string(m.Params), string(req.ID))
				})
				if withdrawn.Seq > closed.Seq {
					t.Errorf("the $/cancel_request of %s (#%d) came after the answer to %s (#%d)", req.ID, withdrawn.Seq, method, closed.Seq)
				}
			}
		})
	}
}

func TestPermissionForAFiring(t *testing.T) {
	t.Parallel()
	h, sid, p := askHarness(t, "allow")
	h.run(sid, "/after 200ms echo fired")
	done := h.toolStatus(nil, sid, "call_1", "completed")
	req := <-p.seen
	if sub := subject(t, req); sub["command"] != "echo fired" || sub["toolCallId"] != "call_2" {
		t.Errorf("firing asked for %v", sub)
	}
	// The state_update that removes the wakeup reports the firing blocked on
	// the user, then it runs once allowed.
	removal := h.update(done, sid, acp.KindState, "removal", nil)
	if removal.State() != "requires_action" || len(removal.Background()) != 0 || removal.Seq > req.Seq {
		t.Errorf("removal state_update %s (request at %d)", removal.Raw, req.Seq)
	}
	running := h.update(removal, sid, acp.KindState, "running", func(m *acptest.Msg) bool { return m.State() == "running" })
	h.idle(h.exit(running, sid, "term_1"), sid, "end_turn")
	if got := string(h.c.Output(sid, "term_1")); got != "fired\r\n" {
		t.Errorf("output %q", got)
	}
}

// TestPermissionAllowedButTheLaunchFails: background work allowed to run
// whose command cannot start fails, and leaves the list after its failed
// status (RFD rule 3), in a repeated state_update.
func TestPermissionAllowedButTheLaunchFails(t *testing.T) {
	t.Parallel()
	p := &permissions{answer: "allow", seen: make(chan *acptest.Msg, 10)}
	h := newHarness(t, Config{Launcher: failLauncher{}}, acptest.WithPermissionHandler(p.handle))
	sid := h.newSession()
	h.c.MustCall("session/set_config_option", map[string]any{"sessionId": sid, "configId": "permission", "type": "id", "value": "ask"}, nil)
	h.run(sid, "/bg echo never")
	<-p.seen
	listed := h.listed(nil, sid, "call_1")
	failed := h.toolStatus(listed, sid, "call_1", "failed")
	if !strings.Contains(failed.Text(), "Could not start") {
		t.Errorf("failed tool call says %q", failed.Text())
	}
	if empty := h.listed(failed, sid); empty.State() != "idle" {
		t.Errorf("the state_update that unlists it: %s", empty.Raw)
	}
}

// TestStopToolCallOfCommand: /stop of the tool call of a command that runs
// names the /stop that stops it, as a person would type it (before, it
// said only that terminal/cancel does).
func TestStopToolCallOfCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	sid := h.newSession()
	h.run(sid, "/bg sleep 30")
	h.run(sid, "/stop call_1")
	msg := h.update(nil, sid, acp.KindAgentMessage, "/stop call_1", nil)
	if want := "Its command runs in term_1: /stop term_1 stops it."; !strings.HasPrefix(msg.Text(), "Cannot stop call_1: ") || !strings.HasSuffix(msg.Text(), want) {
		t.Errorf("/stop call_1 said %q, want it to end %q", msg.Text(), want)
	}
	h.run(sid, "/stop term_1")
	h.exit(nil, sid, "term_1")
}
