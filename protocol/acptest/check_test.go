package acptest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Transcript builders for session s1 (or the given session).

func stateIn(session, state, stop string, items ...string) string {
	stopField := ""
	if stop != "" {
		stopField = fmt.Sprintf(`,"stopReason":%q`, stop)
	}
	var list []string
	for _, it := range items {
		if strings.HasPrefix(it, "call_") {
			list = append(list, fmt.Sprintf(`{"type":"tool_call","toolCallId":%q}`, it))
		} else {
			list = append(list, fmt.Sprintf(`{"type":"terminal","terminalId":%q}`, it))
		}
	}
	return update(session, fmt.Sprintf(`{"sessionUpdate":"state_update","state":%q%s,"background":[%s]}`, state, stopField, strings.Join(list, ",")))
}

// state is a state_update of s1 listing items (call_* are tool calls).
func state(st, stop string, items ...string) string { return stateIn("s1", st, stop, items...) }

// term is a terminal_update of s1 with extra members (e.g. `,"command":"x"`).
func term(id, extra string) string {
	return update("s1", fmt.Sprintf(`{"sessionUpdate":"terminal_update","terminalId":%q%s}`, id, extra))
}

// exited is the terminal_update that reports a terminal's exit.
func exited(id string) string { return term(id, `,"exitStatus":{"exitCode":0},"capabilities":null`) }

// chunk is a terminal_output_chunk of s1.
func chunk(id string) string {
	return update("s1", fmt.Sprintf(`{"sessionUpdate":"terminal_output_chunk","terminalId":%q,"data":%q}`, id, b64("x")))
}

// tool is a tool_call_update of s1; status "" omits it.
func tool(id, status, extra string) string {
	st := ""
	if status != "" {
		st = fmt.Sprintf(`,"status":%q`, status)
	}
	return update("s1", fmt.Sprintf(`{"sessionUpdate":"tool_call_update","toolCallId":%q%s%s}`, id, st, extra))
}

// refs is tool call content referencing a terminal.
func refs(terminalID string) string {
	return fmt.Sprintf(`,"content":[{"type":"terminal","terminalId":%q}]`, terminalID)
}

// userMsg is a user_message of a session.
func userMsg(session, id string) string {
	return update(session, fmt.Sprintf(`{"sessionUpdate":"user_message","messageId":%q,"content":[{"type":"text","text":"ls"}]}`, id))
}

