package supervisor

import (
	"testing"

	"shellagent/ptyio"
)

func TestExitStatusAndOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		exit      ptyio.Exit
		cancelled bool
		status    string // exitStatus as JSON
		outcome   string
	}{
		{"exit 0", ptyio.Exit{Shell: ptyio.Status{Exited: true}}, false, `{"exitCode":0}`, "completed"},
		{"exit 2", ptyio.Exit{Shell: ptyio.Status{Exited: true, Code: 2}}, false, `{"exitCode":2}`, "failed"},
		{"killed by a signal", ptyio.Exit{Shell: ptyio.Status{Signal: "SIGSEGV"}}, false, `{"signal":"SIGSEGV"}`, "failed"},
		{"stopped by the agent", ptyio.Exit{Shell: ptyio.Status{Signal: "SIGTERM"}, Stopped: "SIGTERM"}, false, `{"signal":"SIGTERM"}`, "failed"},
		{"stopped, the shell exited with a code", ptyio.Exit{Shell: ptyio.Status{Exited: true, Code: 143}, Stopped: "SIGKILL"}, false, `{"exitCode":143,"signal":"SIGKILL"}`, "failed"},
		{"stopped although it exited 0", ptyio.Exit{Shell: ptyio.Status{Exited: true}, Stopped: "SIGTERM"}, false, `{"exitCode":0,"signal":"SIGTERM"}`, "failed"},
		{"unknown status", ptyio.Exit{}, false, `{}`, "failed"},
		{"cancelled by session/cancel", ptyio.Exit{Shell: ptyio.Status{Exited: true}}, true, `{"exitCode":0}`, "cancelled"},
	}
	for _, tt := range tests {
		es := exitStatus(tt.exit)
		if got := mustJSON(es); got != tt.status {
			t.Errorf("%s: exitStatus %s, want %s", tt.name, got, tt.status)
		}
		if got := mustJSON(exitStatusRaw(es)); got != tt.status {
			t.Errorf("%s: rawOutput %s, want %s", tt.name, got, tt.status)
		}
		if got := callOutcome(tt.cancelled, es); got != tt.outcome {
			t.Errorf("%s: outcome %s, want %s", tt.name, got, tt.outcome)
		}
	}
}

func TestReplayFrom(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw    string
		replay bool
		bad    bool
	}{
		{"", false, false},
		{"null", false, false},
		{`{"type":"start"}`, true, false},
		{`{"type":"start","_meta":{"x":1}}`, true, false},
		{`{"type":"_later"}`, false, true},
		{`{"type":"messageId","messageId":"msg_3"}`, false, true},
		{`{}`, false, true},
		{`"start"`, false, true},
	}
	for _, tt := range tests {
		replay, err := replayFrom([]byte(tt.raw))
		if replay != tt.replay || (err != nil) != tt.bad || err != nil && !isInvalidParams(err) {
			t.Errorf("replayFrom(%s) = %v, %v", tt.raw, replay, err)
		}
	}
}
