package ptyio

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"shellagent/contain/containtest"
	"shellagent/internal/testloop"
)

// A command whose process a SIGKILL does not end is reported ended
// anyway, GiveUp after the stop's first SIGKILL: Stopped "SIGKILL", and
// Left naming the process and its state. Its group stays held until the
// process goes, then the shell is reaped and the group released, and
// nothing more is reported. Before GiveUp, Exited never came: a
// session/close waited for it as long as the process stayed.
func TestUndyingIsReportedEnded(t *testing.T) {
	const giveUp = 300 * time.Millisecond
	l := launcher
	l.GiveUp = giveUp
	rec := newRecorder()
	rec.dir = t.TempDir()
	p, err := l.Launch(Command{
		Shell: "/bin/sh", Line: "echo ready; exec sleep 300", Dir: rec.dir,
		Env:  []string{"PATH=" + os.Getenv("PATH"), marker},
		Size: Size{Cols: 80, Rows: 24},
	}, rec, rec)
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, rec, "ready")
	pid := p.Pid()
	for deadline := time.Now().Add(testloop.Wait); procComm(pid) != "sleep"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the shell never exec'd sleep")
		}
	}
	thaw := containtest.Unkillable(t, pid)
	stopped := time.Now()
	p.Stop(50 * time.Millisecond)
	e := rec.wait(t)
	took := time.Since(stopped)
	if e.Stopped != "SIGKILL" || e.Shell != (Status{}) {
		t.Errorf("exit %+v, want Stopped SIGKILL and the shell's status unknown", e)
	}
	if len(e.Left) != 1 || e.Left[0].Pid != pid || e.Left[0].State != "D" || !strings.Contains(e.Left[0].Command, "sleep 300") {
		t.Errorf("Left = %+v, want pid %d, in state D, running sleep 300", e.Left, pid)
	}
	if took < giveUp || took > testloop.Bound(giveUp+time.Second) {
		t.Errorf("reported ended %v after the stop, want GiveUp (%v) after the SIGKILL", took, giveUp)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		t.Fatalf("the frozen process is gone before its thaw: %v", err)
	}
	thaw()
	// The shell is the agent's child: gone from /proc once release has
	// reaped it.
	for deadline := time.Now().Add(testloop.Wait); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not reaped %v after its thaw (state %q)", pid, testloop.Wait, procState(pid))
		}
	}
	select {
	case e := <-rec.exited:
		t.Errorf("a second exit: %+v", e)
	default:
	}
}

// procComm is the command name of process pid, "" if it is gone.
func procComm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm") // "" if gone
	return strings.TrimSpace(string(b))
}
