package main

import (
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
