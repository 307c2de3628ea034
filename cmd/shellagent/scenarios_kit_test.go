package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"shellagent/protocol/acptest"
	kit "shellagent/scenario"
)

// The golden transcripts of /scenario: testdata/transcripts/scenario-NAME.jsonl,
// one per scenario of package scenario, played with a hold of 0s. Most
// need nothing of the client; the interactive ones get what they ask for.

// scenarioClient is what the client does while a scenario plays, once its
// turn has started, by scenario name.
var scenarioClient = map[string]func(s *script){
	"permission-cancel": func(s *script) {
		bg := s.await("the request for listed work", isPermission)
		fg := s.await("the request for foreground work", isPermission)
		s.notify("session/cancel", map[string]string{"sessionId": s.sid})
		s.await("the foreground request withdrawn", isWithdrawal(fg))
		s.respond(fg, cancelled)
		s.await("the listed request withdrawn", isWithdrawal(bg))
		s.respond(bg, cancelled)
	},
	"close": func(s *script) {
		req := s.await("the request for listed work", isPermission)
		s.idle("end_turn", 3)
		s.call("session/close", map[string]string{"sessionId": s.sid})
		s.respond(req, cancelled) // the RFD's MUST: the close left it open
		// A last request: its answer follows the one above on the wire
		// (for a replay, which ends once the client's lines are all sent).
		s.call("session/list", map[string]any{})
	},
	"cancel-race": func(s *script) {
		listed := s.idle("end_turn", 2).Background()
		s.cancelTerminal(listed[0].ID, 1)
		s.call("tool_call/cancel", map[string]string{"sessionId": s.sid, "toolCallId": listed[1].ID})
		s.idle("", 0)
	},
}

func isPermission(m *acptest.Msg) bool { return m.Method == "session/request_permission" }

// isWithdrawal matches the $/cancel_request of request req.
func isWithdrawal(req *acptest.Msg) func(*acptest.Msg) bool {
	return func(m *acptest.Msg) bool {
		return m.Method == "$/cancel_request" && strings.Contains(string(m.Params), string(req.ID))
	}
}

// respond answers the agent's request req.
func (s *script) respond(req *acptest.Msg, result any) {
	s.raw(s.encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result}))
}

// playScenario plays scenario name with no hold, does what it asks of the
// client, and waits for its end: the message that says so and the last
// state_update, unless it ends with the session.
func (s *script) playScenario(name string) {
	s.t.Helper()
	s.prompt("/scenario " + name + " 0s")
	if do := scenarioClient[name]; do != nil {
		do(s)
	}
	if name == "close" {
		return
	}
	s.await("the end of "+name, func(m *acptest.Msg) bool {
		return m.Kind == "agent_message" && strings.Contains(m.Text(), "Scenario "+name+" is over")
	})
	s.await("the last state_update", func(m *acptest.Msg) bool { return m.Kind == "state_update" })
}

// malformedLine reports the one line that scenario malformed-background
// sends on purpose: its list fails the schema.
func malformedLine(v acptest.Violation) bool {
	return v.Rule == acptest.Wire && strings.Contains(v.Text, "state_update")
}

// invalidTranscript reports whether the golden transcript file is that of
// a scenario that sends a message the schema forbids on purpose.
func invalidTranscript(file string) bool {
	name, ok := strings.CutPrefix(strings.TrimSuffix(filepath.Base(file), ".jsonl"), "scenario-")
	sc := kit.Lookup(name)
	return ok && sc != nil && sc.Invalid
}

func init() {
	for _, sc := range kit.All {
		var opts []acptest.Option
		var args []string
		if sc.Invalid {
			args, opts = []string{"--scenarios-invalid"}, []acptest.Option{acptest.WithTolerated(malformedLine)}
		}
		scenarios = append(scenarios, scenario{name: "scenario-" + sc.Name, args: args, opts: opts, run: func(s *script) {
			s.open()
			s.playScenario(sc.Name)
			if check := scenarioView[sc.Name]; check != nil {
				check(&viewer{s: s})
			} else {
				s.t.Errorf("scenario %s: no check of the strict client's view", sc.Name)
			}
		}})
	}
}

