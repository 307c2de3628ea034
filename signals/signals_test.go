package signals

import (
	"errors"
	"maps"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestName(t *testing.T) {
	names := map[unix.Signal]string{unix.SIGTERM: "SIGTERM", unix.SIGKILL: "SIGKILL", unix.SIGINT: "SIGINT", unix.SIGHUP: "SIGHUP"}
	if runtime.GOOS == "linux" {
		// As bash's kill -l names them; 32 and 33 are glibc's own.
		maps.Copy(names, map[unix.Signal]string{32: "SIG32", 33: "SIG33", 34: "SIGRTMIN", 37: "SIGRTMIN+3", 49: "SIGRTMIN+15", 50: "SIGRTMAX-14", 63: "SIGRTMAX-1", 64: "SIGRTMAX", 65: "SIG65"})
	}
	for sig, want := range names {
		if got := Name(sig); got != want {
			t.Errorf("Name(%d) = %q, want %q", sig, got, want)
		}
	}
}

// fake is a Target that records what it was sent, and stays alive until
// a kill when it ignores SIGTERM.
type fake struct {
	ignoresTerm bool          // processes survive SIGTERM
	slow        time.Duration // how long Signal takes
	err         error

	mu    sync.Mutex
	sent  []string
	at    []time.Time
	alive bool
}

func (f *fake) Signal(sigs ...unix.Signal) (bool, error) {
	time.Sleep(f.slow)
	f.mu.Lock()
	defer f.mu.Unlock()
	names := ""
	for _, s := range sigs {
		names += Name(s) + " "
	}
	f.sent, f.at = append(f.sent, names), append(f.at, time.Now())
	reached := f.alive
	if !f.ignoresTerm {
		f.alive = false
	}
	return reached, f.err
}

func (f *fake) Kill() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent, f.at = append(f.sent, "KILL"), append(f.at, time.Now())
	reached := f.alive
	f.alive = false
	return reached, nil
}

func (f *fake) isAlive() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.alive
}

func TestEscalation(t *testing.T) {
	tests := []struct {
		name        string
		ignoresTerm bool
		empty       bool
		grace       time.Duration
		hurry       bool
		want        unix.Signal
		wantFirst   string
	}{
		{"TERM is enough", false, false, time.Hour, false, unix.SIGTERM, "SIGTERM SIGCONT SIGHUP "},
		{"TERM ignored: KILL after the grace", true, false, 200 * time.Millisecond, false, unix.SIGKILL, "SIGTERM SIGCONT SIGHUP "},
		{"a second cancel skips the grace", true, false, time.Hour, true, unix.SIGKILL, "SIGTERM SIGCONT SIGHUP "},
		{"nothing alive: no signal counts", false, true, time.Hour, false, 0, "SIGTERM SIGCONT SIGHUP "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{ignoresTerm: tt.ignoresTerm, alive: !tt.empty}
			start := time.Now()
			e := Escalate(f, tt.grace)
			if tt.hurry {
				e.Hurry()
				e.Hurry() // idempotent
			}
			for deadline := time.Now().Add(10 * time.Second); f.isAlive(); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("target still alive")
				}
			}
			if tt.empty {
				time.Sleep(50 * time.Millisecond) // let the first round happen
			}
			e.Finish()
			if got := e.Last(); got != tt.want {
				t.Errorf("Last() = %v, want %v", got, tt.want)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.sent) == 0 || f.sent[0] != tt.wantFirst {
				t.Fatalf("sent %q", f.sent)
			}
			if tt.want == unix.SIGKILL && !tt.hurry && f.at[1].Sub(start) < tt.grace {
				t.Errorf("SIGKILL %v after the start, before the %v grace", f.at[1].Sub(start), tt.grace)
			}
		})
	}
}

// The grace runs from Escalate: a first round that takes longer than the
// grace (a large set on a loaded machine) is followed by SIGKILL at once,
// not after another grace.
func TestEscalationGraceIncludesTheFirstRound(t *testing.T) {
	t.Parallel()
	const slow, grace = 2 * time.Second, time.Second
	f := &fake{ignoresTerm: true, alive: true, slow: slow}
	start := time.Now()
	e := Escalate(f, grace)
	for deadline := time.Now().Add(10 * time.Second); f.isAlive(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("target still alive")
		}
	}
	e.Finish()
	f.mu.Lock()
	defer f.mu.Unlock()
	// SIGKILL is due as the first round ends (2 s); after a grace counted
	// from there it would come at 3 s.
	if len(f.sent) < 2 || f.sent[1] != "KILL" {
		t.Fatalf("sent %q", f.sent)
	}
	if at := f.at[1].Sub(start); at >= slow+grace {
		t.Errorf("SIGKILL %v after the start: the grace was counted from the end of the first round (%v)", at, slow)
	}
}

func TestEscalationKeepsTheFirstError(t *testing.T) {
	first := errors.New("first")
	f := &fake{alive: true, err: first}
	e := Escalate(f, time.Hour)
	for deadline := time.Now().Add(10 * time.Second); f.isAlive(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("target still alive")
		}
	}
	e.Finish()
	if !errors.Is(e.Err(), first) {
		t.Errorf("Err() = %v", e.Err())
	}
}
