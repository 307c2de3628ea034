package lineclient

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"shellagent/internal/testloop"
)

// The fake agent's text for "escape": a window title, a screen clear, a
// bidi override and a carriage return that would overwrite the line.
const escapes = "title\x1b]0;pwned\x07 clear\x1b[2J bidi\u202e end\r over"

// rawOutput is the fake agent's terminal output for "escape": a terminal's
// own escape sequences, which the client passes on as they are.
const rawOutput = "raw\x1b[1mbold\x1b[0m\n"

// slack is what the bounds of these tests allow beyond the client's
// promise, for a loaded machine running -race.
const slack = 10 * time.Second

// runWithin runs the client on cfg and fails the test if Run has not
// returned within bound. It returns how long Run took, and its error.
func runWithin(t *testing.T, bound time.Duration, cfg Config) (time.Duration, error) {
	t.Helper()
	return runWithinCtx(t, context.Background(), bound, cfg)
}

func runWithinCtx(t *testing.T, ctx context.Context, bound time.Duration, cfg Config) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(bound):
		t.Fatalf("Run has not returned after %v", bound)
		return 0, nil
	}
}

// An agent that never answers, ignores SIGTERM and its input's end:
// initialize waits at most the start-up timeout (Config.StartTimeout: 5 s
// here, 10 s by default); the end of the input or an interrupt during
// start-up ends the client at once. Each time the agent gets SIGTERM,
// then SIGKILL a second later, and is gone when Run returns.
//
// The timeout is 5 s, not 1 s, because the rule needs an agent that
// ignores SIGTERM by then: the fake agent, this test binary run again,
// was seen to take over a second to start under load, and SIGTERM then
// ended it. The other cases do not time out: they wait for the agent to
// say it is ready.
func TestMuteAgent(t *testing.T) {
	t.Parallel()
	const timeout, noTimeout = 5 * time.Second, testloop.Wait
	if got := (&startup{c: &client{}}).timeout(); got != 10*time.Second {
		t.Errorf("the default start-up timeout is %v, want 10s", got)
	}
	tests := []struct {
		name     string
		act      string        // once the agent is ready: "eof" ends the input, "interrupt" interrupts
		timeout  time.Duration // Config.StartTimeout
		min, max time.Duration // how long Run takes
		err      string        // in Run's error; "" for none
		want     []string
	}{
		{"initialize times out", "", timeout, timeout, timeout + startGrace + slack,
			"did not answer initialize within 5s", []string{
				"[the agent " + os.Args[0] + " did not answer initialize within 5s: stopping it]\n",
				"[the agent did not exit within 1s of SIGTERM: SIGKILL sent]\n",
			}},
		{"the end of the input", "eof", noTimeout, 0, startGrace + slack,
			"", []string{
				"[the input ended before the session started: stopping the agent]\n",
				"[the agent did not exit within 1s of SIGTERM: SIGKILL sent]\n",
			}},
		{"an interrupt", "interrupt", noTimeout, 0, startGrace + slack,
			"interrupted while starting", []string{
				"[interrupted while starting: stopping the agent]\n",
				"[the agent did not exit within 1s of SIGTERM: SIGKILL sent]\n",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			var out, stderr syncBuffer
			interrupts := make(chan os.Signal, 1)
			cfg := withFake(t, Config{Input: r, Output: &out, AgentStderr: &stderr, Interrupts: interrupts, StartTimeout: tt.timeout}, "mute")
			acted := make(chan struct{})
			defer func() { <-acted }() // no t.Errorf after the test
			go func() {
				defer close(acted)
				if !stderr.await(muteReady) {
					t.Errorf("the agent's stderr lacks %q: %s", muteReady, stderr.String())
					return
				}
				switch tt.act {
				case "eof":
					_ = w.Close() // Best effort: checked by the output.
				case "interrupt":
					interrupts <- os.Interrupt
				}
			}()
			took, err := runWithin(t, tt.max, cfg)
			if (tt.err == "" && err != nil) || (tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err))) {
				t.Errorf("Run: %v, want an error with %q", err, tt.err)
			}
			if took < tt.min {
				t.Errorf("Run took %v, less than %v", took, tt.min)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			noneLeft(t, cfg.Env[len(cfg.Env)-1])
		})
	}
}

// hangRun is the client with the fake agent in the middle of a turn that
// never ends: the agent answers nothing more, ignores SIGTERM and reads
// nothing. The session's kill grace is 1s.
type hangRun struct {
	out, trace syncBuffer
	interrupts chan os.Signal
	cfg        Config
}

// script waits for each of waits in turn and sends an interrupt after
// each, from a goroutine of its own; the channel closes once it is done.
func (h *hangRun) script(t *testing.T, waits ...string) <-chan struct{} {
	done := make(chan struct{})
	t.Cleanup(func() { <-done }) // no t.Errorf after the test
	go func() {
		defer close(done)
		for _, s := range waits {
			if !h.out.await(s) {
				t.Errorf("no %q in the output:\n%s", s, h.out.String())
				return
			}
			h.interrupts <- os.Interrupt
		}
	}()
	return done
}

func startHang(t *testing.T) *hangRun {
	h := &hangRun{interrupts: make(chan os.Signal, 1)}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.Close() // Best effort: ends the client's input reader.
		_ = r.Close() // Best effort: likewise.
	})
	if _, err := w.WriteString("hang\n"); err != nil {
		t.Fatal(err)
	}
	h.cfg = withFake(t, Config{
		Input: r, Output: &h.out, Trace: &h.trace, Interrupts: h.interrupts,
		Settings: []Setting{{"kill_grace", "1s"}},
	}, "1")
	return h
}