// TestScenarioInvalidIsTheOnlyInvalid: the transcripts of every scenario
// but the invalid ones hold only valid messages (TestTranscripts' strict
// client reports any other); the invalid one's holds exactly one, its
// malformed list.
func TestScenarioInvalidIsTheOnlyInvalid(t *testing.T) {
	t.Parallel()
	for _, sc := range kit.All {
		if !sc.Invalid {
			continue
		}
		s := startScriptWith(t, []acptest.Option{acptest.WithTolerated(malformedLine)}, "--scenarios-invalid")
		s.open()
		s.playScenario(sc.Name)
		s.c.Close()
		var bad []acptest.Violation
		for _, v := range s.c.Violations() {
			if v.Rule == acptest.Wire {
				bad = append(bad, v)
			}
		}
		if len(bad) != 1 || !strings.Contains(s.c.Transcript()[bad[0].Seq].String(), `"background":[{"type":"terminal"}]`) {
			t.Errorf("%s: wire violations %v, want the malformed list only", sc.Name, bad)
		}
	}
}

// viewer looks at a scenario's session as the strict client's View shows
// it.
type viewer struct{ s *script }

// find returns the first message of the session at or after from that
// matches pred.
func (v *viewer) find(from *acptest.Msg, what string, pred func(*acptest.Msg) bool) *acptest.Msg {
	v.s.t.Helper()
	for _, m := range v.s.c.Transcript() {
		if (from == nil || m.Seq >= from.Seq) && m.SessionID == v.s.sid && pred(m) {
			return m
		}
	}
	v.s.t.Fatalf("no %s in the transcript", what)
	return nil
}

// at is the view right after m.
func (v *viewer) at(m *acptest.Msg) acptest.View { return v.s.c.View(v.s.sid, m) }

func (v *viewer) expect(ok bool, format string, args ...any) {
	v.s.t.Helper()
	if !ok {
		v.s.t.Errorf(format, args...)
	}
}

func endTurn(m *acptest.Msg) bool { return m.State() == "idle" && m.StopReason() == "end_turn" }
func isState(m *acptest.Msg) bool { return m.Kind == "state_update" }

