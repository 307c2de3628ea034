package supervisor

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/contain/containtest"
	"shellagent/internal/sessiontest"
	"shellagent/internal/testloop"
	"shellagent/protocol/acptest"
)

// A terminal whose process a SIGKILL cannot end (frozen in uninterruptible
// sleep, as on a dead NFS or FUSE mount) does not hold session/close for
// ever: GiveUp after the SIGKILL it is reported ended, exitStatus signal
// SIGKILL with the pid left in _meta.shellagent.left (the client checks
// every message against the schema), and the close answers. Once the
// process can go, it is released: no process of the test is left, and no
// second exitStatus comes. Before ptyio's GiveUp the close never answered.
func TestCloseAnswersDespiteAnUnkillableProcess(t *testing.T) {
	t.Parallel()
	h := undyingHarness(t)
	sid := h.newSession()
	h.run(sid, "/bg echo ready; exec sleep 300")
	h.output(sid, "term_1", "ready")
	pid := h.sleeping("300")
	thaw := containtest.Unkillable(t, pid)
	start := time.Now()
	closeID := h.c.Send("session/close", map[string]string{"sessionId": sid})
	resp := h.c.Wait(closeID)
	if resp.Error != nil {
		t.Fatalf("close: %v", resp.Error)
	}
	if d, bound := time.Since(start), testloop.Bound(100*time.Millisecond+giveUp)+shutdownSlack; d > bound {
		t.Errorf("close took %v, more than %v", d, bound)
	}
	exit := h.exit(nil, sid, "term_1")
	es := exit.ExitStatus()
	meta, _ := es["_meta"].(map[string]any)
	sa, _ := meta["shellagent"].(map[string]any)
	left, _ := sa["left"].([]any)
	if es["signal"] != "SIGKILL" || len(left) != 1 || left[0] != float64(pid) {
		t.Errorf("exitStatus %v, want signal SIGKILL and _meta.shellagent.left [%d]", es, pid)
	}
	if exit.Seq > resp.Seq {
		t.Error("exitStatus after the close response")
	}
	thaw()
	sessiontest.Poll(t, "the unkillable process to go once thawed", func() bool {
		return !slices.Contains(acptest.ProcessesWith(h.marker), pid)
	})
	exits := 0
	for _, m := range h.c.Updates(sid) {
		if m.TerminalID() == "term_1" && m.ExitStatus() != nil {
			exits++
		}
	}
	if exits != 1 {
		t.Errorf("%d exitStatus for term_1, want 1", exits)
	}
}

// session/cancel of a foreground command whose process a SIGKILL cannot
// end ends the turn GiveUp after the SIGKILL: the exitStatus with the pid
// left, the tool call cancelled, the idle update cancelled.
func TestCancelEndsTheTurnDespiteAnUnkillableProcess(t *testing.T) {
	t.Parallel()
	h := undyingHarness(t)
	sid := h.newSession()
	h.prompt(sid, "echo ready; exec sleep 301")
	h.output(sid, "term_1", "ready")
	pid := h.sleeping("301")
	thaw := containtest.Unkillable(t, pid)
	h.c.Notify("session/cancel", map[string]string{"sessionId": sid})
	exit := h.exit(nil, sid, "term_1")
	if es := exit.ExitStatus(); es["signal"] != "SIGKILL" || es["_meta"] == nil {
		t.Errorf("exitStatus %v, want signal SIGKILL and _meta", es)
	}
	h.toolStatus(exit, sid, "call_1", "cancelled")
	h.idle(exit, sid, "cancelled")
	thaw()
	sessiontest.Poll(t, "the unkillable process to go once thawed", func() bool {
		return !slices.Contains(acptest.ProcessesWith(h.marker), pid)
	})
}

// giveUp is the unkillable tests' ptyio GiveUp, after a kill grace of
// 100 ms.
const giveUp = 300 * time.Millisecond

// undyingHarness is a harness whose terminals are given up on giveUp
// after a SIGKILL, with a kill grace of 100 ms.
func undyingHarness(t *testing.T) *harness {
	l := sessiontest.Launcher
	l.GiveUp = giveUp
	return newHarness(t, Config{KillGrace: 100 * time.Millisecond, Launcher: l})
}

// sleeping waits until the shell of the harness's command has exec'd
// "sleep arg", and returns its pid.
func (h *harness) sleeping(arg string) int {
	h.t.Helper()
	var pid int
	sessiontest.Poll(h.t, "the shell to exec sleep "+arg, func() bool {
		for _, p := range acptest.ProcessesWith(h.marker) {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline"); strings.HasPrefix(string(b), "sleep\x00"+arg+"\x00") {
				pid = p
				return true
			}
		}
		return false
	})
	return pid
}