// An agent that hangs mid-turn: after the second Ctrl-C the client waits
// for session/close for the kill grace plus 2 s and says so, then sends
// SIGTERM, then SIGKILL after as long again, and returns an error.
// SIGTERM to the client (the end of ctx) does the same without waiting
// for the close; an interrupt during either wait cuts it short. Each case
// starts once the agent says it hangs (and so ignores SIGTERM): under
// load it was seen to get SIGTERM before it had read the prompt.
func TestHangingAgent(t *testing.T) {
	t.Parallel()
	const waiting = "[waiting up to 3s for the session to close; Ctrl-C again stops the agent now]\n"
	t.Run("two interrupts", func(t *testing.T) {
		t.Parallel()
		h := startHang(t)
		done := h.script(t, "hanging\n", "[cancelling the foreground command; ")
		took, err := runWithin(t, 2*(time.Second+closeSlack)+slack, h.cfg)
		<-done
		if err == nil || !strings.Contains(err.Error(), "no answer to session/close within 3s") {
			t.Errorf("Run: %v, want no answer to session/close within 3s", err)
		}
		if took < 3*time.Second {
			t.Errorf("Run took %v: it did not wait for the close", took)
		}
		want := waiting + "[no answer to session/close within 3s: stopping the agent]\n" +
			"[the agent did not exit within 3s of SIGTERM: SIGKILL sent]\n"
		if !strings.HasSuffix(h.out.String(), want) {
			t.Errorf("output:\n%s\nwant it to end with:\n%s", h.out.String(), want)
		}
		noneLeft(t, h.cfg.Env[len(h.cfg.Env)-1])
	})
	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		h := startHang(t)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		go func() {
			if h.out.await("hanging\n") { // the agent ignores SIGTERM from now on
				cancel(errors.New("SIGTERM"))
			}
		}()
		_, err := runWithinCtx(t, ctx, time.Second+closeSlack+slack, h.cfg)
		if err == nil || !strings.Contains(err.Error(), "SIGTERM") {
			t.Errorf("Run: %v, want the cause SIGTERM", err)
		}
		want := "> hang\nhanging\n[SIGTERM: stopping the agent]\n[the agent did not exit within 3s of SIGTERM: SIGKILL sent]\n"
		if !strings.HasSuffix(h.out.String(), want) {
			t.Errorf("output:\n%s\nwant it to end with:\n%s", h.out.String(), want)
		}
		if strings.Contains(h.trace.String(), `"session/close"`) {
			t.Errorf("the client waited for a close:\n%s", h.trace.String())
		}
		noneLeft(t, h.cfg.Env[len(h.cfg.Env)-1])
	})
	t.Run("interrupts cut the waits short", func(t *testing.T) {
		t.Parallel()
		h := startHang(t)
		done := h.script(t, "hanging\n", "[cancelling the foreground command; ", waiting, "[interrupted again: stopping the agent]\n")
		_, err := runWithin(t, slack, h.cfg)
		<-done
		if err == nil || !strings.Contains(err.Error(), "interrupted while closing the session") {
			t.Errorf("Run: %v, want interrupted while closing the session", err)
		}
		want := waiting + "[interrupted again: stopping the agent]\n[interrupted again: SIGKILL sent to the agent]\n"
		if !strings.HasSuffix(h.out.String(), want) {
			t.Errorf("output:\n%s\nwant it to end with:\n%s", h.out.String(), want)
		}
		noneLeft(t, h.cfg.Env[len(h.cfg.Env)-1])
	})
}

// A line of 20 MiB from the agent is refused as soon as it passes the
// 16 MiB cap, without being held whole: the client says so, ends the
// agent and returns an error.
func TestAgentLineOverCap(t *testing.T) {
	var out syncBuffer
	cfg := withFake(t, Config{Input: strings.NewReader("flood\nnever sent\n"), Output: &out}, "1")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := runWithin(t, testloop.Wait, cfg) // a 20 MiB line: no promise of how fast
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "the agent sent a line longer than 16 MiB") {
		t.Errorf("Run: %v, want a line longer than 16 MiB", err)
	}
	want := "> flood\n[the agent sent a line longer than 16 MiB, which the client refuses: stopping the agent]\n"
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("output:\n%s\nwant it to end with:\n%s", out.String(), want)
	}
	// Reading up to the cap allocates about twice the cap as the line
	// grows; holding the whole line, then decoding it, takes five times
	// the line.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("the client allocated %d MiB for a 20 MiB line", alloc>>20)
	}
	noneLeft(t, cfg.Env[len(cfg.Env)-1])
}

// Text from the agent (messages, chunks, titles, tool call content, error
// messages) is printed with its control characters escaped; a terminal's
// output is printed as it is.
func TestAgentEscapes(t *testing.T) {
	out, _ := runFake(t, Config{Input: strings.NewReader("escape\nrefuse\n")})
	for _, want := range []string{
		"\ntitle\\x1b]0;pwned\\a clear\\x1b[2J bidi\\u202e end\\r over\n",
		"\nchunk\\x1b[31m red\n",
		"\n[call_e in_progress: job\\x1b[5m]\n",
		"\n[call_e completed: done\\u009b2J]\n",
		"\n" + rawOutput,
		"\n[prompt refused: refused\\x1b[2J (-32602)]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%q", want, out)
		}
	}
	if n := strings.Count(out, "\x1b"); n != strings.Count(rawOutput, "\x1b") {
		t.Errorf("%d escape characters reached the output, want only the terminal's %d:\n%q", n, strings.Count(rawOutput, "\x1b"), out)
	}
}
