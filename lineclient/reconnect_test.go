package lineclient

import (
	"context"
	"encoding/base64"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shellagent/internal/clientview"
	"shellagent/internal/testloop"
)

// A terminal the client knew before it reconnected is shown, from the
// resume's snapshot, only what it wrote meanwhile: the bytes past those
// the client saw, with the bytes the agent dropped meanwhile said.
func TestViewShowsOnlyWhatItHadNotSeen(t *testing.T) {
	tests := []struct {
		name    string
		seen    string // the chunks the client printed before
		dropped int64  // the snapshot's droppedBytes
		data    string // the snapshot's bytes
		want    string // printed after the snapshot
	}{
		{"what it wrote meanwhile", "a\nb\n", 0, "a\nb\nc\nd\n", "c\nd\n"},
		{"nothing new", "a\nb\n", 0, "a\nb\n", ""},
		{"the ring dropped what was seen", "a\nb\n", 2, "b\nc\n", "c\n"},
		{"the ring dropped some of what was not", "a\n", 6, "d\ne\n", "[t1: 4 bytes of output written meanwhile were dropped; it continues from here]\nd\ne\n"},
		{"a snapshot behind the client", "a\nb\nc\n", 0, "a\n", ""},
	}
	for _, tt := range tests {
		var sb strings.Builder
		v := &view{p: newPrinter(&sb), sess: newSession("s")}
		v.output("t1", []byte(tt.seen))
		before := sb.Len()
		v.unseen("t1", tt.dropped, []byte(tt.data))
		if got := sb.String()[before:]; got != tt.want {
			t.Errorf("%s: printed %q, want %q", tt.name, got, tt.want)
		}
		// What it showed counts as seen: the same snapshot again shows nothing.
		after := sb.Len()
		v.unseen("t1", tt.dropped, []byte(tt.data))
		if sb.Len() != after {
			t.Errorf("%s: the same snapshot again printed %q", tt.name, sb.String()[after:])
		}
	}
}

// The client reconnects at most maxReconnects times in reconnectWindow,
// only with a daemon and a Reconnect, only while the session runs or a
// start-up that knows it (the first, or a reconnect's) starts it, and
// never once another client took it.
func TestMayReconnect(t *testing.T) {
	reconnect := func(context.Context, string) ([]string, error) { return nil, nil }
	start := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		cfg   Config
		phase phase
		at    []time.Duration // after start, one try each
		want  []bool
	}{
		{"three a minute", Config{Daemon: true, Reconnect: reconnect}, running,
			[]time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 59 * time.Second, 61 * time.Second},
			[]bool{true, true, true, false, false, true}},
		{"without a daemon", Config{Reconnect: reconnect}, running, []time.Duration{0}, []bool{false}},
		{"without Reconnect", Config{Daemon: true}, running, []time.Duration{0}, []bool{false}},
		{"while closing", Config{Daemon: true, Reconnect: reconnect}, closing, []time.Duration{0}, []bool{false}},
		{"while starting, before the session is known", Config{Daemon: true, Reconnect: reconnect}, starting, []time.Duration{0}, []bool{false}},
		{"while starting, the session known", Config{Daemon: true, Reconnect: reconnect}, starting, []time.Duration{0}, []bool{true}},
		{"while starting again", Config{Daemon: true, Reconnect: reconnect}, starting, []time.Duration{0}, []bool{true}},
		{"once another client took the session", Config{Daemon: true, Reconnect: reconnect}, running, []time.Duration{0}, []bool{false}},
	}
	for _, tt := range tests {
		c := &client{cfg: tt.cfg, phase: tt.phase, sess: newSession("s")}
		if strings.HasSuffix(tt.name, "before the session is known") {
			c.sess = nil
		}
		c.boot.again = strings.HasSuffix(tt.name, "again")
		c.taken = strings.HasSuffix(tt.name, "took the session")
		for i, d := range tt.at {
			if got := c.mayReconnect(start.Add(d)); got != tt.want[i] {
				t.Errorf("%s: try %d (at %v): %v, want %v", tt.name, i+1, d, got, tt.want[i])
			}
		}
	}
}