// result is a successful response.
func result(id int, res string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`, id, res)
}

// rules returns the rule number of each violation, in order.
func rules(vs []Violation) []int {
	var nums []int
	for _, v := range vs {
		nums = append(nums, v.Rule)
	}
	return nums
}

// runScript plays a script through a harness: "-> METHOD SESSION [replay]"
// sends a request (ids 1, 2, ...), any other step is a line the agent writes.
func runScript(t *testing.T, script []string) *harness {
	t.Helper()
	h := newHarness(t)
	for _, step := range script {
		if !strings.HasPrefix(step, "-> ") {
			h.agent(step)
			continue
		}
		f := strings.Fields(step[3:])
		params := map[string]any{"sessionId": f[1]}
		switch f[0] {
		case "session/resume":
			params["cwd"] = "/"
			if len(f) > 2 {
				params["replayFrom"] = map[string]any{"type": "start"}
			}
		case "session/prompt":
			params["prompt"] = []any{map[string]any{"type": "text", "text": "ls"}}
		}
		h.c.Send(f[0], params)
	}
	h.end()
	if errs := h.rec.Errors(); len(errs) != 0 {
		t.Fatalf("the script has wire violations: %q", errs)
	}
	return h
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		script []string
		want   []int // the rules violated, in order
	}{
		// Rule 1: background is always an array.
		{"1 good", []string{state("idle", "end_turn"), state("running", "")}, nil},
		{"1 omitted", []string{update("s1", `{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}`)}, []int{1}},
		{"1 null", []string{update("s1", `{"sessionUpdate":"state_update","state":"running","background":null}`)}, []int{1}},

		// Rule 2: announced before listed.
		{"2 good", []string{term("term_1", ""), tool("call_1", "pending", ""), state("idle", "end_turn", "term_1", "call_1")}, nil},
		{"2 unannounced terminal", []string{tool("call_1", "pending", ""), state("idle", "end_turn", "term_1", "call_1")}, []int{2}},
		{"2 unannounced tool call", []string{term("term_1", ""), state("idle", "end_turn", "term_1", "call_1")}, []int{2}},
		{"2 announced in another session", []string{term("term_1", ""), stateIn("s2", "idle", "end_turn", "term_1")}, []int{2}},

		// Rule 3: listed work is live.
		{"3 good", []string{term("term_1", ""), tool("call_1", "paused", ""), state("running", "", "term_1", "call_1")}, nil},
		{"3 exited terminal", []string{term("term_1", ""), exited("term_1"), state("idle", "end_turn", "term_1")}, []int{3}},
		{"3 final tool call", []string{tool("call_1", "pending", ""), tool("call_1", "cancelled", ""), state("idle", "", "call_1")}, []int{3}},

		// Rule 4: finalized before removed.
		{"4 good", []string{
			term("term_1", ""), tool("call_1", "pending", ""), state("idle", "end_turn", "term_1", "call_1"),
			exited("term_1"), state("idle", "", "call_1"), tool("call_1", "completed", ""), state("idle", ""),
		}, nil},
		{"4 terminal removed while live", []string{term("term_1", ""), state("idle", "end_turn", "term_1"), state("idle", "")}, []int{4}},
		{"4 exitStatus after the removal", []string{term("term_1", ""), state("idle", "end_turn", "term_1"), state("idle", ""), exited("term_1")}, []int{4}},
		{"4 tool call removed unfinished", []string{tool("call_1", "pending", ""), state("idle", "end_turn", "call_1"), tool("call_1", "in_progress", ""), state("running", "")}, []int{4}},
		{"4 good: a live tool call replaced by a terminal it references", []string{
			tool("call_1", "in_progress", ""), state("idle", "end_turn", "call_1"),
			tool("call_1", "", refs("term_2")), term("term_2", ""), state("idle", "", "term_2"),
		}, nil},
		{"4 tool call removed for a terminal it does not reference", []string{
			tool("call_1", "in_progress", refs("term_1")), state("idle", "end_turn", "call_1"),
			term("term_2", ""), state("idle", "", "term_2"),
		}, []int{4}},

		// Rule 5: listed once.
		{"5 good", []string{term("term_1", ""), tool("call_1", "completed", refs("term_1")), state("idle", "end_turn", "term_1")}, nil},
		{"5 twice", []string{term("term_1", ""), state("idle", "end_turn", "term_1", "term_1")}, []int{5}},
		{"5 tool call with its listed terminal", []string{term("term_1", ""), tool("call_1", "in_progress", refs("term_1")), state("idle", "end_turn", "term_1", "call_1")}, []int{5}},
		{"5 content replaced", []string{
			term("term_1", ""), tool("call_1", "in_progress", refs("term_1")), tool("call_1", "", `,"content":[]`),
			state("idle", "end_turn", "term_1", "call_1"),
		}, nil},

		// Rule 6: one exitStatus, with capabilities null; output within the terminal's life.
		{"6 good", []string{
			term("term_1", `,"command":"ls","capabilities":{"cancel":{}}`), chunk("term_1"),
			term("term_1", `,"output":{"data":""}`), chunk("term_1"), exited("term_1"), term("term_1", `,"command":"ls -l"`),
		}, nil},
		{"6 snapshot with the exitStatus", []string{term("term_1", `,"output":{"data":"","_meta":null},"exitStatus":{"signal":"SIGKILL"},"capabilities":null`)}, nil},
		{"6 second exitStatus", []string{term("term_1", ""), exited("term_1"), exited("term_1")}, []int{6}},
		{"6 exitStatus cleared", []string{term("term_1", ""), exited("term_1"), term("term_1", `,"exitStatus":null`)}, []int{6}},
		{"6 capabilities kept", []string{term("term_1", `,"capabilities":{"cancel":{}}`), term("term_1", `,"exitStatus":{"exitCode":1}`)}, []int{6}},
		{"6 capabilities replaced", []string{term("term_1", ""), term("term_1", `,"exitStatus":{"exitCode":1},"capabilities":{}`)}, []int{6}},
		{"6 chunk after exit", []string{term("term_1", ""), exited("term_1"), chunk("term_1"), chunk("term_1")}, []int{6}},
		{"6 snapshot after exit", []string{term("term_1", ""), exited("term_1"), term("term_1", `,"output":{"data":""}`)}, []int{6}},
		{"6 chunk before announcement", []string{chunk("term_1"), chunk("term_1"), term("term_1", ""), chunk("term_1")}, []int{6}},

		// Rule 7: tool call statuses.
		{"7 good", []string{
			tool("call_1", "", ""), tool("call_1", "pending", ""), tool("call_1", "in_progress", ""), tool("call_1", "paused", ""),
			tool("call_1", "in_progress", ""), tool("call_1", "completed", ""), tool("call_1", "completed", `,"title":"done"`), tool("call_1", "", `,"title":"x"`),
		}, nil},
		{"7 back to pending", []string{tool("call_1", "in_progress", ""), tool("call_1", "pending", "")}, []int{7}},
		{"7 reset to pending by null", []string{tool("call_1", "paused", ""), tool("call_1", "", `,"status":null`)}, []int{7}},
		{"7 change after final", []string{tool("call_1", "completed", ""), tool("call_1", "in_progress", "")}, []int{7}},
		{"7 one final to another", []string{tool("call_1", "cancelled", ""), tool("call_1", "completed", "")}, []int{7}},

		// Rule 8: follow-up work is reported with the removal.
		{"8 good: running with the removal", []string{
			tool("call_1", "pending", ""), state("idle", "end_turn", "call_1"), tool("call_1", "completed", ""), state("running", ""),
		}, nil},
		{"8 good: a prompt in between", []string{
			term("term_1", ""), state("idle", "end_turn", "term_1"), exited("term_1"), state("idle", ""),
			userMsg("s1", "m1"), state("running", ""),
		}, nil},
		{"8 good: nothing removed", []string{state("idle", "end_turn"), state("running", "")}, nil},
		{"8 idle [] then running", []string{
			tool("call_1", "pending", ""), state("idle", "end_turn", "call_1"), tool("call_1", "completed", ""), state("idle", ""), state("running", ""),
		}, []int{8}},
		{"8 later updates do not matter", []string{
			term("term_1", ""), state("idle", "end_turn", "term_1"), exited("term_1"), state("idle", ""),
			tool("call_2", "in_progress", ""), state("running", ""),
		}, []int{8}},

		// Rule 9: message ids.
		{"9 good", []string{"-> session/prompt s1", userMsg("s1", "m1"), result(1, `{"messageId":"m1"}`)}, nil},
		{"9 good: response first", []string{"-> session/prompt s1", result(1, `{"messageId":"m1"}`), userMsg("s1", "m1")}, nil},
		{"9 good: rejected prompt", []string{"-> session/prompt s1", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"empty prompt"}}`}, nil},
		{"9 unknown messageId", []string{"-> session/prompt s1", userMsg("s1", "m1"), result(1, `{"messageId":"m2"}`)}, []int{9}},
		{"9 messageId of another session", []string{"-> session/prompt s1", userMsg("s2", "m1"), result(1, `{"messageId":"m1"}`)}, []int{9}},
		{"9 empty messageId", []string{userMsg("s1", "")}, []int{9}},

		// Rule 10: nothing after close.
		{"10 good", []string{
			"-> session/close s1", term("term_1", ""), exited("term_1"), state("idle", "cancelled"), result(1, `{}`),
			stateIn("s2", "idle", "end_turn"),
		}, nil},
		{"10 good: prompt response after close", []string{
			"-> session/prompt s1", "-> session/close s1", result(2, `{}`), `{"jsonrpc":"2.0","id":1,"error":{"code":-32800,"message":"cancelled"}}`,
		}, nil},
		{"10 good: failed close", []string{"-> session/close s1", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`, state("idle", "")}, nil},
		{"10 good: resumed", []string{"-> session/close s1", result(1, `{}`), "-> session/resume s1", state("idle", "")}, nil},
		{"10 update after close", []string{"-> session/close s1", result(1, `{}`), state("idle", ""), state("idle", "")}, []int{10}},
		{"10 request after close", []string{
			"-> session/close s1", result(1, `{}`),
			`{"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{"sessionId":"s1","title":"t","options":[{"optionId":"a","name":"A","kind":"allow_once"}]}}`,
		}, []int{10}},

		// Rule 13: a state_update between session/resume and its response.
		{"13 good", []string{"-> session/resume s1", state("idle", ""), result(1, `{}`)}, nil},
		{"13 good: replay then state", []string{"-> session/resume s1 replay", userMsg("s1", "m1"), state("idle", "end_turn"), result(1, `{}`)}, nil},
		{"13 good: refused", []string{"-> session/resume s1", `{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"x","data":{"sessionId":"s1"}}}`}, nil},
		{"13 no state", []string{"-> session/resume s1", result(1, `{}`), state("idle", "")}, []int{13}},
		{"13 a state before the request", []string{state("idle", ""), "-> session/resume s1", result(1, `{}`)}, []int{13}},
		{"13 a state of another session", []string{"-> session/resume s1", stateIn("s2", "idle", ""), result(1, `{}`)}, []int{13}},

		// Rule 14: a tool call's cancel is cleared with its final status.
		{"14 good", []string{tool("call_1", "pending", `,"capabilities":{"cancel":{}}`), tool("call_1", "cancelled", `,"capabilities":null`)}, nil},
		{"14 good: never advertised", []string{tool("call_1", "in_progress", ""), tool("call_1", "completed", "")}, nil},
		{"14 good: cleared before", []string{tool("call_1", "pending", `,"capabilities":{"cancel":{}}`), tool("call_1", "", `,"capabilities":{}`), tool("call_1", "failed", "")}, nil},
		{"14 kept", []string{tool("call_1", "pending", `,"capabilities":{"cancel":{}}`), tool("call_1", "completed", "")}, []int{14}},
		{"14 advertised with the final status", []string{tool("call_1", "pending", ""), tool("call_1", "failed", `,"capabilities":{"cancel":{}}`)}, []int{14}},

		// A replay starts a session's history over; a plain resume does not.
		{"replay repeats history", []string{term("term_1", ""), exited("term_1"), "-> session/resume s1 replay", term("term_1", ""), exited("term_1")}, nil},
		{"resume without replay", []string{term("term_1", ""), exited("term_1"), "-> session/resume s1", exited("term_1")}, []int{6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := runScript(t, tt.script)
			if got := rules(h.c.Violations()); !slices.Equal(got, tt.want) {
				t.Fatalf("violated rules %v, want %v:\n%v\n%s", got, tt.want, h.c.Violations(), h.c.Dump())
			}
			h.c.Check()
			errs := h.rec.Errors()
			if len(errs) != len(tt.want) {
				t.Fatalf("Check reported %d errors, want %d: %q", len(errs), len(tt.want), errs)
			}
			for i, e := range errs {
				if want := fmt.Sprintf("rule %d ", tt.want[i]); !strings.Contains(e, want) || !strings.Contains(e, "line: {") {
					t.Errorf("report %q lacks %q or the line", e, want)
				}
			}
			h.c.Check()
			if n := len(h.rec.Errors()); n != len(tt.want) {
				t.Errorf("a second Check reported again: %d errors", n)
			}
		})
	}
}
