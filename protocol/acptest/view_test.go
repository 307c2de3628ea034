package acptest

import (
	"slices"
	"strings"
	"testing"
)

// probe marks a state_update as a shellagent scenario's.
const probe = `,"_meta":{"shellagent":{"scenario":"s"}}`

// TestView: what a client that follows the client-side rules sees, after
// the last line of each script.
func TestView(t *testing.T) {
	tests := []struct {
		name   string
		script []string
		check  func(v View) bool
	}{
		{"an unknown item counts as running work", []string{
			update("s1", `{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn","background":[{"type":"_x"}]}`),
		}, func(v View) bool { return v.Reported && v.Running() == 1 && !v.Quiet() }},
		{"an omitted list is unknown: nothing is abandoned, nothing quiet", []string{
			term("term_1", ""), tool("call_1", "in_progress", ""), state("idle", "end_turn", "term_1"),
			update("s1", `{"sessionUpdate":"state_update","state":"idle"`+probe+`}`),
		}, func(v View) bool {
			return !v.Reported && v.Background == nil && !v.Quiet() && !v.Abandonable("term_1") && !v.Abandonable("call_1")
		}},
		{"a paused and a pending tool call: idle, listed, nothing running", []string{
			tool("call_1", "paused", ""), tool("call_2", "pending", ""), state("idle", "end_turn", "call_1", "call_2"),
		}, func(v View) bool { return v.Running() == 0 && !v.Quiet() && !v.Abandonable("call_1") }},
		{"an unknown status is in progress", []string{
			tool("call_1", "_waiting", ""), state("idle", "end_turn", "call_1"),
		}, func(v View) bool { return v.ToolCalls["call_1"].InProgress() && v.Running() == 1 }},
		{"a tool call that references a listed terminal is live", []string{
			term("term_1", ""), tool("call_1", "in_progress", refs("term_1")), state("idle", "end_turn", "term_1"),
		}, func(v View) bool {
			return v.Live("call_1") && !v.Listed("call_1") && !v.Abandonable("call_1") && v.Running() == 1
		}},
		{"unlisted unfinished work may be abandoned once idle", []string{
			term("term_1", ""), tool("call_1", "in_progress", ""), state("idle", "end_turn"),
		}, func(v View) bool { return v.Quiet() && v.Abandonable("call_1") && v.Abandonable("term_1") }},
		{"not while running", []string{
			tool("call_1", "in_progress", ""), state("running", ""),
		}, func(v View) bool { return !v.Abandonable("call_1") }},
		{"capabilities: an object replaces, null clears", []string{
			term("term_1", `,"capabilities":{"cancel":{}}`), tool("call_1", "pending", `,"capabilities":{"cancel":{}}`),
			term("term_1", `,"capabilities":{}`), tool("call_1", "", `,"capabilities":null`), tool("call_2", "pending", `,"capabilities":{"cancel":{}}`),
		}, func(v View) bool {
			return !v.Terminals["term_1"].Cancel && !v.ToolCalls["call_1"].Cancel && v.ToolCalls["call_2"].Cancel
		}},
		{"a repeated idle is not a new completion", []string{
			state("running", ""), state("idle", "end_turn"), state("idle", "end_turn"), state("idle", ""),
		}, func(v View) bool { return v.Completions == 1 && v.Quiet() }},
		{"an unknown state is busy, not idle", []string{
			state("idle", "end_turn"), update("s1", `{"sessionUpdate":"state_update","state":"_thinking","background":[]}`),
		}, func(v View) bool { return v.Busy && !v.Quiet() }},
		{"a replay starts the view over", []string{
			state("running", ""), term("term_1", ""), state("idle", "end_turn", "term_1"),
			"-> session/resume s1 replay",
			state("running", ""), state("idle", "end_turn"),
		}, func(v View) bool { return v.Completions == 1 && v.Terminals["term_1"] == nil && v.Quiet() }},
		{"a plain resume does not", []string{
			state("running", ""), state("idle", "end_turn"), "-> session/resume s1", state("running", ""), state("idle", "end_turn"),
		}, func(v View) bool { return v.Completions == 2 }},
		{"the list comes back", []string{
			term("term_1", ""), update("s1", `{"sessionUpdate":"state_update","state":"idle"`+probe+`}`), state("idle", "", "term_1"),
		}, func(v View) bool { return v.Reported && v.Listed("term_1") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := runScript(t, tt.script)
			if v := h.c.View("s1", nil); !tt.check(v) {
				t.Errorf("view %+v", v)
			}
		})
	}
}

// TestCheckProbes: a state_update that a scenario marks may leave its
// list out (rule 1) or follow the emptied list with running (rule 8); a
// malformed list is taken as unreported, not checked as a list.
func TestCheckProbes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []string
		want   []int
	}{
		{"marked, no list", []string{update("s1", `{"sessionUpdate":"state_update","state":"idle"`+probe+`}`)}, nil},
		{"marked running after the list emptied", []string{
			term("term_1", ""), state("idle", "end_turn", "term_1"), exited("term_1"), state("idle", ""),
			update("s1", `{"sessionUpdate":"state_update","state":"running","background":[]`+probe+`}`),
		}, nil},
		{"unmarked running after the list emptied", []string{
			term("term_1", ""), state("idle", "end_turn", "term_1"), exited("term_1"), state("idle", ""), state("running", ""),
		}, []int{RuleFollowUp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := runScript(t, tc.script)
			if got := rules(h.c.Violations()); !slices.Equal(got, tc.want) {
				t.Errorf("violations %v, want rules %v", h.c.Violations(), tc.want)
			}
		})
	}

	h := newHarness(t, WithTolerated(func(v Violation) bool { return v.Rule == Wire }))
	h.agent(term("term_1", ""), state("idle", "end_turn", "term_1"),
		update("s1", `{"sessionUpdate":"state_update","state":"idle","background":[{"type":"terminal"}]}`),
		state("idle", "", "term_1"))
	h.end()
	if got := rules(h.c.Violations()); len(got) != 1 || got[0] != Wire || !strings.Contains(h.c.Violations()[0].Text, "terminalId") {
		t.Errorf("a malformed list: violations %v, want its wire violation only", h.c.Violations())
	}
	if errs := h.rec.Errors(); len(errs) != 0 {
		t.Errorf("a tolerated violation was reported: %q", errs)
	}
	if v := h.c.View("s1", h.c.Transcript()[2]); v.Reported || v.Abandonable("term_1") {
		t.Errorf("the view after a malformed list: %+v, want background work unknown", v)
	}
}
