package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/stack"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// /down sent while /up (or /restart) waits for a service that is not ready (whatever
// its ready condition, with a ready_timeout of a minute) ends the wait of
// /up at once, saying that /down ended it, and stops the service: its run
// ends by SIGTERM, its tool call completes, and nothing is left. Before,
// /down waited behind /up until the ready_timeout ran out, a minute.
func TestStackDownEndsAnUpThatWaits(t *testing.T) {
	t.Parallel()
	port := strconv.Itoa(freePort(t)) // a port nobody listens on
	for _, tt := range []struct{ name, ready, up string }{
		{"regex", "never printed", "/up"},
		{"port", ":" + port, "/up"},
		{"url", "http://127.0.0.1:" + port + "/", "/up"},
		{"exec fails", "exec:exit 1", "/up"},
		{"exec runs on", "exec:sleep 30", "/up"},
		{"restart", "never printed", "/restart s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, sid := stackHarness(t, Config{}, stack.TOMLFile, `
[services.s]
command = "echo booting; exec sleep 120"
ready = "`+tt.ready+`"
ready_timeout = "60s"
`)
			h.run(sid, tt.up)
			h.output(sid, "term_1", "booting")
			start := time.Now()
			h.run(sid, "/down")
			down := h.agentText(nil, sid, "Stopped: s.")
			if took, bound := time.Since(start), testloop.Bound(5*time.Second); took > bound {
				t.Errorf("/down answered after %v, want within %v (the ready_timeout is 60s)", took, bound)
			}
			if said := agentTexts(h, sid); len(said) != 2 || said[0] != upInterrupted {
				t.Errorf("the agent said %q; want /up's %q, then /down's answer", said, upInterrupted)
			}
			h.idle(down, sid, acp.StopEndTurn)
			calls := h.serviceCalls(sid)["s"]
			if len(calls) != 1 {
				t.Fatalf("service s: tool calls %v, want one", calls)
			}
			h.toolStatus(nil, sid, calls[0], acp.StatusCompleted)
			h.exit(nil, sid, "term_1")
			noneLeft(t, h)
		})
	}
}

// upInterrupted is what /up says of s when /down ends its wait.
const upInterrupted = "Interrupted by /down: no longer waiting for s to be ready; /down stops it."

// agentTexts returns the agent messages of sid, in order.
func agentTexts(h *harness, sid string) []string {
	var out []string
	for _, m := range h.c.Updates(sid) {
		if m.Kind == acp.KindAgentMessage {
			out = append(out, m.Text())
		}
	}
	return out
}

// noneLeft fails t if a process of h's test is left, once a SIGKILL sent
// has had time to take effect on a loaded machine.
func noneLeft(t *testing.T, h *harness) {
	t.Helper()
	left := acptest.ProcessesWith(h.marker)
	for deadline := time.Now().Add(testloop.Bound(time.Second)); len(left) > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		left = acptest.ProcessesWith(h.marker)
	}
	if len(left) > 0 {
		t.Errorf("processes left after /down: %v", left)
	}
}

// Each other way of stopping a service while /up waits for it to be
// ready (ready_timeout a minute) stops it at once: tool_call/cancel of
// its tool call and terminal/cancel of its run end the wait of /up and
// its tool call completed; session/close answers once its run has ended.
// /up says which stopped it. Before, it said "s stopped: stopped".
func TestStackStopsWhileUpWaits(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		stop   func(h *harness, sid string) int64
		status string // the service's tool call's last
		up     string // what /up says
	}{
		{"tool_call/cancel", func(h *harness, sid string) int64 {
			return h.c.Send("tool_call/cancel", map[string]string{"sessionId": sid, "toolCallId": "call_1"})
		}, acp.StatusCompleted, "Failed: s stopped: its tool call call_1 was cancelled."},
		{"terminal/cancel", func(h *harness, sid string) int64 {
			return h.c.Send("terminal/cancel", map[string]string{"sessionId": sid, "terminalId": "term_1"})
		}, acp.StatusCompleted, "Failed: s stopped: its run term_1 was cancelled."},
		{"session/close", func(h *harness, sid string) int64 {
			return h.c.Send("session/close", map[string]string{"sessionId": sid})
		}, acp.StatusCancelled, "Failed: s stopped: the session closed."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, sid := stackHarness(t, Config{}, stack.TOMLFile, `
[services.s]
command = "echo booting; exec sleep 120"
ready = "exec:sleep 30"
ready_timeout = "60s"
`)
			h.run(sid, "/up")
			h.output(sid, "term_1", "booting")
			start := time.Now()
			if m := h.c.Wait(tt.stop(h, sid)); m.Error != nil {
				t.Fatalf("%s: %v", tt.name, m.Error)
			}
			h.exit(nil, sid, "term_1")
			h.toolStatus(nil, sid, "call_1", tt.status)
			if took, bound := time.Since(start), testloop.Bound(5*time.Second); took > bound {
				t.Errorf("s stopped after %v, want within %v (the ready_timeout is 60s)", took, bound)
			}
			up := h.agentText(nil, sid, "Failed: ")
			if up.Text() != tt.up {
				t.Errorf("/up said %q, want %q", up.Text(), tt.up)
			}
			noneLeft(t, h)
		})
	}
}

// An exec: ready condition that does not hold within ready_timeout fails
// its service with a reason that says plainly what happened: the
// condition, how long it waited, how many tries ran and how the last one
// ended, whether it exited non-zero or was still running when the time
// ran out, or at its own limit of 5s (and was stopped). Before, a try cut
// short said "still running after 5s" as if it were the service, and a
// try still running at the timeout was not mentioned at all.
func TestStackExecReadyTimeoutSays(t *testing.T) {
	t.Parallel()
	type service struct{ name, ready, timeout, want string }
	// ended is the pattern of tries whose last ended so, or (on a loaded
	// machine, where a try of exit 7 may take a while) whose last was cut
	// short by the timeout, and the one before ended so.
	ended := func(end string) string {
		return `\d+ tries; the last (was still running when the 1s ran out \(it had run [0-9.]+m?s\) and was stopped; the one before )?ended: ` + end
	}
	cases := []service{
		{"fails", "exec:exit 7", "1s", `fails failed: not ready: exec:exit 7 did not exit 0 within 1s: ` + ended(`exit status 7`)},
		{"says", "exec:echo no response; echo from db >&2; exit 2", "1s", `says failed: not ready: exec:echo no response; echo from db >&2; exit 2 did not exit 0 within 1s: ` + ended(`exit status 2, its last line: "from db"`)},
		{"slow", "exec:sleep 10", "1s", `slow failed: not ready: exec:sleep 10 did not exit 0 within 1s: its one try was still running when the 1s ran out, and was stopped`},
	}
	if testloop.Enabled() {
		cases = append(cases, service{"cut", "exec:sleep 10", "6s", `cut failed: not ready: exec:sleep 10 did not exit 0 within 6s: 2 tries; the last was still running when the 6s ran out \(it had run [0-9.]+m?s\) and was stopped; the one before was still running after 5s, its limit, and was stopped`})
	}
	var file strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&file, "[services.%s]\ncommand = \"echo %s runs; exec sleep 60\"\nready = %q\nready_timeout = %q\n\n", c.name, c.name, c.ready, c.timeout)
	}
	h, sid := stackHarness(t, Config{}, stack.TOMLFile, file.String())
	m := h.answers(nil, sid, "/up", "Failed:")
	for _, c := range cases {
		if !regexp.MustCompile(c.want).MatchString(m.Text()) {
			t.Errorf("/up said %q, without %q", m.Text(), c.want)
		}
		ns := h.notices(sid, "service "+c.name+" failed")
		if len(ns) != 1 {
			t.Errorf("notices of %s %v, want one", c.name, ns)
			continue
		}
		if title := ns[0].Update["title"].(string); !regexp.MustCompile(strings.TrimPrefix(c.want, c.name+" ")).MatchString(title) {
			t.Errorf("the notice of %s says %q, without %q", c.name, title, c.want)
		}
	}
}

// /restart NAME sent while /up waits for NAME to be ready ends that wait
// at once, as /down does, and restarts it: here its second run is ready.
// Before, /restart waited behind /up until NAME's ready_timeout (a
// minute) ran out.
func TestStackRestartEndsAnUpThatWaits(t *testing.T) {
	t.Parallel()
	h, sid := stackHarness(t, Config{}, stack.TOMLFile, `
[services.s]
command = "if [ -e ran ]; then echo ready; else touch ran; echo booting; fi; exec sleep 120"
ready = "^ready$"
ready_timeout = "60s"
`)
	h.run(sid, "/up")
	h.output(sid, "term_1", "booting")
	start := time.Now()
	h.run(sid, "/restart s")
	ready := h.agentText(nil, sid, "Ready: s.")
	if took, bound := time.Since(start), testloop.Bound(5*time.Second); took > bound {
		t.Errorf("/restart answered after %v, want within %v (the ready_timeout is 60s)", took, bound)
	}
	want := "Interrupted by /restart: no longer waiting for s to be ready; /restart starts it again."
	if said := agentTexts(h, sid); len(said) != 2 || said[0] != want {
		t.Errorf("the agent said %q; want /up's %q, then /restart's answer", said, want)
	}
	h.answers(ready, sid, "/down", "Stopped: s.")
	noneLeft(t, h)
}

// An /up (or a /restart) still queued behind another prompt's command
// when a /down (or a /restart) that supersedes it is queued behind it
// does not wait for its services once it starts: its wait ends at once,
// as it would had it been running when the other was sent, and the
// command behind it runs next. Before, the /up started its services and
// waited out their ready_timeout before /down ran.
func TestStackQueuedUpIsSuperseded(t *testing.T) {
	t.Parallel()
	// s is ready once the test has seen the first command's answer.
	const command = "echo booting; while [ ! -e ok ]; do sleep 0.05; done; echo ready; exec sleep 120"
	for _, tt := range []struct{ name, first, then, said, answer string }{
		{"up then down", "/up", "/down", upInterrupted, "Stopped: s."},
		{"restart then down", "/restart s", "/down", upInterrupted, "Stopped: s."},
		{"up then restart", "/up", "/restart s", "Interrupted by /restart: no longer waiting for s to be ready; /restart starts it again.", "Ready: s."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, sid := stackHarness(t, Config{}, stack.TOMLFile, `
[services.s]
command = "`+command+`"
ready = "^ready$"
ready_timeout = "10s"
`)
			h.run(sid, "while [ ! -e go ]; do sleep 0.05; done")
			first, then := h.prompt(sid, tt.first), h.prompt(sid, tt.then)
			h.await(sid, tt.first+" and "+tt.then+" are held", func(st *state) bool { return len(st.turns.held) == 2 })
			if err := os.WriteFile(filepath.Join(h.cwd, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, id := range []int64{first, then} {
				if m := h.c.Wait(id); m.Error != nil {
					t.Fatalf("prompt: %v", m.Error)
				}
			}
			said := h.update(nil, sid, acp.KindAgentMessage, tt.first+"'s answer", nil)
			if said.Text() != tt.said {
				t.Errorf("%s said %q, want %q", tt.first, said.Text(), tt.said)
			}
			if err := os.WriteFile(filepath.Join(h.cwd, "ok"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			answer := h.agentText(said, sid, tt.answer)
			h.idle(answer, sid, acp.StopEndTurn)
			if tt.then != "/down" {
				h.answers(answer, sid, "/down", "Stopped: s.")
			}
			for _, term := range h.runsOf(sid, command) {
				h.exit(nil, sid, term)
			}
			noneLeft(t, h)
		})
	}
}
