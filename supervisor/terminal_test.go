package supervisor

import (
	"bytes"
	"strconv"
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

// A command's output is held for the client from its first byte, though
// the session announces the terminal only after the launch returns: here
// the command writes four rings' worth before the launch returns, as a
// flood does when the session's goroutine is slow to run on (a loaded
// machine). The client still gets every byte, and no replacement.
func TestOutputIsHeldFromTheFirstByte(t *testing.T) {
	t.Parallel()
	const scrollback = 4 << 10
	data := seqBytes(4 * scrollback)
	h := newHarness(t, Config{Scrollback: scrollback, Launcher: playedLauncher{out: data, eager: true}})
	sid := h.newSession()
	h.prompt(sid, "flood")
	h.idle(nil, sid, "end_turn")
	if got := h.c.Output(sid, "term_1"); !bytes.Equal(got, data) {
		t.Errorf("client got %d bytes, want the command's %d", len(got), len(data))
	}
	if n := h.c.Snapshots(sid, "term_1"); n > 0 {
		t.Errorf("%d replacement snapshots for a client that reads", n)
	}
}

// seqBytes returns n bytes of decimal numbers, one per line, so that a
// byte out of place shows.
func seqBytes(n int) []byte {
	var b []byte
	for i := 1; len(b) < n; i++ {
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, '\n')
	}
	return b[:n]
}