// scenarioView checks, for each scenario, that the strict client's view
// of the session agrees with the scenario's rule.
var scenarioView = map[string]func(v *viewer){
	"unknown-item": func(v *viewer) {
		end := v.find(nil, "the turn's end", endTurn)
		view := v.at(end)
		v.expect(view.Running() == 1 && !view.Quiet(), "an unknown item only: %+v, want one running, not quiet", view)
		v.expect(v.at(v.find(end, "the removal", func(m *acptest.Msg) bool { return isState(m) && m.Seq > end.Seq })).Quiet(), "quiet once it is removed")
	},
	"omitted-background": func(v *viewer) {
		m := v.find(nil, "the snapshot without a list", func(m *acptest.Msg) bool { return isState(m) && !m.HasKey("background") })
		view := v.at(m)
		v.expect(!view.Reported && !view.Quiet() && !view.Abandonable("term_1") && !view.Terminals["term_1"].Exited, "after an omitted list: %+v", view)
	},
	"paused": func(v *viewer) {
		view := v.at(v.find(nil, "the turn's end", endTurn))
		v.expect(len(view.Background) == 2 && view.Running() == 0 && !view.Quiet(), "a pending and a paused tool call: %+v, want listed, nothing running, not quiet", view)
		for _, it := range view.Background {
			v.expect(!view.Abandonable(it.ID), "%s abandonable", it)
		}
		watch := view.Background[1].ID
		var seq []string
		listed := false
		for _, m := range v.s.c.Updates(v.s.sid) {
			switch {
			case m.ToolCallID() == watch && m.HasKey("status"):
				seq = append(seq, m.Status())
			case isState(m) && len(seq) > 0 && seq[len(seq)-1] != "cancelled":
				// From its first listing to its end, paused or not.
				listed = listed || m.Background() != nil && v.at(m).Listed(watch)
				v.expect(!listed || v.at(m).Listed(watch), "the watch unlisted while %s: %s", seq[len(seq)-1], m.Raw)
			}
		}
		v.expect(listed && strings.Join(seq, ",") == "in_progress,paused,in_progress,paused,cancelled", "the watch's statuses: %v", seq)
	},
	"unknown-status": func(v *viewer) {
		m := v.find(nil, "the unknown status", func(m *acptest.Msg) bool { return m.Status() == kit.UnknownStatus })
		view := v.at(v.find(m, "the turn's end", endTurn))
		tc := view.ToolCalls[m.ToolCallID()]
		v.expect(tc.InProgress() && view.Running() == 1, "a tool call with an unknown status: %+v, want in progress and running", tc)
	},
	"capabilities": func(v *viewer) {
		var seen []bool
		for _, m := range v.s.c.Updates(v.s.sid) {
			if m.Kind == "terminal_update" && m.HasKey("capabilities") {
				seen = append(seen, v.at(m).Terminals[m.TerminalID()].Cancel)
			}
		}
		v.expect(fmt.Sprint(seen) == "[true false true false true false]", "the terminal advertises cancel after each patch: %v", seen)
	},
	"codex-style": func(v *viewer) {
		view := v.at(v.find(nil, "the turn's end", endTurn))
		v.expect(view.Running() == 1 && view.Listed("term_1") && !view.Listed("call_1") && view.Live("call_1") &&
			view.ToolCalls["call_1"].InProgress(), "a Codex-style command: %+v, want its terminal listed and its tool call live, in progress", view)
	},
	"stale-tool-call": func(v *viewer) {
		view := v.at(v.find(nil, "the turn's end", endTurn))
		v.expect(view.Quiet() && view.Abandonable("call_1") && view.Abandonable("term_1"), "stale work: %+v, want both abandonable", view)
		exit := v.find(nil, "the made-up terminal's exit", func(m *acptest.Msg) bool { return m.ExitStatus() != nil })
		v.expect(len(exit.ExitStatus()) == 0 && v.at(exit).Terminals["term_1"].Exited, "exitStatus {} marks it exited")
	},
	"error-stop-reason": func(v *viewer) {
		m := v.find(nil, "the failed turn", func(m *acptest.Msg) bool { return m.StopReason() == "error" })
		view := v.at(m)
		v.expect(view.Listed("term_1") && !view.Terminals["term_1"].Exited && view.ToolCalls["call_2"].Status == "failed" && view.Completions == 1,
			"after the error stop reason: %+v, want the background terminal running and listed, the foreground call failed", view)
		errObj, _ := m.Update["error"].(map[string]any)
		v.expect(errObj["message"] != nil, "the error stop reason carries its error: %v", m.Update)
	},
	"replacement-snapshot": func(v *viewer) {
		out := string(v.s.c.Output(v.s.sid, "term_1"))
		v.expect(out == "before the snapshot\r\nafter the snapshot\r\n" && v.s.c.Snapshots(v.s.sid, "term_1") == 1, "the terminal as the client rebuilt it: %q", out)
	},
	"follow-up": func(v *viewer) {
		done := v.find(nil, "the wakeup's end", func(m *acptest.Msg) bool { return m.ToolCallID() == "call_1" && m.Status() == "completed" })
		removal := v.find(done, "the removal", isState)
		view := v.at(removal)
		v.expect(view.State == "running" && !view.Listed("call_1"), "the snapshot that removes the wakeup: %+v, want running", view)
	},
	"quiet-grace": func(v *viewer) {
		exit := v.find(nil, "the exit", func(m *acptest.Msg) bool { return m.ExitStatus() != nil })
		quiet := v.find(exit, "the emptied list", isState)
		run := v.find(quiet, "the follow-up", func(m *acptest.Msg) bool { return m.State() == "running" })
		v.expect(v.at(quiet).Quiet() && run.Probe() == "quiet-grace", "quiet, then marked foreground work")
		v.expect(run.At.Sub(quiet.At) > 0, "the follow-up comes after the quiet snapshot")
	},
	"unknown-state": func(v *viewer) {
		view := v.at(v.find(nil, "the unknown state", func(m *acptest.Msg) bool { return m.State() == kit.UnknownState }))
		v.expect(view.Busy && !view.Quiet() && view.State != "idle", "an unknown state: %+v, want a generic busy state", view)
	},
	"repeated-idle": func(v *viewer) {
		view := v.at(nil)
		v.expect(view.Completions == 1, "a repeated idle end_turn: %d completions, want 1", view.Completions)
	},
	"silent-terminal": func(v *viewer) {
		view := v.at(v.find(nil, "the turn's end", endTurn))
		v.expect(view.Listed("term_1") && !view.Terminals["term_1"].Exited && len(v.s.c.Output(v.s.sid, "term_1")) == 0, "a silent terminal: %+v, want it running", view)
	},
	"permission-cancel": func(v *viewer) {
		view := v.at(v.find(nil, "the cancelled turn", func(m *acptest.Msg) bool { return m.StopReason() == "cancelled" }))
		v.expect(view.Listed("call_1") && view.ToolCalls["call_2"].Final(), "after session/cancel: %+v, want the listed call_1 live, call_2 final", view)
	},
	"close": func(v *viewer) {
		resp := v.s.last
		for _, m := range v.s.c.Transcript() {
			if m.ReqMethod == "session/close" {
				resp = m
			}
		}
		view := v.at(resp)
		v.expect(view.Listed("call_3") && !view.ToolCalls["call_3"].Final() && view.Terminals["term_1"].Exited && view.ToolCalls["call_2"].Final(),
			"at the close response: %+v, want call_3 listed and unfinished (a client takes it as cancelled), the real work final", view)
	},
	"cancel-race": func(v *viewer) {
		exit := v.find(nil, "the exit", func(m *acptest.Msg) bool { return m.ExitStatus() != nil })
		v.expect(exit.ExitStatus()["exitCode"] == 0.0 && exit.ExitStatus()["signal"] == nil, "the terminal ended on its own: %v", exit.ExitStatus())
		view := v.at(nil)
		v.expect(view.ToolCalls["call_2"].Status == "completed" && !view.ToolCalls["call_2"].Cancel && view.Quiet(), "the tool call finished first: %+v", view)
	},
	"malformed-background": func(v *viewer) {
		m := v.find(nil, "the malformed list", func(m *acptest.Msg) bool { return m.Probe() != "" })
		view := v.at(m)
		v.expect(!view.Reported && !view.Abandonable("term_1"), "a malformed list: %+v, want background work unknown", view)
	},
}

