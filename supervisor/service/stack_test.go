package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"shellagent/acp"
	"shellagent/supervisor/work/worktest"
)

// TestStackAlone: the stack and its services on a fake session: /up
// without a stack file says so and ends its turn; /up starts a service
// once its dependency is ready and ends its turn once both are; /down
// stops the services, dependents first, and holds its turn until they
// have stopped.
func TestStackAlone(t *testing.T) {
	dir := t.TempDir()
	h := worktest.NewHost()
	h.Dir = dir
	ss := NewStack(h)

	turn := h.NewTurn()
	ss.Up(turn, "")
	if !turn.Ended || len(h.Said) != 1 || !strings.HasPrefix(h.Said[0], "No stack file in "+dir) {
		t.Fatalf("/up without a stack file: ended %v, said %q", turn.Ended, h.Said)
	}

	file := "[services.db]\ncommand = \"db\"\n\n[services.web]\ncommand = \"web\"\ndepends_on = [\"db\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "shellagent.toml"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Said = nil
	turn = h.NewTurn()
	ss.Up(turn, "")
	var launched []string
	for _, spec := range h.Launched {
		launched = append(launched, spec.Line)
	}
	if got := strings.Join(launched, " "); got != "db web" || !turn.Ended || turn.Reason != acp.StopEndTurn || strings.Join(h.Said, "|") != "Ready: db, web." {
		t.Fatalf("/up: launched %q, ended %v, said %q", got, turn.Ended, h.Said)
	}
	if got := strings.Join(ss.Names(), " "); got != "db web" {
		t.Fatalf("names %q", got)
	}
	for _, name := range ss.Names() {
		if in := ss.Service(name).Info(); in.State != Ready || in.Term == nil || in.Call.Status() != acp.StatusInProgress {
			t.Fatalf("%s: %+v", name, in)
		}
	}

	h.Said = nil
	turn = h.NewTurn()
	ss.Down(turn, "")
	web, db := ss.Service("web").Info().Term.(*worktest.Run), ss.Service("db").Info().Term.(*worktest.Run)
	if !web.Stopped || db.Stopped || turn.Ended {
		t.Fatalf("/down stops web first: web %v, db %v, ended %v", web.Stopped, db.Stopped, turn.Ended)
	}
	stopped := &acp.ExitStatus{Signal: "SIGTERM"}
	h.Exit(web.ID(), stopped, false)
	h.Drain()
	if !db.Stopped {
		t.Fatal("/down did not stop db once web had stopped")
	}
	h.Exit(db.ID(), stopped, false)
	h.Drain()
	if !turn.Ended || len(h.Said) != 1 || h.Said[0] != "Stopped: web, db." {
		t.Fatalf("/down: ended %v, said %q", turn.Ended, h.Said)
	}
	for _, name := range ss.Names() {
		if in := ss.Service(name).Info(); in.State != Stopped || in.Call.Status() != acp.StatusCompleted {
			t.Errorf("%s after /down: %s, %s", name, in.State, in.Call.Status())
		}
	}
}

// TestStackBadReadyStartsNothing: /up a, and /restart a, of a file whose
// other service's ready condition /wait refuses start nothing: the file
// is refused whole, at the ready key's line. Before the file's load
// checked ready, /up a started a and said "Ready: a.", and /up named
// the table's line.
func TestStackBadReadyStartsNothing(t *testing.T) {
	for _, tc := range []struct{ ready, reason string }{
		{":99999", `services.b.ready: :99999 is not a port (1 to 65535`},
		{"(", `services.b.ready: "(" is not a regular expression`},
		{"exec:", "services.b.ready: exec: needs a command"},
	} {
		t.Run(tc.ready, func(t *testing.T) {
			dir := t.TempDir()
			file := "[services.a]\ncommand = \"sleep 601\"\n\n[services.b]\ncommand = \"sleep 602\"\ndepends_on = [\"a\"]\nready = \"" + tc.ready + "\"\n"
			if err := os.WriteFile(filepath.Join(dir, "shellagent.toml"), []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
			h := worktest.NewHost()
			h.Dir = dir
			ss := NewStack(h)
			for _, serve := range []func(turn *worktest.Turn){
				func(turn *worktest.Turn) { ss.Up(turn, "a") },
				func(turn *worktest.Turn) { ss.Up(turn, "") },
				func(turn *worktest.Turn) { ss.Restart(turn, "a") },
			} {
				h.Said = nil
				turn := h.NewTurn()
				serve(turn)
				want := filepath.Join(dir, "shellagent.toml") + ":7: " + tc.reason
				if !turn.Ended || len(h.Said) != 1 || !strings.Contains(h.Said[0], want) {
					t.Errorf("ended %v, said %q; want the refusal %q", turn.Ended, h.Said, want)
				}
			}
			if len(h.Launched) != 0 || len(ss.Names()) != 0 {
				t.Errorf("launched %v, services %v; want nothing started", h.Launched, ss.Names())
			}
		})
	}
}
