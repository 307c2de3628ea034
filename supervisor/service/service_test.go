package service

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"shellagent/acp"
	"shellagent/internal/stack"
)

func TestDependencies(t *testing.T) {
	states := map[string]State{"db": Ready, "cache": Starting, "old": Failed, "gone": Stopped}
	lookup := func(n string) (State, bool) { s, ok := states[n]; return s, ok }
	for _, tt := range []struct {
		deps  []string
		ready bool
		why   string
	}{
		{nil, true, ""},
		{[]string{"db"}, true, ""},
		{[]string{"db", "cache"}, false, ""},
		{[]string{"cache", "old"}, false, "not started: its dependency old failed"},
		{[]string{"gone"}, false, "not started: its dependency gone stopped"},
		{[]string{"db", "none"}, false, "not started: its dependency none does not run"},
	} {
		ready, why := Dependencies(tt.deps, lookup)
		if ready != tt.ready || why != tt.why {
			t.Errorf("Dependencies(%v) = %v, %q; want %v, %q", tt.deps, ready, why, tt.ready, tt.why)
		}
	}
}

func TestStateNames(t *testing.T) {
	want := []string{"starting", "starting", "ready", "restarting", "failed", "stopped"}
	for s := Waiting; s <= Stopped; s++ {
		if s.String() != want[s] || s.Active() != (s < Failed) {
			t.Errorf("%d: %q active %v", s, s, s.Active())
		}
	}
}

// The frozen form's bytes are the upgrade's format: the old image's and
// the new one's must read each other.
func TestFrozenForm(t *testing.T) {
	f := Frozen{Def: &stack.Service{Name: "web"}, Project: "/p", State: Restarting, Runs: []string{"term_1"}, Gen: 2, RunGen: 1, NotStarted: "port 80 is in use", RestartAt: time.Unix(0, 0).UTC()}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Project":"/p"`, `"State":3`, `"Runs":["term_1"]`, `"Gen":2`, `"RunGen":1`, `"NotStarted":"port 80 is in use"`, `"EverReady":false`, `"RestartAt":"1970-01-01T00:00:00Z"`, `"LogFrom":0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("frozen form %s lacks %s", b, want)
		}
	}
	if strings.Contains(string(b), `"Term"`) {
		t.Errorf("frozen form %s has a Term with no run that runs", b)
	}
}

func TestRunExit(t *testing.T) {
	code := 3
	for _, tt := range []struct {
		es   acp.ExitStatus
		want stack.Exit
	}{
		{acp.ExitStatus{ExitCode: &code}, stack.Exit{Code: 3}},
		{acp.ExitStatus{Signal: "SIGKILL"}, stack.Exit{Signal: "SIGKILL"}},
		{acp.ExitStatus{}, stack.Exit{Code: -1}},
	} {
		if got := RunExit(&tt.es); got != tt.want {
			t.Errorf("RunExit(%+v) = %+v, want %+v", tt.es, got, tt.want)
		}
	}
}

func TestUpSummary(t *testing.T) {
	got := UpSummary([]Outcome{{Name: "db", Ready: true}, {Name: "web", State: Failed, Why: "not ready: timeout"}})
	if want := "Failed: web failed: not ready: timeout. Ready: db."; got != want {
		t.Errorf("UpSummary = %q, want %q", got, want)
	}
	if got := UpSummary([]Outcome{{Name: "db", Ready: true}, {Name: "web", Ready: true}}); got != "Ready: db, web." {
		t.Errorf("UpSummary = %q", got)
	}
}

func TestStatusText(t *testing.T) {
	now := time.Now()
	got := StatusText("shellagent.toml", []Row{
		{Name: "db", State: Ready, Ports: []int{5432, 5433}, Running: true, Pid: 42, Started: now.Add(-90 * time.Second), RSS: 3 << 20, CPU: 1234 * time.Millisecond},
		{Name: "web", State: Failed, Restarts: 2},
	}, now)
	for _, want := range []string{"Services of shellagent.toml:", "NAME  STATE   PID  UPTIME  RESTARTS  RSS     CPU    PORTS",
		"db    ready   42   1m30s   0         3.0MiB  1.23s  5432,5433", "web   failed  -    -       2         -       -      -"} {
		if !strings.Contains(got, want) {
			t.Errorf("StatusText lacks %q:\n%s", want, got)
		}
	}
}

func TestPortTaken(t *testing.T) {
	if got := PortTaken(80, 7, strings.Repeat("x", 100)); !strings.HasPrefix(got, "port 80 is in use by pid 7 (xxx") || !strings.Contains(got, "…); its command was not run") {
		t.Errorf("PortTaken = %q", got)
	}
	if got := PortTaken(80, 0, ""); got != "port 80 is in use (by a process this user cannot see); its command was not run" {
		t.Errorf("PortTaken = %q", got)
	}
}