// With a daemon and Reconnect, an agent that goes in the middle of a
// turn is started again and the session resumed: what its terminal wrote
// meanwhile is shown, and the script goes on. The agent started again
// goes at once, before it answers anything, and the client reconnects
// once more, after a Reconnect that takes longer than the start-up
// timeout: the request the agent that went left unanswered is not late.
func TestReconnectAfterTheAgentGoes(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	var asked []string
	// The fake agent's start on a loaded machine: 1 s was seen to pass
	// at load 17.
	startTimeout := testloop.Bound(time.Second)
	cfg := withFake(t, Config{
		Input:        strings.NewReader("listed\ndie\nunknown\n"),
		Output:       &out,
		Daemon:       true,
		StartTimeout: startTimeout,
		Reconnect: func(ctx context.Context, id string) ([]string, error) {
			asked = append(asked, id) // one call at a time; read once Run has returned
			if len(asked) == 2 {
				time.Sleep(startTimeout + 500*time.Millisecond)
			}
			return nil, nil
		},
	}, "1")
	cfg.Env = append(cfg.Env, "LINECLIENT_FAKE_STARTS="+filepath.Join(t.TempDir(), "starts"))
	if _, err := runWithin(t, testloop.Wait, cfg); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"[the connection to the daemon ended (an upgrade in place ends it): reconnecting to s1]\n" +
			"[the end of \"die\" went with the connection: going on]\n",
		"[the connection to the daemon ended (an upgrade in place ends it): reconnecting to s1]\n" +
			"[agent: fake 1, ACP v2]\nmeanwhile\n",
		"[reattached to s1]\n> unknown\n",
		"[detached: the session runs on in the daemon, with 1 background item: ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the client printed:\n%s\nwant in it:\n%s", got, want)
		}
	}
	if !slices.Equal(asked, []string{"s1", "s1"}) {
		t.Errorf("Reconnect asked for %q, want s1 twice", asked)
	}
}

// What the client saw of a terminal counts once, however it came: a
// snapshot of a new terminal, or one while resuming, then chunks. A
// resume after a reconnect then shows only what came after.
func TestViewCountsEachByteOnce(t *testing.T) {
	snapshot := func(data string) *clientview.TerminalOutput {
		return &clientview.TerminalOutput{Data: base64.StdEncoding.EncodeToString([]byte(data))}
	}
	for _, resuming := range []bool{false, true} {
		var sb strings.Builder
		v := &view{p: newPrinter(&sb), sess: newSession("s")}
		v.sess.Resuming = resuming
		term, _ := v.sess.ApplyTerminal(&clientview.Update{TerminalID: "t1"})
		v.snapshot(term, snapshot("a\n"), true)
		v.sess.Resuming = false
		v.output("t1", []byte("b\n"))
		before := sb.Len()
		v.sess.Resuming = true
		v.snapshot(term, snapshot("a\nb\nc\n"), false)
		if got := sb.String()[before:]; got != "c\n" {
			t.Errorf("resuming=%v at first: the resume after the reconnect printed %q, want %q", resuming, got, "c\n")
		}
	}
}

// A daemon's upgrade in place that ends the connection while the client
// reattaches (--resume: its session/resume unanswered) does not end the
// client: it reconnects to the session it was reattaching to, shows its
// terminal, applies its settings and goes on. Before, it said that the
// agent closed its output and ended with ErrAgentExited, the session
// left behind.
func TestReconnectWhileReattaching(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	var asked []string
	cfg := withFake(t, Config{
		Input:    strings.NewReader("listed\n"),
		Output:   &out,
		Daemon:   true,
		Resume:   true,
		Settings: []Setting{{ID: "kill_grace", Value: "1s"}},
		Reconnect: func(ctx context.Context, id string) ([]string, error) {
			asked = append(asked, id) // one call at a time; read once Run has returned
			return nil, nil
		},
	}, "1")
	cfg.SessionID = "s1"
	cfg.Env = append(cfg.Env, "LINECLIENT_FAKE_STARTS="+filepath.Join(t.TempDir(), "starts"), "LINECLIENT_FAKE_GO_AT=session/resume")
	if _, err := runWithin(t, testloop.Wait, cfg); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	want := "[reattaching to s1 in /]\n" +
		"[the connection to the daemon ended (an upgrade in place ends it): reconnecting to s1]\n" +
		"[agent: fake 1, ACP v2]\n" +
		"[term_5 runs: serve]\nmeanwhile\n" +
		"[background: term_5 (serve)]\n" +
		"[reattached to s1]\n" +
		"[set kill_grace to 1s]\n" +
		"> listed\n"
	if got := out.String(); !strings.Contains(got, want) {
		t.Errorf("the client printed:\n%s\nwant in it:\n%s", got, want)
	}
	if !slices.Equal(asked, []string{"s1"}) {
		t.Errorf("Reconnect asked for %q, want s1 once", asked)
	}
}