// The v1 golden transcripts of /scenario: the scenarios that mean
// something in v1, played through the v1 front, and one that does not,
// which says so (after /scenario's list, as a v1 client reads it).
func init() {
	for _, sc := range kit.All {
		if !sc.V1 {
			continue
		}
		v1Scenarios = append(v1Scenarios, v1Scenario{name: "scenario-" + sc.Name, args: []string{"--kill-grace", "1s"}, run: func(s *v1Script) {
			s.open()
			id := fmt.Sprint(s.sendPrompt("/scenario " + sc.Name + " 0s"))
			// The turn ends (the prompt's answer) before the scenario is
			// over, or with it.
			s.both(func(m *acptest.Msg) bool { return m.IsResponse() && string(m.ID) == id },
				func(m *acptest.Msg) bool {
					return m.Kind == "agent_message_chunk" && strings.Contains(m.Text(), "Scenario "+sc.Name+" is over")
				})
		}})
	}
	v1Scenarios = append(v1Scenarios, v1Scenario{name: "scenario-v2-only", run: func(s *v1Script) {
		s.open()
		s.prompt("/scenario")
		s.prompt("/scenario unknown-item 0s")
	}})
}

// both waits for a message that matches a and one that matches b, in
// either order, after the last one waited for.
func (s *script) both(a, b func(*acptest.Msg) bool) {
	s.t.Helper()
	from := s.last
	ma := s.c.WaitAfter(from, "the prompt's answer", a)
	mb := s.c.WaitAfter(from, "the scenario's end", b)
	s.last = ma
	if mb.Seq > ma.Seq {
		s.last = mb
	}
}