// A daemon's upgrade in place that ends the connection before the first
// start-up has named the session (initialize, session/list or session/new
// unanswered) does not end the client either: it starts the agent again,
// from initialize, and reattaches (or opens its session). Before, it said
// that the agent closed its output and ended with ErrAgentExited; for
// session/new it still did (shown with the real binary: 2 of 177
// 'client --daemon' started in a loop while 'daemon upgrade' ran in a
// loop printed "[agent: shellagent devel, ACP v2]", then "[the agent
// closed its output]", and exited 1), as a session/new unanswered was
// taken to have maybe opened a session the client could not name. The
// daemon answers every request it has read before an upgrade closes the
// connection, so one unanswered was never read: the 175 others left 175
// sessions, none unnamed.
func TestStartAgainBeforeTheSessionIsNamed(t *testing.T) {
	t.Parallel()
	reattached := "[reattaching to s1 in /]\n" +
		"[term_5 runs: serve]\nmeanwhile\n" +
		"[background: term_5 (serve)]\n"
	for _, tt := range []struct {
		at     string
		resume bool
		then   string // what follows the new start's initialize
	}{
		{"initialize", true, reattached},
		{"session/list", true, reattached},
		{"session/new", false, "[session started in /]\n"},
	} {
		t.Run(tt.at, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			cfg := withFake(t, Config{
				Input:     strings.NewReader("listed\n"),
				Output:    &out,
				Daemon:    true,
				Resume:    tt.resume,
				Reconnect: func(context.Context, string) ([]string, error) { return nil, nil },
			}, "1")
			cfg.Env = append(cfg.Env, "LINECLIENT_FAKE_STARTS="+filepath.Join(t.TempDir(), "starts"), "LINECLIENT_FAKE_GO_AT="+tt.at)
			if _, err := runWithin(t, testloop.Wait, cfg); err != nil {
				t.Fatalf("Run: %v\n%s", err, out.String())
			}
			want := "[the connection to the daemon ended while the client started (an upgrade in place ends it): starting again]\n" +
				"[agent: fake 1, ACP v2]\n" + tt.then + "> listed\n"
			if got := out.String(); !strings.Contains(got, want) {
				t.Errorf("the client printed:\n%s\nwant in it:\n%s", got, want)
			}
		})
	}
}

// A detach whose relay then fails (its daemon closed the connection as
// the client's input ended: an upgrade in place at that moment) is a
// detach all the same when the daemon still has the session live: Run
// returns nil. When it has not, Run fails, saying why. Before, Run
// returned the relay's exit status either way.
func TestDetachWhileTheConnectionEnds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		live error // what Reconnect says
	}{{"the session live", nil}, {"the session gone", errors.New("s1 is no longer live in the daemon")}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			cfg := withFake(t, Config{
				Input:     strings.NewReader("listed\n"),
				Output:    &out,
				Daemon:    true,
				Reconnect: func(context.Context, string) ([]string, error) { return nil, tt.live },
			}, "1")
			cfg.Env = append(cfg.Env, "LINECLIENT_FAKE_EOF_EXIT=1")
			_, err := runWithin(t, testloop.Wait, cfg)
			got := out.String()
			if !strings.Contains(got, "[detached: the session runs on in the daemon, with 1 background item: ") {
				t.Errorf("the client printed:\n%s\nwant it to detach", got)
			}
			switch {
			case tt.live == nil && err != nil:
				t.Errorf("Run: %v, want nil: the session runs on\n%s", err, got)
			case tt.live != nil && err == nil:
				t.Errorf("Run: nil, want an error: the session is gone\n%s", got)
			case tt.live != nil && !strings.Contains(got, "[s1 is no longer live in the daemon]\n"):
				t.Errorf("the client printed:\n%s\nwant it to say the session is gone", got)
			}
		})
	}
}

// The client reconnects at most maxReconnects times a minute; past that
// it says why it does not reconnect, and that the session may run on in
// the daemon, with the command that resumes it. Before, the 4th end of
// the connection within a minute said only "the agent closed its output",
// as if the session had gone with it.
func TestReconnectsAreBounded(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	asked := 0
	cfg := withFake(t, Config{
		Input:  strings.NewReader(strings.Repeat("die\n", maxReconnects+1) + "never sent\n"),
		Output: &out,
		Daemon: true,
		Reconnect: func(context.Context, string) ([]string, error) {
			asked++ // one call at a time; read once Run has returned
			return nil, nil
		},
	}, "1")
	if _, err := runWithin(t, testloop.Wait, cfg); !errors.Is(err, ErrAgentExited) {
		t.Errorf("Run: %v, want ErrAgentExited", err)
	}
	got := out.String()
	if n := strings.Count(got, "reconnecting to s1]"); n != maxReconnects || asked != maxReconnects {
		t.Errorf("reconnected %d times, Reconnect asked %d times, want %d:\n%s", n, asked, maxReconnects, got)
	}
	want := "[the connection to the daemon ended again, after 3 reconnects within 1m0s: not reconnecting; " +
		"s1 may run on in the daemon (shellagent client --daemon --resume s1)]\n[the agent closed its output]\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("the client printed:\n%s\nwant at its end:\n%s", got, want)
	}
}
